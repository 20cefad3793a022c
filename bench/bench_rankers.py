"""Per-turn latency of the rankers at 100 to 100,000 candidates, side by side with baselines.

Measures, with one BLAS thread and a cached index (one warm-up call per catalog, its time
reported as ``build_s``), the time of one ``select`` at k=5 for: the seed's token overlap,
``bm25`` (bm25s), ``embedding`` and ``hybrid`` (when those rankers are available),
``hybrid_previous`` (the default hybrid before the user-wants prefix and the split at joints:
no query prefix, no split of multi-request queries, the same fusion and examples; timed
interleaved with ``hybrid``, one query each in turn, so both see the same machine), and two baselines: ``rank_bm25``
(BM25Okapi.get_scores + top-k over the same terms) and a plain numpy brute-force dot product
over random 384-d unit vectors (query embedding excluded).

Catalogs: synthetic (a fixed-seed vocabulary of pseudo-words, Zipf-distributed, 20-60 words
per description, snake_case names) and MetaTool (199 real tools, real queries).

Usage::

    python bench/bench_rankers.py [--sizes 100,1000,10000,100000] [--queries 200] [--json]

Bounds: rank_bm25 is skipped at 100,000 (pure Python, linear in the catalog: ~10x its 10,000
time per query, minutes per run); the overlap baseline
runs 20 queries at 100,000; embedding and hybrid are skipped above ``--max-embed``
(default 10,000: embedding 10k descriptions takes about a minute on 2 cores).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from shortlist._types import Candidate, Query  # noqa: E402
from shortlist.rankers._bm25 import Bm25Ranker  # noqa: E402
from shortlist.rankers._lexical import TokenOverlapSelector  # noqa: E402
from shortlist.rankers._text import Analyzer, candidate_fields, joined  # noqa: E402

METATOOL = Path(__file__).resolve().parents[2] / "shared" / "data" / "metatool"
K = 5


def _vocabulary(rng: np.random.Generator, n: int = 6000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ser", "tan", "vo", "ri", "pel", "dun", "gra", "fi", "zor", "ne", "tu", "bex", "qua"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 5)))))
    return sorted(words)


def synthetic(n: int, n_queries: int, seed: int = 7) -> tuple[list[Candidate], list[str]]:
    """A synthetic catalog of ``n`` tools and ``n_queries`` queries drawn from its descriptions."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    tools: list[Candidate] = []
    for i in range(n):
        words = rng.choice(vocab, size=int(rng.integers(20, 61)), p=weights)
        name = f"{words[0]}_{words[1]}_{i}"
        tools.append(Candidate(name, name, " ".join(words)))
    queries: list[str] = []
    for _ in range(n_queries):
        target = tools[int(rng.integers(n))].description.split()
        picked = list(rng.choice(target, size=5)) + list(rng.choice(vocab, size=3, p=weights))
        queries.append(" ".join(picked))
    return tools, queries


def metatool(n_queries: int, examples: bool) -> tuple[list[Candidate], list[str]]:
    """MetaTool's 199 tools (optionally with train.jsonl examples) and its first queries."""
    from shortlist.eval._datasets import apply_train_examples, load_dataset, load_queries

    ds = load_dataset(METATOOL)
    tools: Sequence[Candidate] = ds.tools
    if examples:
        tools, _ = apply_train_examples(tools, load_queries(METATOOL / "train.jsonl"))
    return list(tools), [q.text for q in ds.queries[:n_queries]]


def _time(fn: Callable[[str], Any], queries: Sequence[str]) -> dict[str, float]:
    lat: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
    return {"p50": round(statistics.median(lat), 4), "p99": round(p99, 4), "n": len(lat)}


def _selector_fn(selector: Any, tools: Sequence[Candidate]) -> Callable[[str], Any]:
    cands = tuple(tools)

    def run(q: str) -> Any:
        return selector.select(Query(q, k=K), cands)

    return run


def _optional(name: str) -> tuple[Any, str]:
    from shortlist.rankers._registry import create_builtin_selector

    try:
        return create_builtin_selector(name), ""
    except Exception as exc:  # report why a ranker is skipped
        return None, f"{name} skipped: {type(exc).__name__}: {exc}"


