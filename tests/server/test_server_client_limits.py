"""One client cannot starve the service, and health checks are never starved (issue 27, item 5).

1,000 idle connections from one client filled the per-worker connection cap: every other
client, health checks included, got 503 (116 of 117 health checks failed over 25 s). Now a
source address holds at most ``--max-connections-per-client`` connections per worker, and
``--health-port`` is a second listener serving only ``/healthz`` and ``/readyz``, counted apart
from the service port. Real ``shortlist serve`` processes; the "other client" connects from
127.0.0.2 (loopback covers 127.0.0.0/8), the attacker from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from serve_process import serve_process
from server_helpers import EXAMPLE_CATALOG

from loopback import free_port, wait_http_ready, wait_until
from shortlist.server import ServerSettings, create_app

pytestmark = pytest.mark.slow  # `shortlist serve` processes and raw sockets


def _silent(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _refusal(sock: socket.socket, seconds: float = 1.0) -> bytes | None:
    """What the server sent before closing ``sock`` within ``seconds`` (None: it is held open)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return data


def _client(url: str, source: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=10, transport=httpx.HTTPTransport(local_address=source))


def _metric(client: httpx.Client, reason: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'shortlist_http_connections_closed_total{{reason="{reason}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_one_client_holding_idle_connections_leaves_room_for_the_others(tmp_path: Path) -> None:
    flags = ("--catalog", f"ex={EXAMPLE_CATALOG}", "--max-connections", "30", "--max-connections-per-client", "5")
    with serve_process(tmp_path, *flags, "--timeout-header", "60") as srv, contextlib.ExitStack() as sockets:
        attack = [sockets.enter_context(_silent(srv.port)) for _ in range(40)]  # more than the cap, one address
        answers = [_refusal(s) for s in attack]
        held = [s for s, a in zip(attack, answers, strict=True) if a is None]
        refused = [a for a in answers if a is not None]
        assert len(held) == 5 and len(refused) == 35
        assert all(a.startswith(b"HTTP/1.1 503 ") and b"from your address" in a for a in refused)
        with _client(srv.url, "127.0.0.2") as other:  # another client is served meanwhile
            r = other.post("/v1/select", json={"query": "send an email", "catalog": "ex"})
            assert r.status_code == 200
            assert other.get("/readyz").status_code == 200
            assert _metric(other, "client_over_limit") == 35
        sockets.close()
        # the closes are counted back: the attacker's address gets connections again
        time.sleep(0.5)
        again = [sockets.enter_context(_silent(srv.port)) for _ in range(5)]
        assert all(_refusal(s, 0.5) is None for s in again)
        sockets.close()
        assert "client_over_limit" in srv.log_text()  # the WARNING summary line


def test_the_health_listener_answers_while_the_service_port_is_full(tmp_path: Path) -> None:
    health = free_port()
    flags = ("--max-connections", "10", "--health-port", str(health), "--timeout-header", "60")
    with serve_process(tmp_path, *flags) as srv, contextlib.ExitStack() as sockets:
        held = [sockets.enter_context(_silent(srv.port, f"127.0.0.{3 + i}")) for i in range(10)]  # ten clients
        extra = _silent(srv.port, "127.0.0.30")
        refused = _refusal(extra)
        extra.close()
        assert refused is not None and refused.startswith(b"HTTP/1.1 503 ")  # the service port is full
        with _client(f"http://127.0.0.1:{health}", "127.0.0.31") as probe:
            for _ in range(5):  # probes are served, each on a new connection
                assert probe.get("/readyz", headers={"Connection": "close"}).status_code == 200
                assert probe.get("/healthz", headers={"Connection": "close"}).status_code == 200
            off = probe.get("/v1/models")  # the health listener never serves the API
            assert off.status_code == 404 and "health listener" in off.json()["error"]["message"]
            assert probe.post("/v1/select", json={"query": "x"}).status_code == 404
        assert len(held) == 10


def test_the_health_listener_with_several_workers(tmp_path: Path) -> None:
    health = free_port()
    with serve_process(tmp_path, "--workers", "2", "--health-port", str(health)) as srv:
        url = f"http://127.0.0.1:{health}"
        assert wait_http_ready(url, seconds=60)
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 404
        assert httpx.get(f"{srv.url}/metrics", timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--max-connections-per-client", "-1"), "--max-connections-per-client must be >= 0"),
        (("--port", "PORT", "--health-port", "PORT"), "--health-port must differ from --port"),
        (("--health-port", "70000"), "--health-port"),
    ],
)
def test_bad_connection_flags_are_one_line_and_exit_2(tmp_path: Path, flags: tuple[str, ...], message: str) -> None:
    port = str(free_port())
    with serve_process(tmp_path, *(port if a == "PORT" else a for a in flags), wait=False) as srv:
        assert srv.proc.wait(60) == 2
    lines = [line for line in srv.log_text().splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines


@pytest.mark.parametrize("protocol", ["HttpToolsLimitedProtocol", "H11LimitedProtocol"])
def test_both_protocols_cap_connections_per_client_and_count_them_back(protocol: str) -> None:
    from shortlist.server._protocol import ServiceConfig

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = ServiceConfig(
        create_app(ServerSettings.build(env={})),
        http=f"shortlist.server._protocol:{protocol}",
        log_level="warning",
        timeout_header=30,
        limit_connections=None,
        limit_connections_per_client=2,
        startup_timeout=60,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        assert wait_until(lambda: server.started, seconds=10, interval=0.02), "the server did not start"
        for _ in range(2):  # twice: the refused and the closed connections are counted back
            with contextlib.ExitStack() as sockets:
                held = [sockets.enter_context(_silent(port)) for _ in range(2)]
                third = sockets.enter_context(_silent(port))
                refused = _refusal(third)
                assert refused is not None and refused.startswith(b"HTTP/1.1 503 ")
                assert b"from your address" in refused
                assert all(_refusal(s, 0.2) is None for s in held)
                with _client(f"http://127.0.0.1:{port}", "127.0.0.2") as other:
                    assert other.get("/healthz").status_code == 200
            time.sleep(0.3)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
