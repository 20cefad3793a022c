"""Real servers for the service tests: uvicorn in a thread on 127.0.0.1, on a free port."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from server_helpers import EXAMPLE_CATALOG, FIXTURES, PostgresServer, RunningServer, _free_port, _pg_bin, serve  # noqa: F401

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
    import os
    import pwd
    import shutil
    import subprocess
    import tempfile

    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; run scripts/install-postgres")
    datadir = tempfile.mkdtemp(prefix="shortlist-pg-")  # in /tmp, not under pytest's root-only folders
    runas: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the server as the postgres user
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(datadir, pw.pw_uid, pw.pw_gid)
        runas = ["runuser", "-u", "postgres", "--"]
    done = subprocess.run(
        [*runas, initdb, "-D", datadir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed: {done.stderr.strip()[-2000:]}")
    server = PostgresServer(datadir, _free_port(), runas, pg_ctl)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop("immediate")
        shutil.rmtree(datadir, ignore_errors=True)


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
