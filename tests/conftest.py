"""Fixtures shared by every test folder: a real PostgreSQL server for the session, a fresh database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loopback import PostgresServer, fresh_database, running_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session; skipped (with the reason) when the binaries are missing."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def pg_dsn(postgres: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's PostgreSQL server."""
    with fresh_database(postgres) as dsn:
        yield dsn
