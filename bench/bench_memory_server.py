"""Memory under load on a real ``shortlist serve`` with the PostgreSQL store, restarting the database mid-run.

Starts its own PostgreSQL server (temp dir, free loopback port; as the ``postgres`` user when run
as root) and ``shortlist serve --workers 2 --memory postgresql://...``. Then 20 concurrent
clients, each on its own scope, perform 20,000 operations in all (70 % remember, 20 % recall,
10 % list). Half-way through, PostgreSQL is stopped (``-m fast``) for ``--outage`` seconds and
started again. Checks at the end:

- nothing lost: every remember answered 200 is in its scope (and nothing else is);
- nothing crosses scopes: every memory read carries its own scope and content tag;
- failures are clean: during the outage requests answer 503 (never 500 nor a hang), after it 200
  (``after_outage`` counts the answers to requests sent after the restart, final listing included).

What the figures mean:

- ``ops_per_s`` counts every answered operation over the whole run, outage included (each 503
  counts as an operation; after one a client pauses ``--pause-503`` seconds, 0.1 by default,
  so the outage does not eat the operation budget);
- ``steady_state`` leaves out the outage window (from the stop to the first 200 after the
  restart): operations per second and p50/p99 latency of the 200 answers, per operation;
- ``cpu_s`` is the CPU time of the load generator, the service's processes and PostgreSQL
  during the run: on a small machine they share the cores, so a heavy client caps the figure.

The load generator is a minimal keep-alive HTTP/1.1 client (one connection per client, about
0.1 ms of CPU per operation, bookkeeping included). ``--client httpx`` uses ``httpx.AsyncClient``
instead (the original load generator): about 2.5 ms of CPU per request, which on 2 cores caps
the run near 300 ops/s whatever the server does. ``--memory sqlite:///PATH`` (a fresh file; or
``memory:`` with ``--workers 1``) runs the same load against another store (no outage);
``--direct`` calls the store in-process from ``--clients`` threads, without HTTP, so the ratios
tell where the time goes.

Run::

    .venv/bin/python bench/bench_memory_server.py              # 20 clients, 20,000 operations
    .venv/bin/python bench/bench_memory_server.py --ops 2000   # smoke run
    .venv/bin/python bench/bench_memory_server.py --memory sqlite:////tmp/bench-memory.db
    .venv/bin/python bench/bench_memory_server.py --direct     # the PostgreSQL store without HTTP
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import pwd
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import httpx

from shortlist.errors import ShortlistError
from shortlist.memory import Memory

_CLK = os.sysconf("SC_CLK_TCK")


def _bin(name: str) -> str:
    found = shutil.which(name) or (sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    if not found:
        raise SystemExit(f"{name} not found: run scripts/install-postgres")
    return found


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, ()))
    return out


def _cpu_s(pids: Iterable[int]) -> float:
    """User + system CPU seconds of the given live processes and of their exited children."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            continue
    return total / _CLK


def _self_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


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

    def cpu_s(self) -> float:
        """CPU seconds of the running server's processes (0 when it is down)."""
        try:
            with open(f"{self.dir}/postmaster.pid") as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return 0.0
        return _cpu_s(_tree(pid))


# -- transports: post(path, body) -> (status, json body); transport errors raise -------------------


class Transport(Protocol):
    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]: ...

    async def aclose(self) -> None: ...


#: What a transport raises when the request could not be answered (counted by exception name).
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.IncompleteReadError,
    TimeoutError,
    ValueError,
    httpx.HTTPError,
)


class RawHttp:
    """One keep-alive HTTP/1.1 connection (JSON bodies, ``Content-Length`` responses)."""

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._head = f"host: {host}:{port}\r\ncontent-type: application/json\r\n".encode()
        self._io: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        try:
            async with asyncio.timeout(self.timeout):
                if self._io is None:
                    self._io = await asyncio.open_connection(self.host, self.port)
                reader, writer = self._io
                writer.write(
                    b"POST %s HTTP/1.1\r\n%scontent-length: %d\r\n\r\n%s" % (path.encode(), self._head, len(data), data)
                )
                line = await reader.readline()
                if not line:
                    raise ConnectionResetError("the server closed the connection")
                status = int(line.split()[1])
                length, close = 0, False
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"connection":
                        close = value.strip().lower() == b"close"
                    elif name == b"transfer-encoding":
                        raise ValueError("chunked responses are not supported by this load generator")
                payload = await reader.readexactly(length)
        except BaseException:
            await self.aclose()
            raise
        if close:
            await self.aclose()
        return status, json.loads(payload) if payload else None

    async def aclose(self) -> None:
        if self._io is not None:
            self._io[1].close()
            self._io = None


