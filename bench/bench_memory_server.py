"""Memory under load on a real ``shortlist serve`` with the PostgreSQL store, restarting the database mid-run.

Starts its own PostgreSQL server (temp dir, free loopback port; as the ``postgres`` user when run
as root) and ``shortlist serve --workers 2 --memory postgresql://...``. Then 20 concurrent
clients, each on its own scope, perform 20,000 operations in all (70 % remember, 20 % recall,
10 % list). Half-way through, PostgreSQL is stopped (``-m fast``) for ``--outage`` seconds and
started again. Checks at the end:

- nothing lost: every remember answered 200 is in its scope (and nothing else is);
- nothing crosses scopes: every memory read carries its own scope and content tag;
- failures are clean: during the outage requests answer 503 (never 500 nor a hang), after it 200.

Run::

    .venv/bin/python bench/bench_memory_server.py              # 20 clients, 20,000 operations
    .venv/bin/python bench/bench_memory_server.py --ops 2000   # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import httpx


def _bin(name: str) -> str:
    found = shutil.which(name) or (sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    if not found:
        raise SystemExit(f"{name} not found: run scripts/install-postgres")
    return found


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Pg:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="shortlist-bench-pg-")
        self.port = _port()
        self.runas: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.runas = ["runuser", "-u", "postgres", "--"]
        subprocess.run(
            [*self.runas, _bin("initdb"), "-D", self.dir, "-U", "postgres", "--auth=trust", "--no-sync"],
            check=True,
            capture_output=True,
        )

    def ctl(self, *args: str) -> None:
        subprocess.run([*self.runas, _bin("pg_ctl"), "-D", self.dir, "-w", *args], check=True, capture_output=True)

    def start(self) -> None:
        self.ctl("-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "-l", f"{self.dir}/log", "start")

    def stop(self) -> None:
        self.ctl("-m", "fast", "stop")


async def main_async(args: argparse.Namespace, url: str, pg: Pg) -> dict[str, Any]:
    acked: dict[str, list[str]] = {f"s{i}": [] for i in range(args.clients)}
    statuses: Counter[str] = Counter()
    outage = {"start": 0.0, "end": 0.0}
    during: Counter[int] = Counter()
    crossed = 0
    done = 0
    per_client = args.ops // args.clients
    half = args.ops // 2

    async def client(cid: int, http: httpx.AsyncClient) -> None:
        nonlocal crossed, done
        scope = {"tenant": f"s{cid}"}
        rng = random.Random(cid)
        for n in range(per_client):
            op = rng.random()
            try:
                if op < 0.7:
                    tag = f"s{cid}-{n}"
                    r = await http.post("/v1/memory/remember", json={"scope": scope, "content": f"note {tag} alpha"})
                    if r.status_code == 200:
                        acked[f"s{cid}"].append(tag)
                elif op < 0.9:
                    r = await http.post("/v1/memory/recall", json={"scope": scope, "query": "alpha", "limit": 5})
                else:
                    r = await http.post("/v1/memory/list", json={"scope": scope, "limit": 20})
                if r.status_code == 200 and op >= 0.7:
                    for m in r.json()["memories"]:
                        if m["scope"] != scope or not m["content"].startswith(f"note s{cid}-"):
                            crossed += 1
                status = r.status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__  # type: ignore[assignment]
            statuses[str(status)] += 1
            if outage["start"] and not outage["end"] and isinstance(status, int):
                during[status] += 1
            done += 1

    async def restarter() -> None:
        while done < half:
            await asyncio.sleep(0.05)
        outage["start"] = time.monotonic()
        await asyncio.to_thread(pg.stop)
        await asyncio.sleep(args.outage)
        await asyncio.to_thread(pg.start)
        outage["end"] = time.monotonic()

    limits = httpx.Limits(max_connections=args.clients)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        await asyncio.gather(restarter(), *(client(i, http) for i in range(args.clients)))
        elapsed = time.perf_counter() - t0
        lost = extra = 0
        for cid in range(args.clients):
            scope = {"tenant": f"s{cid}"}
            stored: list[str] = []
            offset = 0
            while True:
                r = await http.post("/v1/memory/list", json={"scope": scope, "limit": 1000, "offset": offset})
                page = r.json()["memories"]
                stored += [m["content"].split()[1] for m in page]
                if len(page) < 1000:
                    break
                offset += 1000
            want = set(acked[f"s{cid}"])
            lost += len(want - set(stored))
            extra += len([s for s in stored if not s.startswith(f"s{cid}-")])
            if len(stored) != len(set(stored)):
                extra += len(stored) - len(set(stored))
    return {
        "ops": done,
        "elapsed_s": round(elapsed, 1),
        "ops_per_s": round(done / elapsed, 1),
        "statuses": dict(statuses),
        "during_outage": dict(during),
        "outage_s": round(outage["end"] - outage["start"], 1),
        "acked_writes": sum(len(v) for v in acked.values()),
        "lost": lost,
        "foreign_or_duplicate_rows": extra,
        "crossed_scope_reads": crossed,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--ops", type=int, default=20_000)
    p.add_argument("--outage", type=float, default=3.0)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    pg = Pg()
    pg.start()
    port = _port()
    dsn = f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shortlist.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
            "--memory",
            dsn,
        ],
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        result = asyncio.run(main_async(args, url, pg))
        result["server_alive"] = proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        pg.stop()
        shutil.rmtree(pg.dir, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
