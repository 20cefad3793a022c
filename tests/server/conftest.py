"""Real servers for the service tests: uvicorn in a thread on 127.0.0.1, on a free port (slow; PostgreSQL:
../conftest.py), or the app called in-process (``app_factory``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from server_helpers import AppInProcess, RunningServer, in_process, serve

from loopback import starts_processes
from shortlist.server import ServerSettings


@pytest.fixture
@starts_processes
def server_factory() -> Callable[..., contextlib.AbstractContextManager[RunningServer]]:
    """``server_factory(**settings)``: a context manager running a server with those settings."""

    def factory(
        prepare: Callable[[Any], None] | None = None, **fields: Any
    ) -> contextlib.AbstractContextManager[RunningServer]:
        return serve(ServerSettings(**fields), prepare=prepare)

    return factory


@pytest.fixture(params=["in-process", pytest.param("uvicorn", marks=pytest.mark.slow)])
def app_factory(
    request: pytest.FixtureRequest,
) -> Callable[..., contextlib.AbstractContextManager[AppInProcess | RunningServer]]:
    """``app_factory(**settings)``: for tests of a status code, a message or a body, which only talk to the app
    through ``client()``: each runs twice, on the app called in-process (the fast loop) and on a real uvicorn
    server like ``server_factory``'s (slow: the full run proves what it proved before)."""

    def factory(
        prepare: Callable[[Any], None] | None = None, **fields: Any
    ) -> contextlib.AbstractContextManager[AppInProcess | RunningServer]:
        if request.param == "uvicorn":
            return serve(ServerSettings(**fields), prepare=prepare)
        return in_process(ServerSettings(**fields), prepare=prepare)

    return factory
