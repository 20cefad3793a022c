"""A bounded slowloris run against a real ``shortlist serve`` on loopback.

Starts ``shortlist serve`` (one worker by default) on 127.0.0.1, waits for ``/readyz``, then
opens ``--connections`` sockets (default 500) that each send the start of a request header and
never finish it; every ``--trickle`` seconds each open socket sends one more header line, as a
slowloris client does to defeat a timeout that restarts on every byte. Meanwhile one normal
client sends ``GET /readyz`` and ``POST /v1/select`` every 0.5 s on a fresh connection.

After ``--seconds`` (default 15) it reports how many half-header connections the server still
holds open, when the server closed the others (seconds after they were opened), and whether the
normal requests were served meanwhile. Everything is bounded: at most 2,000 connections and
120 s, loopback only, and the server is stopped at the end.

Run::

    .venv/bin/python bench/bench_slowloris.py                         # 500 connections, 15 s
    .venv/bin/python bench/bench_slowloris.py --json
    .venv/bin/python bench/bench_slowloris.py --serve-arg=--timeout-header --serve-arg=5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
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


def _open_half_header(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        sock.connect((HOST, port))
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


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1])
    opened_at = time.monotonic()
    socks: dict[int, socket.socket] = {}
    failed_to_open = 0
    for _ in range(args.connections):
        sock = _open_half_header(port)
        if sock is None:
            failed_to_open += 1
        else:
            socks[sock.fileno()] = sock
    open_s = time.monotonic() - opened_at
    closed_after: list[float] = []
    normal_ok = normal_failed = 0
    normal_ms: list[float] = []
    stop = opened_at + args.seconds
    next_trickle = opened_at + args.trickle
    next_normal = time.monotonic()
    line = 0
    with httpx.Client(base_url=url, timeout=5, headers={"Connection": "close"}) as client:
        while time.monotonic() < stop:
            ready, _, _ = select.select(list(socks.values()), [], [], 0.1) if socks else ([], [], [])
            for sock in ready:
                if _closed_by_server(sock):
                    closed_after.append(time.monotonic() - opened_at)
                    del socks[sock.fileno()]
                    sock.close()
            now = time.monotonic()
            if now >= next_trickle:
                line += 1
                for fd, sock in list(socks.items()):
                    try:
                        sock.send(f"X-Trickle-{line}: a\r\n".encode())
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed_after.append(time.monotonic() - opened_at)
                        del socks[fd]
                        sock.close()
                next_trickle = now + args.trickle
            if now >= next_normal:
                ok, ms = _normal_request(client)
                normal_ok += ok
                normal_failed += not ok
                normal_ms.append(ms)
                next_normal = time.monotonic() + 0.5
    still_open = len(socks)
    for sock in socks.values():
        sock.close()
    normal_ms.sort()
    return {
        "connections": args.connections,
        "failed_to_open": failed_to_open,
        "opened_in_s": round(open_s, 2),
        "seconds": args.seconds,
        "still_open": still_open,
        "closed_by_server": len(closed_after),
        "first_close_s": round(min(closed_after), 2) if closed_after else None,
        "last_close_s": round(max(closed_after), 2) if closed_after else None,
        "normal_ok": normal_ok,
        "normal_failed": normal_failed,
        "normal_p50_ms": round(normal_ms[len(normal_ms) // 2], 1) if normal_ms else None,
        "normal_max_ms": round(normal_ms[-1], 1) if normal_ms else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connections", type=int, default=500, help=f"half-header connections (max {MAX_CONNECTIONS})")
    p.add_argument("--seconds", type=float, default=15.0, help=f"how long to hold them (max {MAX_SECONDS:g})")
    p.add_argument("--trickle", type=float, default=2.0, help="seconds between extra header lines per connection")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--serve-arg", action="append", default=[], help="extra argument for shortlist serve")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if not 1 <= args.connections <= MAX_CONNECTIONS or not 0 < args.seconds <= MAX_SECONDS:
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
        f"{result['connections']} half-header connections ({result['failed_to_open']} failed to open), "
        f"after {result['seconds']:g} s: {result['still_open']} still open, {result['closed_by_server']} closed by "
        f"the server (first at {result['first_close_s']} s, last at {result['last_close_s']} s); normal requests "
        f"{result['normal_ok']} ok / {result['normal_failed']} failed, p50 {result['normal_p50_ms']} ms, "
        f"max {result['normal_max_ms']} ms"
    )


if __name__ == "__main__":
    main()
