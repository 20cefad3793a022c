"""Helpers of the server tests: a real uvicorn server in a thread, a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from shortlist.server import ServerSettings, create_app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXAMPLE_CATALOG = Path(str(resources.files("shortlist.data") / "example_tools.json"))


@dataclass
class RunningServer:
    """A server started by a test: its base URL, the uvicorn server and its thread."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread
    app: Any

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0, **kwargs)


@contextlib.contextmanager
def serve(
    settings: ServerSettings, host: str = "127.0.0.1", prepare: Callable[[Any], None] | None = None
) -> Iterator[RunningServer]:
    """Run the app of ``settings`` in uvicorn on a free port of ``host`` until the block exits."""
    app = create_app(settings)
    if prepare is not None:
        prepare(app)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=10)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.02)
        if not server.started:
            raise RuntimeError("the test server did not start")
        yield RunningServer(f"http://{host}:{port}", server, thread, app)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def _pg_bin(name: str) -> str | None:
    import glob
    import shutil

    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@dataclass
class PostgresServer:
    """A PostgreSQL server a test session started itself (temp data dir, free loopback port)."""

    datadir: str
    port: int
    runas: list[str]
    pg_ctl: str

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        import subprocess

        subprocess.run(
            [*self.runas, self.pg_ctl, "-D", self.datadir, "-w", "-t", "30", *args],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.ctl("-o", opts, "-l", f"{self.datadir}/server.log", "start")

    def stop(self, mode: str = "fast") -> None:
        self.ctl("-m", mode, "stop")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_postgres(prefix: str = "shortlist-pg-") -> Iterator[PostgresServer]:
    """A real PostgreSQL server in a temp dir (under /tmp) on a free loopback port, stopped on exit.

    Skips the calling test (with the reason) when the server binaries are missing, or when running
    as root without a ``postgres`` user to run the server as (initdb refuses root).
    """
    import os
    import pwd
    import shutil
    import subprocess
    import tempfile

    import pytest

    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; run scripts/install-postgres")
    datadir = tempfile.mkdtemp(prefix=prefix)  # in /tmp, not under pytest's root-only folders
    runas: list[str] = []
    if os.geteuid() == 0:
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
