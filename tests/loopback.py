"""Loopback servers for the tests, written once: a free port, waiting until a server answers,
an HTTP handler served from a thread, a real PostgreSQL server, and ``starts_processes``, the tag of a
fixture that starts any of them (its tests are ``slow``).

Importable from every test module (``pythonpath = ["tests"]`` in pyproject's pytest section).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

import httpx

__all__ = [
    "LOOPBACK",
    "HTTPThread",
    "PostgresServer",
    "free_port",
    "fresh_database",
    "http_thread",
    "pg_bin",
    "running_postgres",
    "start_http_thread",
    "starts_processes",
    "wait_http_ready",
    "wait_listening",
    "wait_until",
]

LOOPBACK = "127.0.0.1"

_F = TypeVar("_F", bound=Callable[..., object])


def starts_processes(fixture: _F) -> _F:
    """Tag a fixture that starts a server, a process or a browser: every test that uses it, directly or through
    another fixture, is marked ``slow`` at collection (``tests/conftest.py``), out of the fast loop. Put it
    under ``@pytest.fixture``::

        @pytest.fixture
        @starts_processes
        def chat_server() -> Iterator[ChatServer]: ...
    """
    fixture.starts_processes = True  # type: ignore[attr-defined]
    return fixture


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free on ``host`` a moment ago (the kernel picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_until(
    ready: Callable[[], bool],
    *,
    seconds: float,
    proc: subprocess.Popen[str] | subprocess.Popen[bytes] | None = None,
    interval: float = 0.1,
) -> bool:
    """Poll ``ready()`` until it is true (True), ``proc`` exits or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(interval)
    return False


def wait_http_ready(
    url: str,
    *,
    seconds: float,
    proc: subprocess.Popen[str] | subprocess.Popen[bytes] | None = None,
    path: str = "/readyz",
) -> bool:
    """Poll ``GET url+path`` until it answers 200 (True), ``proc`` exits or ``seconds`` pass (False)."""

    def answered() -> bool:
        try:
            return httpx.get(f"{url}{path}", timeout=2, headers={"Connection": "close"}).status_code == 200
        except httpx.TransportError:
            return False

    return wait_until(answered, seconds=seconds, proc=proc)


def wait_listening(
    port: int,
    *,
    seconds: float,
    proc: subprocess.Popen[str] | subprocess.Popen[bytes] | None = None,
    host: str = LOOPBACK,
) -> bool:
    """Poll a TCP connect to ``host:port`` until it is accepted (True), ``proc`` exits or ``seconds`` pass."""

    def accepted() -> bool:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
        except OSError:
            return False
        return True

    return wait_until(accepted, seconds=seconds, proc=proc)


class _QuietThreadingHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up (a timeout test) is nothing to report


@dataclass
class HTTPThread:
    """A ``http.server`` handler served from a daemon thread on a free loopback port."""

    httpd: ThreadingHTTPServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://{LOOPBACK}:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def start_http_thread(handler: type[BaseHTTPRequestHandler], *, quiet: bool = False) -> HTTPThread:
    """Start serving ``handler`` (one thread per request); the caller must :meth:`HTTPThread.close` it."""
    cls = _QuietThreadingHTTPServer if quiet else ThreadingHTTPServer
    httpd = cls((LOOPBACK, 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return HTTPThread(httpd, thread)


@contextlib.contextmanager
def http_thread(handler: type[BaseHTTPRequestHandler], *, quiet: bool = False) -> Iterator[HTTPThread]:
    """Serve ``handler`` until the block exits. ``quiet``: do not print errors of clients that hung up."""
    server = start_http_thread(handler, quiet=quiet)
    try:
        yield server
    finally:
        server.close()


# -- PostgreSQL -------------------------------------------------------------------------------


def pg_bin(name: str) -> str | None:
    """The path of a PostgreSQL server binary (on PATH or in Debian's versioned folders)."""
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
        return f"postgresql://postgres@{LOOPBACK}:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.runas, self.pg_ctl, "-D", self.datadir, "-w", "-t", "30", *args],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.datadir} -c listen_addresses={LOOPBACK} -c fsync=off"
        self.ctl("-o", opts, "-l", f"{self.datadir}/server.log", "start")

    def stop(self, mode: str = "fast") -> None:
        self.ctl("-m", mode, "stop")


@contextlib.contextmanager
def running_postgres(prefix: str = "shortlist-pg-") -> Iterator[PostgresServer]:
    """A real PostgreSQL server in a temp dir (under /tmp) on a free loopback port, stopped on exit.

    Skips the calling test (with the reason) when the server binaries are missing, or when running
    as root without a ``postgres`` user to run the server as (initdb refuses root).
    """
    import os
    import pwd
    import shutil
    import tempfile

    import pytest

    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
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
    server = PostgresServer(datadir, free_port(), runas, pg_ctl)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop("immediate")
        shutil.rmtree(datadir, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server: PostgresServer) -> Iterator[str]:
    """A new, empty database on ``server`` for one test, dropped afterwards; yields its DSN."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql://postgres@{LOOPBACK}:{server.port}/{name}"
    finally:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
