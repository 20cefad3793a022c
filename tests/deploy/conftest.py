"""Fixtures of the deployment tests: a real PostgreSQL server, through the server tests' helper module."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from server_helpers import PostgresServer, _free_port, _pg_bin


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server in a temp dir on a free loopback port; skipped when the binaries are missing."""
    import pwd

    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; run scripts/install-postgres")
    datadir = tempfile.mkdtemp(prefix="shortlist-deploy-pg-")
    runas: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
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
