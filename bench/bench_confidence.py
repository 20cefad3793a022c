"""Zero-shot abstention of the hybrid ranker: the anchor confidence against the cosine one, side by side.

For each dataset (a ``shortlist eval`` directory whose queries include some with an empty gold),
both confidences of :class:`~shortlist.rankers.hybrid.HybridRanker` are computed on every query
over the whole catalog and reported as:

* ``auroc``: how well the query's best confidence separates queries with a fitting tool from
  those without (:func:`~shortlist.rankers.calibration.auroc`);
* ``recall@5_at_85``: Recall@5 of the queries with gold when the threshold is the 85th percentile
  of the no-tool queries' confidences (85% of them abstain; ``shortlist eval --curve`` gives the
  same point);
* the latency of one ``select`` with abstention on (so the confidence is computed), timed
  interleaved, one query each in turn, on the first dataset, with an embedder without query or
  vector cache (every query is embedded); and the one-time cost of embedding the anchors.

Usage::

    OMP_NUM_THREADS=1 python bench/bench_confidence.py DATASET_DIR [DATASET_DIR ...] [--queries 200] [--json]
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
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from shortlist.eval.datasets import load_dataset  # noqa: E402
from shortlist.rankers.calibration import auroc  # noqa: E402
from shortlist.rankers.confidence import AnchorConfidence, ConfidenceKind  # noqa: E402
from shortlist.rankers.hybrid import HybridRanker  # noqa: E402
from shortlist.types import Query  # noqa: E402

KINDS: tuple[ConfidenceKind, ...] = ("anchors", "cosine")


def quality(path: str) -> dict[str, Any]:
    """AUROC and Recall@5 at 85% correct abstention of both confidences on one dataset."""
    ds = load_dataset(path)
    rankers = {kind: HybridRanker(confidence=kind) for kind in KINDS}
    ids = [c.id for c in ds.tools]
    best: dict[str, list[float]] = {kind: [] for kind in KINDS}
    recall: list[float] = []
    for q in ds.queries:
        for kind, ranker in rankers.items():
            scores, conf = ranker.score_with_confidence(Query(q.text), ds.tools)
            best[kind].append(float(np.max(conf)))
        if q.gold:
            top = {ids[int(i)] for i in np.argsort(-scores, kind="stable")[:5]}
            recall.append(len(set(q.gold) & top) / min(5, len(q.gold)))
        else:
            recall.append(float("nan"))
    has = np.array([bool(q.gold) for q in ds.queries])
    rec = np.asarray(recall)
    out: dict[str, Any] = {"dataset": ds.name, "queries": int(has.sum()), "queries_no_tool": int((~has).sum())}
    for kind in KINDS:
        c = np.asarray(best[kind])
        t = float(np.percentile(c[~has], 85))
        out[kind] = {
            "auroc": round(auroc(c[has], c[~has]), 4),
            "recall@5_at_85": round(float(np.where(c[has] >= t, rec[has], 0.0).sum() / has.sum()), 4),
            "min_score_at_85": round(t, 4),
        }
    return out


def latency(path: str, n: int) -> dict[str, Any]:
    """p50/p99 of one ``select`` with abstention on, both confidences interleaved; the anchors' one-time cost."""
    from shortlist.embeddings.default import DefaultEmbedder

    ds = load_dataset(path)
    emb = DefaultEmbedder(query_cache_size=0, vector_cache=None)
    t0 = time.perf_counter()
    emb.embed(["warm up the model"])
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    AnchorConfidence().vectors(emb)
    anchors_s = time.perf_counter() - t0
    rankers = {kind: HybridRanker(embedder=emb, confidence=kind, min_score=-1e9) for kind in KINDS}
    for kind, ranker in rankers.items():
        ranker.select(Query(f"warm up {kind}"), ds.tools)
    texts = [q.text for q in ds.queries][: 2 * n]
    lat: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for i, text in enumerate(texts):
        order = KINDS if i % 2 == 0 else KINDS[::-1]
        for kind in order:
            t = time.perf_counter()
            rankers[kind].select(Query(text, k=5), ds.tools)
            lat[kind].append((time.perf_counter() - t) * 1000)
    out: dict[str, Any] = {"dataset": ds.name, "model_load_s": round(load_s, 3), "anchors_embed_s": round(anchors_s, 3)}
    for name, values in lat.items():
        values.sort()
        out[name] = {
            "p50_ms": round(statistics.median(values), 3),
            "p99_ms": round(values[min(len(values) - 1, round(0.99 * (len(values) - 1)))], 3),
            "n": len(values),
        }
    out["anchors_vs_cosine_p50"] = round(out["anchors"]["p50_ms"] / out["cosine"]["p50_ms"], 3)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    p.add_argument("datasets", nargs="+", help="shortlist eval dataset directories (with no-tool queries)")
    p.add_argument("--queries", type=int, default=200, help="queries timed per confidence (0: no latency)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    rows = []
    for path in args.datasets:
        row = quality(path)
        rows.append(row)
        sys.stderr.write(
            f"{row['dataset']}: "
            + ", ".join(f"{k} AUROC {row[k]['auroc']:.3f} R@5@85% {row[k]['recall@5_at_85']:.3f}" for k in KINDS)
            + "\n"
        )
    result: dict[str, Any] = {"quality": rows, "load": os.getloadavg()[0]}
    if args.queries:
        result["latency"] = latency(args.datasets[0], args.queries)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
