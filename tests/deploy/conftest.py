"""Fixtures of the deployment tests: a real PostgreSQL server of their own (a module's replicas share it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loopback import PostgresServer, running_postgres, starts_processes


@pytest.fixture(scope="module")
@starts_processes
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server in a temp dir on a free loopback port; skipped when the binaries are missing."""
    with running_postgres("shortlist-deploy-pg-") as server:
        yield server
