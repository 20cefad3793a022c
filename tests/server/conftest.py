"""Real servers for the service tests: uvicorn in a thread on 127.0.0.1, on a free port."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from server_helpers import (  # noqa: F401
    EXAMPLE_CATALOG,
    FIXTURES,
    PostgresServer,
    RunningServer,
    _free_port,
    _pg_bin,
    running_postgres,
    serve,
)

from shortlist.server import ServerSettings


@pytest.fixture
def server_factory() -> Callable[..., contextlib.AbstractContextManager[RunningServer]]:
    """``server_factory(**settings)``: a context manager running a server with those settings."""

    def factory(
        prepare: Callable[[Any], None] | None = None, **fields: Any
    ) -> contextlib.AbstractContextManager[RunningServer]:
        return serve(ServerSettings(**fields), prepare=prepare)

    return factory


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session; skipped (with the reason) when the binaries are missing."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def pg_dsn(postgres: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's PostgreSQL server."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://postgres@127.0.0.1:{postgres.port}/{name}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
