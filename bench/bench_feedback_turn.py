"""What a turn costs right after a feedback log changed, beside a turn on an unchanged log, at scale.

A service that learns records a turn into its log (``POST /v1/feedback``, the MCP proxy, the
runtime) between two requests. The next request ranks candidates carrying the log's examples,
re-read from the log and attached to new candidate objects. This measures, per catalog size and
log size, the default selector's ``Shortlist.select`` latency:

* ``steady``: a turn on an unchanged log (the catalog indexed, its vectors cached);
* ``after write``: the first turn after one more turn was recorded (mean and worst of ``--writes``);
* the ratio of the two.

``--refresh``: the facade's ``examples_refresh``: ``sync`` (the library's default: the turn after a
write builds the new index) and ``background`` (``shortlist serve``: a thread builds it while turns
rank with the previous examples; the turn after the refresh is then measured as the next one);
``write``: ``sync``, and the writer asks for the new index at once (``Shortlist.refresh_examples``,
what the runtime's conversation does after each turn it records), then ``--gap`` seconds pass (the
model's answer and the user's next message) before the next turn, which ranks with the new examples.

The catalog is ``bench_scale.py``'s (real tools, then suite-prefixed copies); the log holds
``--turns`` turns, each using one tool chosen deterministically (one in ten tools has examples at
10,000 tools and 1,000 turns), with a distinct query text. BLAS and ONNX Runtime on one thread.

With several ``--src LABEL=DIR`` (a checkout's ``src`` folder; e.g. ``git archive <commit> src |
tar -x -C /tmp/before``) each configuration runs once per source in its own process, one after the
other, so before and after are measured on the same machine at the same time.

Usage::

    OMP_NUM_THREADS=1 python bench/bench_feedback_turn.py [--sizes 1000,10000] [--turns 1000,100000] \
        [--writes 5] [--refresh sync,background,write] [--gap 1.0] \
        [--src after=src --src before=/tmp/before/src] [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def child(
    size: int, turns: int, writes: int, prepared: Path, refresh: str = "sync", gap: float = 1.0
) -> dict[str, Any]:
    """One configuration, in this process: returns the figures."""
    sys.path.insert(0, str(REPO / "bench"))
    import bench_scale
    from shortlist import Shortlist
    from shortlist.feedback import FeedbackStore

    cat = bench_scale.catalog(size, prepared)
    queries = bench_scale.queries(200)
    with tempfile.TemporaryDirectory() as tmp:
        store = FeedbackStore(Path(tmp) / "log.sqlite")
        start = time.perf_counter()
        log = Path(tmp) / "turns.jsonl"
        with log.open("w") as fh:  # one transaction (`shortlist feedback import`), not a write a turn
            for i in range(turns):
                text = f"{queries[i % len(queries)]} #{i}"
                fh.write(json.dumps({"qid": str(i), "text": text, "gold": [cat[(i * 7919) % size].id]}) + "\n")
        store.import_jsonl(log)
        fill_s = time.perf_counter() - start
        # (sync is also what a build before examples_refresh did: compared with --src, it is not passed)
        options: dict[str, Any] = {} if refresh in ("sync", "write") else {"examples_refresh": refresh}
        sl = Shortlist(list(cat), examples=store, **options)
        sl.select(queries[0])  # the first turn: the catalog's vectors and index
        for q in queries[1:6]:
            sl.select(q)

        def timed(q: str) -> float:
            t = time.perf_counter()
            sl.select(q)
            return (time.perf_counter() - t) * 1000

        steady = [timed(q) for q in queries[6:46]]
        after: list[float] = []
        for j in range(writes):
            store.record(f"{queries[50 + j]} (new)", used=[cat[(j * 104729) % size].id], kind="tool")
            if refresh == "write":
                sl.refresh_examples()
                time.sleep(gap)
            after.append(timed(queries[100 + j]))
            if refresh == "background":
                sl._enriched.wait()  # the refresh done, the next turn ranks with the new examples
            timed(queries[150 + j])  # the next turn, on the new log
        store.close()
    return {
        "refresh": refresh,
        "gap_s": gap if refresh == "write" else None,
        "tools": size,
        "log_turns": turns,
        "fill_s": round(fill_s, 1),
        "steady_ms": round(statistics.median(steady), 1),
        "after_write_ms": round(statistics.mean(after), 1),
        "after_write_max_ms": round(max(after), 1),
        "ratio": round(statistics.mean(after) / statistics.median(steady), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--turns", default="1000,100000", help="log sizes (recorded turns)")
    ap.add_argument("--writes", type=int, default=5)
    ap.add_argument(
        "--refresh", default="sync", help="sync (the library), background (serve), write (sync + refresh at the write)"
    )
    ap.add_argument("--gap", type=float, default=1.0, help="write mode: seconds between the write and the next turn")
    ap.add_argument("--prepared", type=Path, default=REPO / ".cache" / "eval", help="converted wheel sets")
    ap.add_argument("--src", action="append", default=[], help="LABEL=DIR: run against this src folder")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        size, turns, writes, refresh, gap = args.child
        print(json.dumps(child(int(size), int(turns), int(writes), args.prepared, refresh, float(gap))))
        return
    sources = [s.split("=", 1) for s in args.src] or [["current", str(REPO / "src")]]
    rows: list[dict[str, Any]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        for turns in (int(t) for t in args.turns.split(",")):
            for (label, src), refresh in itertools.product(sources, args.refresh.split(",")):
                env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "OMP_NUM_THREADS": "1"}
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    str(size),
                    str(turns),
                    str(args.writes),
                    refresh,
                    str(args.gap),
                ]
                out = subprocess.run(
                    [*cmd, "--prepared", str(args.prepared)], env=env, capture_output=True, text=True, check=True
                )
                row = {"src": label, **json.loads(out.stdout.strip().splitlines()[-1])}
                rows.append(row)
                print(
                    f"{label:>8} {refresh:>10} {row['tools']:>7,} tools {row['log_turns']:>7,} turns:"
                    f" steady {row['steady_ms']} ms,"
                    f" after a write {row['after_write_ms']} ms (worst {row['after_write_max_ms']}),"
                    f" x{row['ratio']}",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
