"""PromptKit's exec client, one spawned ``shortlist exec-selector`` per turn: daemon vs service vs cold vs old.

Every call writes PromptKit's exact request bytes (``tests/exec/data/promptkit_tools_200.json``:
200 tools, ``K = 200``, Go's escaping, no newline; regenerate with
``tests/exec/promptkit_payload.py``), each call with another user turn's text, on the stdin
of a new ``shortlist exec-selector`` process (the console script, default selector), closes it
and waits for the answer, as PromptKit's direct sandbox does. Modes, in one run:

* ``old``: what PromptKit got before: the spawned process loads the selector in-process and
  embeds the catalog (``SHORTLIST_CACHE_DIR=off``: no persistent vectors);
* ``cold``: no daemon; the catalog's vectors are on disk (a cache folder primed by one call);
* ``daemon``: ``shortlist exec-selector --daemon SOCKET`` is up; the spawned call forwards
  (``SHORTLIST_EXEC_SOCKET``);
* ``service``: ``shortlist serve`` is up; the spawned call forwards (``SHORTLIST_EXEC_URL``).

Reported per mode: p50/p99 wall per call, CPU (user+system) of the spawned process (p50) and
of the daemon or service per call (mean), and the ratio of p50s against ``old``. The machine is
shared and noisy: wall times scale with its load, CPU times do not; read ratios within one run.
Every answer is checked to narrow (fewer ids than candidates).

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_promptkit_spawn.py [--calls 30] [--cold-calls 5] [--json OUT]

``--fresh MODES`` measures a fresh machine instead (issue 27, item 29): each setup gets an empty
cache folder (``SHORTLIST_CACHE_DIR``) and an empty private runtime folder (``XDG_RUNTIME_DIR``),
and ``--fresh-calls`` turns of PromptKit's tool path over a JSONL catalog (default: MetaTool's
199 tools, one MetaTool query per turn), each spawned and **SIGKILLed at** ``--timeout-ms``
(3000, PromptKit's default) as PromptKit's ``exec.CommandContext`` does. A call is *narrowed*
when it exited 0 in time with fewer ids than candidates. Setups: ``autostart`` (the documented
one: ``exec-selector --autostart``; the daemon's CPU is counted in CPU per call), ``cold``
(nothing but the spawned call), ``warm`` (``exec-selector --warm --catalog`` once, untimed, then
cold calls). The load average is read before and after each setup.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_promptkit_spawn.py --fresh autostart,cold,warm
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PAYLOAD = REPO / "tests" / "exec" / "data" / "promptkit_tools_200.json"
SHORTLIST = str(Path(sys.executable).with_name("shortlist"))
#: Each call asks another user turn (a turn's text is new to the model: no cached query vector).
QUERIES = (
    "Will it rain in Lisbon on Friday?",
    "book a table for two tonight & tell me the reviews",
    "send an SMS to my landlord that the rent is paid",
    "open a Jira issue for the login bug <urgent>",
    "what's the price of Apple stock right now",
    "translate 'good morning' into Japanese",
    "find me a flight from Paris to Rome next Tuesday",
    "archive the old Trello cards of last sprint",
    "export this month's Stripe invoices as CSV",
    "comment on the Figma mockup: the logo is too small",
    "how long does it take to drive to the airport",
    "list my calendar events for tomorrow morning",
    "summarise the latest news about electric cars",
    "create a HubSpot contact for Jane Doe & add her email",
    "delete the S3 object backups/2019.tar",
    "search Zendesk for tickets about refunds > 100 EUR",
    "what is the air quality in Delhi today",
    "transcribe this voice memo",
    "generate an image of a cat on a skateboard",
    "update the Salesforce lead: status is qualified",
)
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def go_string(text: str) -> str:
    """A Go ``json.Marshal`` string: HTML characters and U+2028/9 escaped as PromptKit's client writes them."""
    out = []
    for ch in text:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ch in "<>&\u2028\u2029" or ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def payloads(template: bytes) -> list[bytes]:
    """The fixture's bytes with each query's text in place of the fixture's (the rest byte for byte)."""
    head = b'{"query":{"Text":'
    end = template.index(b',"Kind":')
    return [head + go_string(q).encode() + template[end:] for q in QUERIES]