def bench_catalog(
    label: str,
    tools: list[Candidate],
    queries: list[str],
    *,
    fresh: Sequence[Sequence[str]],
    max_embed: int,
    notes: list[str],
) -> dict[str, Any]:
    """Time every ranker on one catalog (``fresh``: two unseen query sets for embedding and hybrid)."""
    n = len(tools)
    row: dict[str, Any] = {"catalog": label, "n": n}
    analyzer = Analyzer(stopwords="en_plus")

    def timed(key: str, fn: Callable[[str], Any], qs: Sequence[str], warm: Callable[[], Any] | None = None) -> None:
        t0 = time.perf_counter()
        if warm is not None:
            warm()
        build = time.perf_counter() - t0
        row[key] = {**_time(fn, qs), "build_s": round(build, 3)}
        sys.stderr.write(f"  {label:>22} {key:<9} p50 {row[key]['p50']:8.3f} ms  p99 {row[key]['p99']:8.3f} ms\n")

    overlap = TokenOverlapSelector()
    timed("overlap", _selector_fn(overlap, tools), queries[:20] if n >= 100_000 else queries)

    bm25 = Bm25Ranker()
    bm25_fn = _selector_fn(bm25, tools)
    timed("bm25", bm25_fn, queries, warm=lambda: bm25_fn("warm up"))

    if n < 100_000:
        from rank_bm25 import BM25Okapi

        holder: dict[str, Any] = {}

        def build_rank() -> None:
            docs = [
                analyzer.tokens(joined((f["name"], f["description"], f["parameters"], f["examples"])))
                for f in map(candidate_fields, tools)
            ]
            holder["r"] = BM25Okapi([d or [""] for d in docs])

        def rank_query(q: str) -> Any:
            scores = holder["r"].get_scores(analyzer.tokens(q))
            return np.argpartition(-scores, K)[:K]

        timed("rank_bm25", rank_query, queries[:50] if n >= 10_000 else queries, warm=build_rank)
    else:
        notes.append(
            f"rank_bm25 skipped at {n} to bound the runtime: pure Python, linear in the catalog "
            "(~10x its 10,000 time per query)"
        )

    rng = np.random.default_rng(1)
    mat = rng.standard_normal((n, 384)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    qvecs = {
        q: v / np.linalg.norm(v)
        for q, v in zip(queries, rng.standard_normal((len(queries), 384)).astype(np.float32), strict=True)
    }

    def dense(q: str) -> Any:
        s = mat @ qvecs[q]
        return np.argpartition(-s, K)[:K]

    timed("numpy", dense, queries)

    if n <= max_embed:
        _bench_pair(row, label, tools, fresh[1], fresh[2], notes)
    for offset, name in enumerate(("embedding",), start=1):
        # Fresh queries for each: the embedder's query cache would otherwise serve the second
        # ranker the vectors the first one computed, and hide the query-embedding cost.
        own = fresh[offset - 1]
        if n > max_embed:
            notes.append(f"{name} skipped at {n}: above --max-embed {max_embed} (catalog embedding time)")
            continue
        sel, why = _optional(name)
        if sel is None:
            if why not in notes:
                notes.append(why)
            continue
        fn = _selector_fn(sel, tools)

        def warm(fn: Callable[[str], Any] = fn, name: str = name) -> Any:
            return fn(f"warm up {name}")

        timed(name, fn, own, warm=warm)
        sel.close()
    for base in ("rank_bm25", "numpy"):
        if base in row:
            row[f"bm25_speedup_vs_{base}"] = {
                "p50": round(row[base]["p50"] / row["bm25"]["p50"], 2),
                "p99": round(row[base]["p99"] / row["bm25"]["p99"], 2),
            }
    return row


#: The default hybrid's options before the user-wants prefix and the joint split (``HybridRanker`` keywords).
PREVIOUS_HYBRID: dict[str, Any] = {
    "fusion": "score",
    "query_prefix": "",
    "decompose": False,
    "cover_intents": False,
}


def _bench_pair(
    row: dict[str, Any],
    label: str,
    tools: list[Candidate],
    qs_new: Sequence[str],
    qs_old: Sequence[str],
    notes: list[str],
) -> None:
    """Time the default hybrid and the previous one interleaved (one query each in turn), on unseen queries."""
    from shortlist.rankers._registry import create_builtin_selector

    try:
        new = create_builtin_selector("hybrid")
        old = create_builtin_selector("hybrid", **PREVIOUS_HYBRID)
    except Exception as exc:
        notes.append(f"hybrid skipped: {type(exc).__name__}: {exc}")
        return
    cands = tuple(tools)
    t0 = time.perf_counter()
    new.select(Query("warm up hybrid", k=K), cands)
    old.select(Query("warm up previous hybrid", k=K), cands)
    build = round(time.perf_counter() - t0, 3)
    lat: dict[str, list[float]] = {"hybrid": [], "hybrid_previous": []}
    for q_new, q_old in zip(qs_new, qs_old, strict=False):
        for key, sel, q in (("hybrid", new, q_new), ("hybrid_previous", old, q_old)):
            t = time.perf_counter()
            sel.select(Query(q, k=K), cands)
            lat[key].append((time.perf_counter() - t) * 1000)
    for key, values in lat.items():
        values.sort()
        p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
        row[key] = {
            "p50": round(statistics.median(values), 4),
            "p99": round(p99, 4),
            "n": len(values),
            "build_s": build,
        }
        sys.stderr.write(f"  {label:>22} {key:<15} p50 {row[key]['p50']:8.3f} ms  p99 {row[key]['p99']:8.3f} ms\n")
    row["hybrid_vs_previous"] = {
        "p50": round(row["hybrid"]["p50"] / row["hybrid_previous"]["p50"], 3),
        "p99": round(row["hybrid"]["p99"] / row["hybrid_previous"]["p99"], 3),
    }
    new.close()
    old.close()


def _table(rows: list[dict[str, Any]]) -> str:
    keys = ["overlap", "bm25", "rank_bm25", "numpy", "embedding", "hybrid", "hybrid_previous"]
    head = ["catalog", "n", *[f"{k} p50/p99 ms" for k in keys], "bm25 vs rank_bm25", "bm25 vs numpy"]
    out = [head]
    for r in rows:
        cells = [r["catalog"], str(r["n"])]
        for k in keys:
            cells.append(f"{r[k]['p50']:.3f} / {r[k]['p99']:.3f}" if k in r else "-")
        for base in ("rank_bm25", "numpy"):
            s = r.get(f"bm25_speedup_vs_{base}")
            cells.append(f"{s['p50']:.1f}x / {s['p99']:.1f}x" if s else "-")
        out.append(cells)
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in out)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print a table (or ``--json``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,1000,10000,100000", help="synthetic catalog sizes")
    p.add_argument("--queries", type=int, default=200, help="queries per catalog")
    p.add_argument("--max-embed", type=int, default=10_000, help="largest catalog for embedding/hybrid")
    p.add_argument("--no-metatool", action="store_true", help="skip the MetaTool catalogs")
    p.add_argument("--no-examples", action="store_true", help="skip MetaTool with its 18k train examples")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    notes: list[str] = ["BLAS threads = 1; k = 5; cached index (warm-up call excluded, its time is build_s)"]
    rows: list[dict[str, Any]] = []
    q = args.queries
    for n in (int(s) for s in args.sizes.split(",") if s):
        tools, pool = synthetic(n, 4 * q)
        fresh = [pool[q : 2 * q], pool[2 * q : 3 * q], pool[3 * q :]]
        rows.append(
            bench_catalog(f"synthetic-{n}", tools, pool[:q], fresh=fresh, max_embed=args.max_embed, notes=notes)
        )
    if not args.no_metatool and METATOOL.is_dir():
        for examples in (False,) if args.no_examples else (False, True):
            tools, pool = metatool(8 * q, examples)
            # Different queries per catalog too, for the same reason.
            base = pool[4 * q :] if examples else pool
            fresh = [base[q : 2 * q], base[2 * q : 3 * q], base[3 * q : 4 * q]]
            label = "metatool+examples" if examples else "metatool"
            rows.append(bench_catalog(label, tools, base[:q], fresh=fresh, max_embed=args.max_embed, notes=notes))
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes}))
    else:
        print(_table(rows))
        for note in notes:
            print("note:", note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
