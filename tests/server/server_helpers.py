"""Helpers of the server tests: a real uvicorn server in a thread (PostgreSQL and free ports: ``loopback``)."""

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

from loopback import wait_until
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
        if not wait_until(lambda: server.started or not thread.is_alive(), seconds=10, interval=0.02):
            raise RuntimeError("the test server did not start within 10 s")
        if not server.started:
            raise RuntimeError("the test server's thread ended before it started")
        yield RunningServer(f"http://{host}:{port}", server, thread, app)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


@dataclass
class AppInProcess:
    """The app of ``settings`` called in this process (its lifespan run once): ``client()`` as a running
    server's, for tests of a status, a message or a body, which need no socket."""

    url: str
    app: Any
    _test_client: Any

    def client(self, key: str | None = None, **kwargs: Any) -> Any:
        """An HTTP client of the app (Starlette's test client is built on ``httpx2``: so is this one)."""
        import httpx2

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # the test client's transport calls the app through the portal its entered context keeps open
        transport = self._test_client._transport
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30.0, transport=transport, **kwargs)


@contextlib.contextmanager
def in_process(settings: ServerSettings, prepare: Callable[[Any], None] | None = None) -> Iterator[AppInProcess]:
    """The app of ``settings`` in this process until the block exits, its requests from a loopback address
    (as a test's requests to a server on 127.0.0.1 are); a server error answers 500, as uvicorn's would."""
    from fastapi.testclient import TestClient

    app = create_app(settings)
    if prepare is not None:
        prepare(app)
    url = "http://127.0.0.1"
    with TestClient(app, base_url=url, raise_server_exceptions=False, client=("127.0.0.1", 50000)) as test_client:
        yield AppInProcess(url, app, test_client)