class HttpxHttp:
    """``httpx.AsyncClient`` (the original load generator)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        r = await self.client.post(path, json=body)
        return r.status_code, r.json()

    async def aclose(self) -> None:
        return None


class Direct:
    """The store in this process, called from a thread (as the service's handlers are)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return await asyncio.to_thread(self._call, path, body)

    def _call(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        try:
            if path.endswith("/remember"):
                return 200, self.store.save(Memory("general", body["content"], body["scope"])).to_dict()
            if path.endswith("/recall"):
                found = self.store.retrieve(body["scope"], body["query"], limit=body["limit"])
            else:
                found = self.store.list(body["scope"], limit=body["limit"], offset=body.get("offset", 0))
            return 200, {"memories": [m.to_dict() for m in found]}
        except ShortlistError as exc:
            if getattr(exc, "status_code", None) == 503:
                return 503, None
            raise

    async def aclose(self) -> None:
        return None


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2)


async def main_async(args: argparse.Namespace, new_transport: Any, pg: Pg | None, cpu: Any) -> dict[str, Any]:
    acked: dict[str, list[str]] = {f"s{i}": [] for i in range(args.clients)}
    statuses: Counter[str] = Counter()
    outage = {"start": 0.0, "end": 0.0}
    during: Counter[int] = Counter()
    record: list[tuple[float, float, str, int | str]] = []  # started, finished, op, status
    crossed = 0
    done = 0
    per_client = args.ops // args.clients
    half = args.ops // 2
    pg_cpu = [0.0]

    async def client(cid: int, http: Transport) -> None:
        nonlocal crossed, done
        scope = {"tenant": f"s{cid}"}
        rng = random.Random(cid)
        for n in range(per_client):
            op = rng.random()
            started = time.monotonic()
            try:
                if op < 0.7:
                    kind, tag = "remember", f"s{cid}-{n}"
                    status, body = await http.post(
                        "/v1/memory/remember", {"scope": scope, "content": f"note {tag} alpha"}
                    )
                    if status == 200:
                        acked[f"s{cid}"].append(tag)
                elif op < 0.9:
                    kind = "recall"
                    status, body = await http.post("/v1/memory/recall", {"scope": scope, "query": "alpha", "limit": 5})
                else:
                    kind = "list"
                    status, body = await http.post("/v1/memory/list", {"scope": scope, "limit": 20})
                if status == 200 and op >= 0.7:
                    for m in body["memories"]:
                        if m["scope"] != scope or not m["content"].startswith(f"note s{cid}-"):
                            crossed += 1
                result: int | str = status
            except TRANSPORT_ERRORS as exc:
                result = type(exc).__name__
            statuses[str(result)] += 1
            if outage["start"] and not outage["end"] and isinstance(result, int):
                during[result] += 1
            record.append((started, time.monotonic(), kind, result))
            done += 1
            if result == 503 and args.pause_503:
                await asyncio.sleep(args.pause_503)

    async def restarter() -> None:
        if pg is None:
            return
        while done < half:
            await asyncio.sleep(0.05)
        pg_cpu[0] += pg.cpu_s()
        outage["start"] = time.monotonic()
        await asyncio.to_thread(pg.stop)
        await asyncio.sleep(args.outage)
        await asyncio.to_thread(pg.start)
        outage["end"] = time.monotonic()
        pg_cpu[0] -= pg.cpu_s()

    transports = [new_transport() for _ in range(args.clients)]
    cpu0 = cpu()
    pg_cpu[0] -= pg.cpu_s() if pg else 0.0
    t0 = time.monotonic()
    await asyncio.gather(restarter(), *(client(i, transports[i]) for i in range(args.clients)))
    elapsed = time.monotonic() - t0
    pg_cpu[0] += pg.cpu_s() if pg else 0.0
    cpu1 = cpu()
    for t in transports:
        await t.aclose()

    # the outage window: from the stop to the first 200 of a request sent after the restart
    after: Counter[int | str] = Counter(s for st, _, _, s in record if pg is not None and st >= outage["end"])
    if pg is not None:
        recovered = min((fin for st, fin, _, s in record if s == 200 and st >= outage["end"]), default=outage["end"])
        window = (outage["start"], recovered)
    else:
        window = (t0, t0)
    steady = [r for r in record if not window[0] <= r[1] <= window[1]]
    steady_s = elapsed - (window[1] - window[0])
    latency: dict[str, dict[str, float | None]] = {}
    for op in ("remember", "recall", "list"):
        lat = [fin - st for st, fin, k, s in steady if k == op and s == 200]
        latency[op] = {"p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99)}

    http = new_transport()
    lost = extra = 0
    for cid in range(args.clients):
        scope = {"tenant": f"s{cid}"}
        stored: list[str] = []
        offset = 0
        while True:
            for _ in range(10):  # a 503 here is counted in after_outage, then retried
                status, body = await http.post("/v1/memory/list", {"scope": scope, "limit": 1000, "offset": offset})
                if pg is not None:
                    after[status] += 1
                if status != 503:
                    break
                await asyncio.sleep(0.2)
            if status != 200:
                raise SystemExit(f"final listing of {scope} answered {status}: {body}")
            page = body["memories"]
            stored += [m["content"].split()[1] for m in page]
            if len(page) < 1000:
                break
            offset += 1000
        want = set(acked[f"s{cid}"])
        lost += len(want - set(stored))
        extra += len([s for s in stored if not s.startswith(f"s{cid}-")])
        if len(stored) != len(set(stored)):
            extra += len(stored) - len(set(stored))
    await http.aclose()
    return {
        "ops": done,
        "elapsed_s": round(elapsed, 1),
        "ops_per_s": round(done / elapsed, 1),
        "steady_state": {
            "ops": len(steady),
            "elapsed_s": round(steady_s, 1),
            "ops_per_s": round(len(steady) / steady_s, 1),
            "latency_ms": latency,
        },
        "cpu_s": {
            "load_generator" if not args.direct else "bench_and_store": round(cpu1[0] - cpu0[0], 1),
            "service": round(cpu1[1] - cpu0[1], 1),
            "postgres": round(pg_cpu[0], 1),
        },
        "statuses": dict(statuses),
        "during_outage": dict(during),
        "after_outage": {str(k): v for k, v in after.items()},
        "outage_s": round(outage["end"] - outage["start"], 1),
        "outage_window_s": round(window[1] - window[0], 1),
        "acked_writes": sum(len(v) for v in acked.values()),
        "lost": lost,
        "foreign_or_duplicate_rows": extra,
        "crossed_scope_reads": crossed,
    }


def _wait_ready(url: str) -> None:
    for _ in range(600):
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the service at {url} did not become ready")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--ops", type=int, default=20_000)
    p.add_argument("--outage", type=float, default=3.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--pause-503",
        type=float,
        default=0.1,
        help="seconds a client waits after a 503 (the service says Retry-After: 1; 0 retries at once)",
    )
    p.add_argument(
        "--memory",
        default="",
        help="a store URL (sqlite:///PATH; memory: needs --workers 1) instead of our own PostgreSQL (no outage)",
    )
    p.add_argument("--client", choices=["raw", "httpx"], default="raw", help="load generator (default raw)")
    p.add_argument("--direct", action="store_true", help="call the store in-process from threads, without HTTP")
    args = p.parse_args()
    pg: Pg | None = None
    if args.memory:
        dsn = args.memory
    else:
        pg = Pg()
        pg.start()
        dsn = f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
    proc: subprocess.Popen[bytes] | None = None
    store: Any = None
    try:
        if args.direct:
            from shortlist.server._state import open_memory_store

            store = open_memory_store(dsn)

            def new_transport() -> Transport:
                return Direct(store)

            def cpu() -> tuple[float, float]:
                return _self_cpu_s(), 0.0

            async def run() -> dict[str, Any]:
                asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(args.clients))
                return await main_async(args, new_transport, pg, cpu)

            result = asyncio.run(run())
        else:
            port = _port()
            cmd = [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(port)]
            proc = subprocess.Popen([*cmd, "--workers", str(args.workers), "--memory", dsn], start_new_session=True)
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url)
            server = proc

            def cpu() -> tuple[float, float]:
                return _self_cpu_s(), _cpu_s(_tree(server.pid))

            async def run() -> dict[str, Any]:
                limits = httpx.Limits(max_connections=args.clients)
                async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as shared:

                    def new_transport() -> Transport:
                        return HttpxHttp(shared) if args.client == "httpx" else RawHttp("127.0.0.1", port)

                    return await main_async(args, new_transport, pg, cpu)

            result = asyncio.run(run())
            result["server_alive"] = proc.poll() is None
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        if store is not None:
            store.close()
        if pg is not None:
            pg.stop()
            shutil.rmtree(pg.dir, ignore_errors=True)
    result = {
        "store": dsn.split(":", 1)[0],
        "transport": "direct" if args.direct else args.client,
        "clients": args.clients,
        "workers": 0 if args.direct else args.workers,
        **result,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