def spawn_once(payload: bytes, env: dict[str, str]) -> dict[str, float]:
    """One PromptKit turn: its wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [SHORTLIST, "exec-selector"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    out, err = proc.communicate(payload, timeout=300)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"exec-selector failed ({proc.returncode}): {err.decode()[-2000:]}")
    if b"exec.forward_failed" in err:
        raise SystemExit(f"a forwarded call fell back: {err.decode()[-2000:]}")
    selected = json.loads(out)["selected"]
    if not 0 < len(selected) < 200:
        raise SystemExit(f"no narrowing: {len(selected)} ids")
    return {"wall_s": wall}


def measure(turns: list[bytes], env: dict[str, str], calls: int, server: int | None = None) -> list[dict[str, float]]:
    """``calls`` spawned turns; per call the child's CPU and, with ``server`` (a session id), the server's."""
    rows = []
    for i in range(calls):
        before, served = _children_usage(), _session_cpu(server)
        row = spawn_once(turns[i % len(turns)], env)
        row["cpu_s"] = _children_usage() - before
        row["server_cpu_s"] = _session_cpu(server) - served
        rows.append(row)
    return rows


def _session_cpu(sid: int | None) -> float:
    """User+system CPU of every live process of session ``sid`` (the daemon or the service and its workers)."""
    if sid is None:
        return 0.0
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: the session id
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _children_usage() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    walls = [r["wall_s"] for r in rows]
    return {
        "calls": len(rows),
        "p50_ms": round(_pct(walls, 0.5) * 1000, 1),
        "p99_ms": round(_pct(walls, 0.99) * 1000, 1),
        "cpu_ms_p50": round(statistics.median(r["cpu_s"] for r in rows) * 1000, 1),
        "server_cpu_ms_mean": round(statistics.fmean(r["server_cpu_s"] for r in rows) * 1000, 1),
    }


@contextlib.contextmanager
def background(cmd: list[str], env: dict[str, str], ready: Any, what: str) -> Iterator[int]:
    log = tempfile.NamedTemporaryFile(prefix="bench-promptkit-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.2)
        yield proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        log.close()
        os.unlink(log.name)


def _socket_ready(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
        return True
    except OSError:
        return False


def _http_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


# --- a fresh machine: an empty cache, PromptKit's deadline ------------------------------------------------------


def catalog_payloads(catalog: Path, queries: Path, n: int) -> list[bytes]:
    """PromptKit's tool-path request (``K = len(candidates)``) over a JSONL catalog, one per query text.

    The query texts are the first of ``queries`` (JSONL with ``text``), one per catalog tool so
    no two turns ask alike.
    """
    tools = [json.loads(line) for line in catalog.read_text().splitlines() if line.strip()]
    items = ",".join(
        f'{{"ID":{go_string(t["id"])},"Name":{go_string(t.get("name") or t["id"])},'
        f'"Description":{go_string(t.get("description", ""))},"Metadata":null}}'
        for t in tools
    )
    texts: list[str] = []
    seen: set[str] = set()
    for line in queries.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        gold = tuple(row.get("gold") or ())
        if row.get("text") and gold and gold[0] not in seen:
            seen.add(gold[0])
            texts.append(row["text"])
        if len(texts) == n:
            break
    return [
        (
            f'{{"query":{{"Text":{go_string(q)},"Kind":"tool","PackID":"","AgentID":"","K":{len(tools)}}},'
            f'"candidates":[{items}]}}'
        ).encode()
        for q in texts
    ]


def deadline_call(cmd: list[str], payload: bytes, env: dict[str, str], timeout_ms: int, n: int) -> dict[str, Any]:
    """One PromptKit turn under its deadline: spawn, write stdin, close it; SIGKILL the process at ``timeout_ms``.

    As PromptKit's exec client does (``exec.CommandContext``: the process is killed, not its
    group). ``narrowed``: exit 0 in time with one JSON document naming fewer ids than ``n``.
    """
    before = _children_usage()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    killed = False
    try:
        out, err = proc.communicate(payload, timeout=timeout_ms / 1000)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        killed = True
    wall = time.perf_counter() - start
    narrowed = False
    if not killed and proc.returncode == 0:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            narrowed = 0 < len(json.loads(out)["selected"]) < n
    return {
        "wall_s": wall,
        "cpu_s": _children_usage() - before,
        "killed": killed,
        "narrowed": narrowed,
        "exit": proc.returncode,
        "stderr": err.decode("utf-8", "replace")[-400:],
    }


def _daemons_of(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker`` (the autostarted daemon's socket)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if b"--daemon" in cmdline and marker.encode() in cmdline:
            pids.append(int(entry))
    return pids


def _pid_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fresh(
    mode: str, turns: list[bytes], n: int, timeout_ms: int, base: dict[str, str], catalog: Path
) -> dict[str, Any]:
    """``len(turns)`` calls on an empty cache dir (a fresh machine) in one setup.

    * ``cold``: ``shortlist exec-selector``, nothing else (in-process every call);
    * ``autostart``: ``shortlist exec-selector --autostart`` (the default private socket): the first
      call starts the daemon; the daemon's CPU is added to the calls';
    * ``warm``: ``shortlist exec-selector --warm --catalog FILE`` once (not timed), then cold calls.
    """
    with tempfile.TemporaryDirectory(prefix="bench-fresh-") as tmp:
        runtime = Path(tmp) / "run"
        runtime.mkdir(mode=0o700)
        env = {**base, "SHORTLIST_CACHE_DIR": str(Path(tmp) / "cache"), "XDG_RUNTIME_DIR": str(runtime)}
        cmd = [SHORTLIST, "exec-selector"]
        if mode == "autostart":
            cmd.append("--autostart")
        if mode == "warm":
            subprocess.run([*cmd, "--warm", "--catalog", str(catalog)], env=env, check=True, capture_output=True)
        load_before = os.getloadavg()[0]
        rows = [deadline_call(cmd, t, env, timeout_ms, n) for t in turns]
        load_after = os.getloadavg()[0]
        daemon_cpu = 0.0
        for pid in _daemons_of(str(runtime)):
            daemon_cpu += _pid_cpu(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    walls = [r["wall_s"] for r in rows]
    return {
        "mode": mode,
        "calls": len(rows),
        "narrowed": sum(r["narrowed"] for r in rows),
        "killed": sum(r["killed"] for r in rows),
        "p50_ms": round(_pct(walls, 0.5) * 1000, 1),
        "p99_ms": round(_pct(walls, 0.99) * 1000, 1),
        "cpu_ms_per_call": round((sum(r["cpu_s"] for r in rows) + daemon_cpu) / len(rows) * 1000, 1),
        "load": f"{load_before:.2f}-{load_after:.2f}",
        "per_call": [
            {k: (round(v * 1000) if k == "wall_s" else v) for k, v in r.items() if k not in ("cpu_s",)} for r in rows
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=30, help="spawned calls per warm mode (daemon, service)")
    ap.add_argument("--cold-calls", type=int, default=5, help="spawned calls per cold mode (cold, old)")
    ap.add_argument("--modes", default="old,cold,daemon,service")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument(
        "--fresh",
        metavar="MODES",
        default=None,
        help="instead: a fresh machine (empty cache) under PromptKit's deadline, in these setups "
        "(comma-separated: cold, autostart, warm)",
    )
    ap.add_argument("--fresh-calls", type=int, default=20)
    ap.add_argument("--timeout-ms", type=int, default=3000, help="PromptKit's timeout_ms (default 3000)")
    ap.add_argument("--catalog", type=Path, default=Path("/work/shared/data/metatool/tools.jsonl"))
    ap.add_argument("--queries", type=Path, default=None, help="JSONL query texts (default: beside --catalog)")
    args = ap.parse_args()
    if args.fresh:
        main_fresh(args)
        return
    modes = args.modes.split(",")
    payload = PAYLOAD.read_bytes()
    turns = payloads(payload)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SHORTLIST_EXEC_")}
    base["OMP_NUM_THREADS"] = "1"
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-promptkit-") as tmp:
        warm_cache = {**base, "SHORTLIST_CACHE_DIR": str(Path(tmp) / "cache")}
        if "old" in modes:
            results["old"] = summary(measure(turns, {**base, "SHORTLIST_CACHE_DIR": "off"}, args.cold_calls))
        if "cold" in modes:
            spawn_once(payload, warm_cache)  # prime the on-disk vectors
            results["cold"] = summary(measure(turns, warm_cache, args.cold_calls))
        if "daemon" in modes:
            sock = str(Path(tmp) / "exec.sock")
            daemon = [SHORTLIST, "exec-selector", "--daemon", sock]
            with background(daemon, warm_cache, lambda: _socket_ready(sock), "the daemon") as sid:
                env = {**base, "SHORTLIST_EXEC_SOCKET": sock}
                spawn_once(payload, env)  # the daemon embeds this catalog once
                results["daemon"] = summary(measure(turns, env, args.calls, sid))
        if "service" in modes:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            url = f"http://127.0.0.1:{port}"
            serve = [SHORTLIST, "serve", "--host", "127.0.0.1", "--port", str(port)]
            with background(serve, warm_cache, lambda: _http_ready(url), "shortlist serve") as sid:
                env = {**base, "SHORTLIST_EXEC_URL": url}
                spawn_once(payload, env)
                results["service"] = summary(measure(turns, env, args.calls, sid))
    old = results.get("old", {}).get("p50_ms")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"PromptKit exec client, 200 candidates, default selector, one spawn per call ({os.cpu_count()} cores)")
    print(f"load average at the end: {load} (wall times scale with it; CPU does not)")
    header = f"{'mode':<8} {'calls':>5} {'p50 ms':>9} {'p99 ms':>9} {'spawn CPU ms':>12} {'server CPU ms':>13}"
    print(header + f" {'old/mode':>9}")
    for mode, row in results.items():
        ratio = f"{old / row['p50_ms']:.1f}x" if old else "-"
        print(
            f"{mode:<8} {row['calls']:>5} {row['p50_ms']:>9} {row['p99_ms']:>9} {row['cpu_ms_p50']:>12} "
            f"{row['server_cpu_ms_mean']:>13} {ratio:>9}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def main_fresh(args: argparse.Namespace) -> None:
    queries = args.queries or args.catalog.with_name("queries.jsonl")
    turns = catalog_payloads(args.catalog, queries, args.fresh_calls)
    n = json.loads(turns[0])["query"]["K"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("SHORTLIST_EXEC_")}
    base["OMP_NUM_THREADS"] = "1"
    results = [fresh(m, turns, n, args.timeout_ms, base, args.catalog) for m in args.fresh.split(",")]
    print(
        f"PromptKit exec client on a fresh machine: {n} candidates ({args.catalog.name}), empty cache, "
        f"timeout_ms {args.timeout_ms} (SIGKILL), {args.fresh_calls} calls, {os.cpu_count()} cores"
    )
    print(f"{'mode':<10} {'narrowed':>9} {'killed':>6} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/call':>11} {'load':>10}")
    for r in results:
        narrowed = f"{r['narrowed']}/{r['calls']}"
        print(
            f"{r['mode']:<10} {narrowed:>9} {r['killed']:>6} {r['p50_ms']:>8} {r['p99_ms']:>8} "
            f"{r['cpu_ms_per_call']:>11} {r['load']:>10}"
        )
        print("  walls ms:", " ".join(str(c["wall_s"]) + ("k" if c["killed"] else "") for c in r["per_call"]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
