"""A ``find_tools`` search at 1,000 / 10,000 tools: what the model waits for besides its own round trip.

A search ranks the tools the model cannot call yet: the catalog less the block and what it loaded.
Per catalog size (:mod:`bench_scale`'s catalogs and messages, the default selector, the catalog
warmed first), ``--searches`` conversations each make one offer (the prefetch loads its tools) and
one search with another message; printed are the offer's and the search's p50 / p99 in ms, one
query at a time, BLAS and ONNX Runtime on one thread.

    OMP_NUM_THREADS=1 python bench/bench_search.py [--sizes 1000,10000] [--searches 100]

To compare with another build, run it again with ``PYTHONPATH=/tmp/before/src`` (a checkout's
``src`` from ``git archive <commit> src | tar -x -C /tmp/before``) right after.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402
from shortlist import Shortlist  # noqa: E402
from shortlist.offer import ToolSession  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(size: int, searches: int, prepared: Path) -> tuple[list[float], list[float]]:
    bench_scale.embed_missing(size, prepared)
    shortlist = Shortlist(bench_scale.catalog(size, prepared))
    shortlist.for_tools().warm()
    texts = bench_scale.queries(2 * searches + 2)
    warm = ToolSession(shortlist)  # the query model's first runs: not timed
    warm.offer(texts[-1])
    warm.search(texts[-2])
    offers: list[float] = []
    found: list[float] = []
    for i in range(searches):
        session = ToolSession(shortlist)
        start = time.perf_counter()
        session.offer(texts[2 * i])
        mid = time.perf_counter()
        session.search(texts[2 * i + 1])
        found.append((time.perf_counter() - mid) * 1000)
        offers.append((mid - start) * 1000)
    shortlist.close()
    return offers, found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--prepared", type=Path, default=Path(".cache/eval"), help="where converted wheel datasets live")
    args = ap.parse_args()
    print("| tools | offer p50 / p99 ms | search p50 / p99 ms |")
    print("|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        offers, found = run(size, args.searches, args.prepared)
        print(
            f"| {size:,} | {statistics.median(offers):.1f} / {pct(offers, 0.99):.1f} | "
            f"{statistics.median(found):.1f} / {pct(found, 0.99):.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
