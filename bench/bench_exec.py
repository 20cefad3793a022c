"""Per-turn overhead of the exec client: spawn-per-call vs persistent worker vs an in-process call.

The selector is trivial (it returns the first k ids), so what is measured is the cost of
the transport: process start-up, JSON encoding and decoding, pipes. Each mode answers the
same query over 100 and 1,000 candidates; the table gives p50/p99 per call, the worker's
overhead over the in-process call at p50, and how many times faster the worker is than
spawning per call.

Run::

    .venv/bin/python bench/bench_exec.py            # table
    .venv/bin/python bench/bench_exec.py --json     # one JSON document

Modes: ``in_process`` (the same function called directly), ``worker`` (a persistent worker
that reads the whole request every turn), ``worker_ref`` (a worker that keeps the candidate
list it acknowledged with ``candidates_ref``, so an unchanged catalog is not resent),
``spawn`` (one process per call). ``pool`` and ``turn_after``: a conversation's turns and searches
against the ``worker_ref`` worker, alternately: a ``find_tools`` search ranks a pool, the catalog less
the 3 tools already loaded (other ones each time), and the next turn the whole catalog again; each
timed apart (with ``--sizes 10000`` for a large catalog; run it with ``PYTHONPATH`` pointing at
another checkout's ``src`` for a before/after).

Goals (issue 2): worker − in-process ≤ 1 ms at p50; spawn / worker ≥ 20×.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from shortlist._types import Candidate, Query  # noqa: E402
from shortlist.rankers._exec_client import ExecSelector  # noqa: E402
from shortlist.selection._base import FunctionSelector, Selector  # noqa: E402

K = 10

SELECTOR_SCRIPT = """
import json, sys

kept = {}  # candidates_ref -> candidate ids (only with --keep-candidates)

def answer(request, keep):
    ref = request.get("candidates_ref")
    if "candidates" in request:
        ids = [c["id"] for c in request["candidates"]]
        if keep and ref:
            kept.clear()
            kept[ref] = ids
    else:
        ids = kept[ref]
    out = {"selected": ids[: request["query"]["k"] or 10], "reason": "first k"}
    if "id" in request:
        out["id"] = request["id"]
    if keep and ref:
        out["candidates_ref"] = ref
    return json.dumps(out)

if "--worker" in sys.argv:
    keep = "--keep-candidates" in sys.argv
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(answer(json.loads(line), keep) + "\\n")
            sys.stdout.flush()
else:
    sys.stdout.write(answer(json.load(sys.stdin), False))
