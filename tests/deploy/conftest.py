"""Fixtures of the deployment tests: a real PostgreSQL server, through the server tests' helper module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_helpers import PostgresServer, running_postgres


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server in a temp dir on a free loopback port; skipped when the binaries are missing."""
    with running_postgres("shortlist-deploy-pg-") as server:
        yield server
