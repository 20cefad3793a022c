"""Slow and idle connections are closed, and connections are capped (issue 12, item 3).

Real ``shortlist serve`` processes on 127.0.0.1 and raw sockets: half-sent headers (slowloris,
one more header line every second), idle kept-alive connections and a connection burst over the
cap. Assertions follow the order of events (the server closes each socket; a normal request is
answered while the half-header sockets are still open), with generous deadlines only as a guard.
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from serve_process import serve_process
from server_helpers import EXAMPLE_CATALOG

from loopback import wait_until
from shortlist.server import ServerSettings, create_app

pytestmark = pytest.mark.slow  # connection deadlines of `shortlist serve` processes

HALF_HEADER = b"POST /v1/select HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def _half_header(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(HALF_HEADER)
    sock.setblocking(False)
    return sock


def _closed(sock: socket.socket, got: dict[int, bytes]) -> bool:
    """Drain what the server sent; True once it closed the connection (EOF or reset)."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
            got[sock.fileno()] = got.get(sock.fileno(), b"") + data
    except BlockingIOError:
        return False
    except OSError:
        return True


def _wait_closed(socks: list[socket.socket], seconds: float, trickle_s: float = 1.0) -> tuple[int, dict[int, bytes]]:
    """Trickle a header line into each open socket until the server closes all; return (still open, data)."""
    got: dict[int, bytes] = {}
    open_ = {s.fileno(): s for s in socks}
    deadline = time.monotonic() + seconds
    next_line = time.monotonic() + trickle_s
    n = 0
    while open_ and time.monotonic() < deadline:
        ready, _, _ = select.select(list(open_.values()), [], [], 0.1)
        for sock in ready:
            if _closed(sock, got):
                del open_[sock.fileno()]
        if time.monotonic() >= next_line:
            n += 1
            for sock in list(open_.values()):
                try:
                    sock.send(f"X-Slow-{n}: a\r\n".encode())
                except BlockingIOError:
                    pass
                except OSError:
                    del open_[sock.fileno()]
            next_line = time.monotonic() + trickle_s
    return len(open_), got


def _metric(url: str, reason: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(f'shortlist_http_connections_closed_total{{reason="{reason}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.slow
def test_half_header_connections_are_closed_by_the_default_header_deadline(tmp_path: Path) -> None:
    # the defaults of `shortlist serve`, no flag: before the fix, none of these was ever closed
    with serve_process(tmp_path, "--catalog", f"ex={EXAMPLE_CATALOG}") as srv:
        socks = [_half_header(srv.port) for _ in range(50)]
        try:
            r = httpx.post(f"{srv.url}/v1/select", json={"query": "send an email", "catalog": "ex"}, timeout=10)
            assert r.status_code == 200  # a normal request is served while they hang
            still_open_after_request, _ = _wait_closed(socks, 0.2)
            assert still_open_after_request == 50  # ... and was answered before any of them was closed
            still_open, got = _wait_closed(socks, 40)
        finally:
            for s in socks:
                s.close()
        assert still_open == 0, f"{still_open} of 50 half-header connections still open"
        assert all(data.startswith(b"HTTP/1.1 408 ") for data in got.values()) and len(got) == 50
        assert _metric(srv.url, "header_timeout") == 50
        assert "header_timeout" in srv.log_text()  # the WARNING summary line


def _raw_request(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, "closed before the answer"
        data += chunk
    return data


def _eof_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing ``sock`` within ``seconds`` (None: still open)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        return data


@pytest.mark.slow
def test_idle_silent_and_over_the_cap_connections_are_closed(tmp_path: Path) -> None:
    flags = ("--timeout-keep-alive", "1", "--timeout-header", "2", "--max-connections", "5")
    with serve_process(tmp_path, *flags) as srv:
        # idle after a response: closed by the keep-alive timeout, with no bytes
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        assert _raw_request(idle).startswith(b"HTTP/1.1 200 ")
        assert _eof_within(idle, 20) == b""
        idle.close()
        # connected but silent: 408 once the header deadline passes
        silent = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        answer = _eof_within(silent, 20)
        silent.close()
        assert answer is not None and answer.startswith(b"HTTP/1.1 408 ") and b"header_timeout" in answer
        # five connections held open, the sixth is refused at once with 503 and closed
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(5)]
        extra = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        refused = _eof_within(extra, 1.5)  # before the held ones reach their 2 s header deadline
        extra.close()
        for s in held:
            s.close()
        assert refused is not None and refused.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in refused
        time.sleep(0.5)  # the held sockets' closes reach the server before /metrics is asked
        assert _metric(srv.url, "idle") >= 1
        assert _metric(srv.url, "header_timeout") >= 1
        assert _metric(srv.url, "over_limit") >= 1


def test_serve_refuses_out_of_range_connection_flags(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--timeout-header", "-1", wait=False) as srv:
        assert srv.proc.wait(60) == 2
    assert "--timeout-header must be >= 0" in srv.log_text()


@pytest.mark.parametrize("protocol", ["HttpToolsLimitedProtocol", "H11LimitedProtocol"])
def test_both_protocols_enforce_the_header_deadline_and_serve_normally(protocol: str) -> None:
    from shortlist.server._protocol import ServiceConfig

    settings = ServerSettings.build(env={}, catalogs={"ex": str(EXAMPLE_CATALOG)})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = ServiceConfig(
        create_app(settings),
        http=f"shortlist.server._protocol:{protocol}",
        log_level="warning",
        timeout_header=0.5,
        limit_connections=None,
        startup_timeout=60,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, seconds=10, interval=0.02), "the server did not start"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            for _ in range(3):  # kept alive across requests, each one's header on time
                r = client.post("/v1/select", json={"query": "send an email", "catalog": "ex"})
                assert r.status_code == 200
        slow = _half_header(port)
        still_open, got = _wait_closed([slow], 20, trickle_s=0.1)
        slow.close()
        assert still_open == 0 and next(iter(got.values())).startswith(b"HTTP/1.1 408 ")
        # a header sent whole after an idle pause on a kept-alive connection is served
        keep = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert _raw_request(keep).startswith(b"HTTP/1.1 200 ")
        time.sleep(0.3)
        assert _raw_request(keep).startswith(b"HTTP/1.1 200 ")
        keep.close()
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
