"""Load on a real ``shortlist serve``: ``/v1/select`` over a 1,000-tool catalog loaded at start-up.

Starts ``shortlist serve`` (2 workers by default) on loopback, waits for ``/readyz``, then drives
it with ``wrk`` (Debian package ``wrk``; 32 connections by default) posting rotating queries, and
reports requests/s, p50/p99 latency and errors (non-2xx answers and socket errors). Without
``wrk`` a bounded httpx async load generator is used instead (same report).

Fault runs (``--fault``) bind ``/v1/select`` to an external selector (persistent worker) that
hangs past its deadline, crashes, or floods stdout with garbage on every request: the service
must keep answering 200 with the fallback counted in ``/metrics``.

Run::

    .venv/bin/python bench/bench_server.py --duration 60             # the real run
    .venv/bin/python bench/bench_server.py --duration 5              # smoke run
    .venv/bin/python bench/bench_server.py --duration 20 --fault hang
    .venv/bin/python bench/bench_server.py --json ...                # one JSON document

Targets (issue 7): >= 500 req/s, p99 <= 50 ms, zero errors over 60 s with the hybrid selector,
2 workers, 32 connections; fault runs: p99 within 2x the healthy run, no worker dies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
BEHAVE = ROOT / "tests" / "fixtures" / "selectors" / "behave.py"
QUERIES = [
    "send an email to the finance team",
    "what's the weather in Paris tomorrow",
    "create an invoice for ACME corp",
    "book a flight to Rome next week",
    "look up the customer record for Jane",
    "translate this paragraph into German",
    "schedule a meeting with Bob on Friday",
    "search the web for the latest GPU prices",
]
VERBS = ["get", "list", "create", "update", "delete", "search", "send", "export", "import", "sync"]
NOUNS = [
    "invoice",
    "customer",
    "ticket",
    "order",
    "flight",
    "hotel",
    "email",
    "calendar event",
    "report",
    "file",
    "repository",
    "pull request",
    "deployment",
    "metric",
    "alert",
    "contact",
    "payment",
    "refund",
    "shipment",
    "product",
    "playlist",
    "document",
    "spreadsheet",
    "weather forecast",
    "stock quote",
]
SERVICES = ["acme", "globex", "initech", "umbrella"]
FAULTS = {
    # a worker that sleeps 30 s on every request (the query contains "e"): killed at 200 ms, restarted
    "hang": ["worker_sleep", "e"],
    # a worker that exits 7 on every request: restarted each time
    "crash": ["worker_crash", "e"],
    # a worker that prints a non-JSON line on every request (stdout flood / garbage)
    "flood": ["worker_garbage", "e"],
}


def make_catalog(path: Path, n: int) -> None:
    """Write ``n`` distinct OpenAI-style tool definitions."""
    tools = []
    i = 0
    while len(tools) < n:
        verb = VERBS[i % len(VERBS)]
        noun = NOUNS[(i // len(VERBS)) % len(NOUNS)]
        svc = SERVICES[(i // (len(VERBS) * len(NOUNS))) % len(SERVICES)]
        name = f"{svc}_{verb}_{noun.replace(' ', '_')}_{i}"
        desc = f"{verb.capitalize()} a {noun} in the {svc} system; returns the {noun} details."
        tools.append({"type": "function", "function": {"name": name, "description": desc, "parameters": {}}})
        i += 1
    path.write_text(json.dumps(tools))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hybrid_available() -> bool:
    try:
        import shortlist.rankers._hybrid  # noqa: F401
    except ImportError:
        return False
    return True


def start_server(tmp: Path, args: argparse.Namespace) -> tuple[subprocess.Popen[str], str, str]:
    catalog = tmp / "tools.json"
    make_catalog(catalog, args.tools)
    selector = args.selector or ("hybrid" if _hybrid_available() else "lexical")
    cmd = [
        sys.executable,
        "-m",
        "shortlist.cli",
        "serve",
        "--port",
        str(args.port or _free_port()),
        "--workers",
        str(args.workers),
        "--catalog",
        f"tools={catalog}",
    ]
    if args.fault:
        config = tmp / "runtime.yaml"
        mode = FAULTS[args.fault]
        config.write_text(
            "spec:\n  selectors:\n    faulty:\n"
            f"      command: {sys.executable}\n      args: [{str(BEHAVE)!r}, {mode[0]}, {mode[1]}]\n"
            "      worker: true\n      timeout_ms: 200\n"
        )
        cmd += ["--config", str(config)]
        selector = "faulty"
    cmd += ["--selector", selector, *args.serve_arg]
    port = cmd[cmd.index("--port") + 1]
    log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {(tmp / 'server.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return proc, url, selector
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise SystemExit("server not ready after 300 s")


_LUA = """
local bodies = {}
%s
local i = 0
request = function()
  i = i + 1
  return wrk.format("POST", "/v1/select", {["Content-Type"] = "application/json"}, bodies[(i %% #bodies) + 1])
end
"""


def query_texts(distinct: int) -> list[str]:
    """``distinct`` different queries: the fixed eight, then verb/noun/number combinations."""
    out = list(QUERIES)
    n = 0
    while len(out) < distinct:
        out.append(f"{VERBS[n % len(VERBS)]} the {NOUNS[(n // len(VERBS)) % len(NOUNS)]} number {n}")
        n += 1
    return out[:distinct]


def run_wrk(url: str, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    lines = []
    for n, q in enumerate(query_texts(args.distinct), 1):
        body = json.dumps({"query": q, "catalog": "tools", "k": 5})
        lines.append(f"bodies[{n}] = {json.dumps(body)}")
    script = tmp / "select.lua"
    script.write_text(_LUA % "\n".join(lines))
    cmd = [
        "wrk",
        "-t",
        "2",
        "-c",
        str(args.connections),
        "-d",
        f"{args.duration}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    socket_errors = sum(int(x) for x in sock.groups()) if sock else 0
    return {
        "tool": "wrk",
        "requests": total,
        "rps": rps,
        "p50_ms": ms("50"),
        "p99_ms": ms("99"),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": socket_errors,
        "raw": out,
    }


async def _httpx_load(url: str, args: argparse.Namespace) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    stop = time.monotonic() + args.duration
    limits = httpx.Limits(max_connections=args.connections, max_keepalive_connections=args.connections)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=10) as client:

        async def one(n: int) -> None:
            nonlocal errors
            i = n
            while time.monotonic() < stop:
                t = time.perf_counter()
                try:
                    r = await client.post("/v1/select", json={"query": QUERIES[i % len(QUERIES)], "catalog": "tools"})
                    if r.status_code != 200:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                lat.append((time.perf_counter() - t) * 1000)
                i += 1

        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(args.connections)))
        elapsed = time.perf_counter() - start
    lat.sort()
    pick = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    return {
        "tool": "httpx",
        "requests": len(lat),
        "rps": len(lat) / elapsed,
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "non_2xx": errors,
        "socket_errors": 0,
    }


def scrape(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(
            ("shortlist_selection_fallbacks_total", "shortlist_external_selector", "shortlist_selections_total")
        ):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=int, default=60, help="seconds of load (default 60)")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tools", type=int, default=1000)
    p.add_argument("--selector", help="selector (default hybrid when available, else lexical)")
    p.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="one more argument for `shortlist serve` (repeatable), e.g. --serve-arg=--threads --serve-arg=6",
    )
    p.add_argument("--fault", choices=sorted(FAULTS), help="bind /v1/select to a faulty external selector")
    p.add_argument("--port", type=int, default=0)
    p.add_argument(
        "--distinct",
        type=int,
        default=len(QUERIES),
        help="distinct query texts (default 8: their embeddings are cached after the first turns; "
        "thousands make every turn embed its query with the model)",
    )
    p.add_argument("--httpx", action="store_true", help="use the httpx load generator even if wrk is installed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-server-") as d:
        tmp = Path(d)
        proc, url, selector = start_server(tmp, args)
        try:
            pids_before = _worker_pids(proc.pid)
            if shutil.which("wrk") and not args.httpx:
                result = run_wrk(url, tmp, args)
            else:
                result = asyncio.run(_httpx_load(url, args))
            result["metrics"] = scrape(url)
            result["workers_alive"] = sorted(_worker_pids(proc.pid)) == sorted(pids_before)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        result.update(
            selector=selector,
            fault=args.fault,
            workers=args.workers,
            connections=args.connections,
            duration_s=args.duration,
            tools=args.tools,
            cpus=os.cpu_count(),
        )
    raw = result.pop("raw", "")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(raw)
    print(
        f"selector={selector} fault={args.fault} workers={args.workers} connections={args.connections} "
        f"duration={args.duration}s tools={args.tools} ({result['tool']})"
    )
    print(
        f"  {result['rps']:.0f} req/s   p50 {result['p50_ms']:.2f} ms   p99 {result['p99_ms']:.2f} ms   "
        f"requests {result['requests']}   non-2xx {result['non_2xx']}   socket errors {result['socket_errors']}   "
        f"workers alive {result['workers_alive']}"
    )
    for k, v in result["metrics"].items():
        print(f"  {k} {v:g}")


def _worker_pids(parent: int) -> list[int]:
    try:
        out = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return []
    return [int(x) for x in out.split()]


if __name__ == "__main__":
    main()
