"""A bounded slowloris (or idle-connection) run against a real ``shortlist serve`` on loopback.

Starts ``shortlist serve`` (one worker by default) on 127.0.0.1, waits for ``/readyz``, then
measures a **baseline**: for ``--baseline`` seconds (default 10) a normal client, connecting from
``--other-source`` (default 127.0.0.2: loopback covers 127.0.0.0/8, so it is another client
address than the attacker's 127.0.0.1), sends ``GET /readyz`` and ``POST /v1/select`` every
``--interval`` seconds on a fresh connection, and a health check asks ``/readyz`` (on
``--health-port`` when given, which the bench passes to ``serve``).

Then the attack: one client (127.0.0.1) opens ``--connections`` sockets (default 500). By
default each sends the start of a request header and never finishes it, and every ``--trickle``
seconds one more header line, as a slowloris client does to defeat a timeout restarted by every
byte. With ``--idle`` they send nothing at all. With ``--reopen``, every ``--trickle`` seconds
the attacker reopens those the server closed or refused, so it keeps trying to hold
``--connections`` open (a burst of connects every ``--trickle`` seconds). The normal
client and the health check go on meanwhile.

After ``--seconds`` (default 15) it reports how many attack connections the server still holds
open, how many it closed or refused, when, the normal requests' p50/p99 in the baseline and under
attack (and their ratio), and the health checks that failed. Everything is bounded: at most
2,000 connections and 120 s, loopback only, and the server is stopped at the end.

Run::

    .venv/bin/python bench/bench_slowloris.py                         # 500 connections, 15 s
    .venv/bin/python bench/bench_slowloris.py --json
    .venv/bin/python bench/bench_slowloris.py --serve-arg=--timeout-header --serve-arg=5
    # issue 27, item 5: one client holding 1,000 idle connections
    .venv/bin/python bench/bench_slowloris.py --idle --reopen --connections 1000 --seconds 25 --health-port 0
    .venv/bin/python bench/bench_slowloris.py --idle --reopen --connections 1000 --seconds 25 \\
        --serve-arg=--max-connections-per-client=0                  # without the per-client cap
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HOST = "127.0.0.1"
MAX_CONNECTIONS = 2000
MAX_SECONDS = 120.0
CATALOG = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": f"does thing {i}", "parameters": {}}}
    for i in range(50)
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def start_server(tmp: Path, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    catalog = tmp / "tools.json"
    catalog.write_text(json.dumps(CATALOG))
    port = _free_port()
    if args.health_port == 0:
        args.health_port = _free_port()
    health = ["--health-port", str(args.health_port)] if args.health_port else []
    cmd = [
        sys.executable,
        "-m",
        "shortlist.cli",
        "serve",
        "--host",
        HOST,
        "--port",
        str(port),
        "--workers",
        str(args.workers),
        "--catalog",
        f"tools={catalog}",
        "--selector",
        "lexical",
        *health,
        *args.serve_arg,
    ]
    log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {(tmp / 'server.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("server not ready after 120 s")


def _raise_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))


def _open_attack(port: int, idle: bool) -> socket.socket | None:
    """One attack connection from 127.0.0.1: silent (``idle``) or with half a request header."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        sock.connect((HOST, port))
        if not idle:
            sock.sendall(b"POST /v1/select HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
    except OSError:
        sock.close()
        return None
    sock.setblocking(False)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server closed ``sock`` (EOF or reset); data it sent (a 408/503) is drained."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _normal_request(client: httpx.Client) -> tuple[bool, float]:
    start = time.perf_counter()
    try:
        ok = client.get("/readyz").status_code == 200
        ok = ok and client.post("/v1/select", json={"query": "does thing 7", "catalog": "tools"}).status_code == 200
    except httpx.HTTPError:
        ok = False
    return ok, (time.perf_counter() - start) * 1000


def _health_check(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def _quantile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None


class _Other:
    """The other client (its own source address): normal requests and health checks, timed."""

    def __init__(self, url: str, health_url: str, args: argparse.Namespace) -> None:
        transport = httpx.HTTPTransport(local_address=args.other_source)
        self.client = httpx.Client(base_url=url, timeout=5, headers={"Connection": "close"}, transport=transport)
        self.health_url = health_url
        self.interval = args.interval
        self.next = time.monotonic()
        self.ms: list[float] = []
        self.ok = self.failed = self.health_ok = self.health_failed = 0

    def tick(self) -> None:
        if time.monotonic() < self.next:
            return
        ok, ms = _normal_request(self.client)
        self.ok += ok
        self.failed += not ok
        self.ms.append(ms)
        healthy = _health_check(self.client, self.health_url)
        self.health_ok += healthy
        self.health_failed += not healthy
        self.next = time.monotonic() + self.interval

    def figures(self, prefix: str) -> dict[str, Any]:
        return {
            f"{prefix}_ok": self.ok,
            f"{prefix}_failed": self.failed,
            f"{prefix}_p50_ms": _quantile(self.ms, 0.50),
            f"{prefix}_p99_ms": _quantile(self.ms, 0.99),
            f"{prefix}_max_ms": _quantile(self.ms, 1.0),
            f"{prefix}_health_ok": self.health_ok,
            f"{prefix}_health_failed": self.health_failed,
        }

    def close(self) -> None:
        self.client.close()


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1])
    health_url = f"http://{HOST}:{args.health_port}/readyz" if args.health_port else f"{url}/readyz"
    baseline = _Other(url, health_url, args)
    stop = time.monotonic() + args.baseline
    while time.monotonic() < stop:
        baseline.tick()
        time.sleep(0.005)
    baseline.close()
    opened_at = time.monotonic()
    socks: dict[int, socket.socket] = {}
    watch = selectors.DefaultSelector()  # epoll: no FD_SETSIZE limit, no list rebuilt per wait
    failed_to_open = 0
    for _ in range(args.connections):
        sock = _open_attack(port, args.idle)
        if sock is None:
            failed_to_open += 1
        else:
            socks[sock.fileno()] = sock
            watch.register(sock, selectors.EVENT_READ)
    open_s = time.monotonic() - opened_at
    closed_after: list[float] = []
    attack = _Other(url, health_url, args)
    held: list[int] = []  # attack connections open, sampled at every trickle
    stop = opened_at + args.seconds
    next_trickle = opened_at + args.trickle
    line = 0
    while time.monotonic() < stop:
        for key, _ in watch.select(0.005) if socks else ():
            ready = socks[key.fd]
            if _closed_by_server(ready):
                closed_after.append(time.monotonic() - opened_at)
                watch.unregister(ready)
                del socks[key.fd]
                ready.close()
        now = time.monotonic()
        if now >= next_trickle:
            line += 1
            held.append(len(socks))
            if args.reopen:  # the attacker keeps trying to hold them all
                for _ in range(args.connections - len(socks)):
                    sock = _open_attack(port, args.idle)
                    if sock is not None:
                        socks[sock.fileno()] = sock
                        watch.register(sock, selectors.EVENT_READ)
            if not args.idle:
                for fd, sock in list(socks.items()):
                    try:
                        sock.send(f"X-Trickle-{line}: a\r\n".encode())
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed_after.append(time.monotonic() - opened_at)
                        watch.unregister(sock)
                        del socks[fd]
                        sock.close()
            next_trickle = time.monotonic() + args.trickle
        attack.tick()
    attack.close()
    still_open = len(socks)
    for sock in socks.values():
        sock.close()
    watch.close()
    result: dict[str, Any] = {
        "connections": args.connections,
        "mode": ("idle" if args.idle else "half-header") + (", reopened" if args.reopen else ""),
        "failed_to_open": failed_to_open,
        "opened_in_s": round(open_s, 2),
        "seconds": args.seconds,
        "still_open": still_open,
        "held_min": min(held) if held else still_open,
        "held_max": max(held) if held else still_open,
        "closed_by_server": len(closed_after),
        "first_close_s": round(min(closed_after), 2) if closed_after else None,
        "last_close_s": round(max(closed_after), 2) if closed_after else None,
        "other_source": args.other_source,
        "health_port": args.health_port,
        **baseline.figures("baseline"),
        **attack.figures("normal"),
    }
    if result["baseline_p99_ms"] and result["normal_p99_ms"] is not None:
        result["p99_ratio"] = round(result["normal_p99_ms"] / result["baseline_p99_ms"], 2)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connections", type=int, default=500, help=f"half-header connections (max {MAX_CONNECTIONS})")
    p.add_argument("--seconds", type=float, default=15.0, help=f"how long to hold them (max {MAX_SECONDS:g})")
    p.add_argument(
        "--trickle", type=float, default=2.0, help="seconds between extra header lines per connection (or reopens)"
    )
    p.add_argument("--idle", action="store_true", help="attack connections send nothing")
    p.add_argument("--reopen", action="store_true", help="reopen closed or refused attack connections every --trickle")
    p.add_argument("--baseline", type=float, default=10.0, help="seconds of normal requests before the attack")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between the other client's requests")
    p.add_argument("--other-source", default="127.0.0.2", help="source address of the other client")
    p.add_argument(
        "--health-port", type=int, help="serve --health-port for the health checks (0: a free port; default: none)"
    )
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--serve-arg", action="append", default=[], help="extra argument for shortlist serve")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if (
        not 1 <= args.connections <= MAX_CONNECTIONS
        or not 0 < args.seconds <= MAX_SECONDS
        or not 0 <= args.baseline <= MAX_SECONDS
    ):
        raise SystemExit(f"--connections must be 1..{MAX_CONNECTIONS} and --seconds 0..{MAX_SECONDS:g}")
    _raise_fd_limit(args.connections + 256)
    with tempfile.TemporaryDirectory(prefix="shortlist-slowloris-") as tmp:
        proc, url = start_server(Path(tmp), args)
        try:
            result = run(url, args)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        result["server_args"] = args.serve_arg
        result["workers"] = args.workers
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['connections']} {result['mode']} connections from {HOST} ({result['failed_to_open']} failed to "
        f"open), after {result['seconds']:g} s: {result['still_open']} still open (held {result['held_min']}-"
        f"{result['held_max']}), {result['closed_by_server']} closed by the server (first at "
        f"{result['first_close_s']} s, last at {result['last_close_s']} s)"
    )
    print(
        f"other client ({result['other_source']}): baseline {result['baseline_ok']} ok / {result['baseline_failed']} "
        f"failed, p50 {result['baseline_p50_ms']} ms, p99 {result['baseline_p99_ms']} ms; under attack "
        f"{result['normal_ok']} ok / {result['normal_failed']} failed, p50 {result['normal_p50_ms']} ms, p99 "
        f"{result['normal_p99_ms']} ms (p99 {result.get('p99_ratio')}x the baseline)"
    )
    print(
        f"health checks ({'port ' + str(result['health_port']) if result['health_port'] else 'service port'}): "
        f"baseline {result['baseline_health_ok']} ok / {result['baseline_health_failed']} failed, under attack "
        f"{result['normal_health_ok']} ok / {result['normal_health_failed']} failed"
    )


if __name__ == "__main__":
    main()