"""


def first_k(query: Query, candidates: Sequence[Candidate]) -> list[str]:
    """The in-process twin of the script: the first k ids."""
    return [c.id for c in candidates[: query.k or 10]]


def catalog(n: int) -> list[Candidate]:
    """``n`` tool-like candidates with realistic descriptions."""
    return [
        Candidate(
            f"tool_{i:04d}",
            description=f"Tool number {i}: looks up records of kind {i % 17} and returns a short summary.",
            metadata={"namespace": f"ns{i % 5}"},
        )
        for i in range(n)
    ]


def measure(select: Callable[[], Any], runs: int, warmup: int) -> dict[str, float]:
    """Time ``runs`` calls after ``warmup`` calls; return p50/p99/mean in milliseconds."""
    for _ in range(warmup):
        select()
    samples = np.empty(runs)
    for i in range(runs):
        start = time.perf_counter()
        select()
        samples[i] = (time.perf_counter() - start) * 1000
    return {
        "p50_ms": float(np.percentile(samples, 50)),
        "p99_ms": float(np.percentile(samples, 99)),
        "mean_ms": float(samples.mean()),
        "runs": runs,
    }


def run(sizes: Sequence[int], spawn_runs: int, worker_runs: int, inproc_runs: int) -> dict[str, Any]:
    """Benchmark the three modes for each catalog size."""
    results: dict[str, Any] = {"python": sys.version.split()[0], "k": K, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "first_k.py"
        script.write_text(SELECTOR_SCRIPT)
        spawn = ExecSelector("spawn", sys.executable, [str(script)], timeout_ms=30_000)
        worker = ExecSelector("worker", sys.executable, [str(script), "--worker"], worker=True, timeout_ms=30_000)
        worker_ref = ExecSelector(
            "worker_ref", sys.executable, [str(script), "--worker", "--keep-candidates"], worker=True, timeout_ms=30_000
        )
        inproc: Selector = FunctionSelector(first_k, name="in-process")
        try:
            for n in sizes:
                cands = catalog(n)
                query = Query("look up the records of kind 3", kind="tool", k=K)
                expected = inproc.select(query, cands).selected
                for sel in (spawn, worker, worker_ref):
                    assert sel.select(query, cands).selected == expected, sel.name
                row = {
                    "in_process": measure(lambda q=query, c=cands: inproc.select(q, c), inproc_runs, 50),
                    "worker": measure(lambda q=query, c=cands: worker.select(q, c), worker_runs, 20),
                    "worker_ref": measure(lambda q=query, c=cands: worker_ref.select(q, c), worker_runs, 20),
                    "spawn": measure(lambda q=query, c=cands: spawn.select(q, c), spawn_runs, 2),
                }
                row["worker_minus_in_process_p50_ms"] = row["worker"]["p50_ms"] - row["in_process"]["p50_ms"]
                row["spawn_over_worker_p50"] = row["spawn"]["p50_ms"] / row["worker"]["p50_ms"]
                row["worker_ref_minus_in_process_p50_ms"] = row["worker_ref"]["p50_ms"] - row["in_process"]["p50_ms"]
                row["spawn_over_worker_ref_p50"] = row["spawn"]["p50_ms"] / row["worker_ref"]["p50_ms"]
                row["pool"], row["turn_after"] = searches(worker_ref, query, cands, max(20, worker_runs // 10))
                results["sizes"][str(n)] = row
        finally:
            worker.close()
            worker_ref.close()
    return results


def searches(sel: Selector, query: Query, cands: list[Candidate], runs: int) -> tuple[dict[str, float], ...]:
    """Alternate a search's pool (the catalog less 3 loaded tools) and the next turn's whole catalog."""
    n = len(cands)
    pool_ms, turn_ms = np.empty(runs), np.empty(runs)
    for i in range(-3, runs):
        loaded = {(7 * i) % n, (7 * i + 3) % n, (11 * i + 5) % n}
        pool = [c for j, c in enumerate(cands) if j not in loaded]
        start = time.perf_counter()
        sel.select(query, pool)
        middle = time.perf_counter()
        sel.select(query, cands)
        end = time.perf_counter()
        if i >= 0:
            pool_ms[i], turn_ms[i] = (middle - start) * 1000, (end - middle) * 1000
    return tuple(
        {
            "p50_ms": float(np.percentile(v, 50)),
            "p99_ms": float(np.percentile(v, 99)),
            "mean_ms": float(v.mean()),
            "runs": runs,
        }
        for v in (pool_ms, turn_ms)
    )


def render(results: dict[str, Any]) -> str:
    """Format the results as a plain-text table."""
    lines = [
        f"exec client overhead (python {results['python']}, trivial first-k selector, k={results['k']})",
        "",
        f"{'candidates':>10}  {'mode':<12}{'p50 ms':>9}{'p99 ms':>9}{'runs':>7}",
    ]
    for n, row in results["sizes"].items():
        for mode in ("in_process", "worker", "worker_ref", "spawn", "pool", "turn_after"):
            m = row[mode]
            lines.append(f"{n:>10}  {mode:<12}{m['p50_ms']:>9.3f}{m['p99_ms']:>9.3f}{m['runs']:>7}")
        lines.append(
            f"{'':>10}  worker − in-process at p50: {row['worker_minus_in_process_p50_ms']:.3f} ms (goal ≤ 1); "
            f"spawn / worker at p50: {row['spawn_over_worker_p50']:.1f}× (goal ≥ 20)"
        )
        lines.append(
            f"{'':>10}  worker_ref − in-process at p50: {row['worker_ref_minus_in_process_p50_ms']:.3f} ms; "
            f"spawn / worker_ref at p50: {row['spawn_over_worker_ref_p50']:.1f}×"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="catalog sizes")
    parser.add_argument("--spawn-runs", type=int, default=40)
    parser.add_argument("--worker-runs", type=int, default=400)
    parser.add_argument("--inproc-runs", type=int, default=2000)
    args = parser.parse_args(argv)
    results = run(args.sizes, args.spawn_runs, args.worker_runs, args.inproc_runs)
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
