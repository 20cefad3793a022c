"""The usage-example path on MetaTool: aggregation, weights and the BM25 field, as a numpy harness.

Embeds MetaTool's tools, queries and train queries with the default embedder (through the
vector cache, so a second run costs seconds), scores BM25's two fields with the library's
``Bm25Ranker`` and recomputes the default hybrid's ranking (``dense + 0.2 * bm25 / max``,
``dense = max(desc, (1 - w) * desc + w * lse_tau(example cosines))`` for a tool with
examples, ``desc`` otherwise; BM25 = main field + ``examples_weight`` * examples field) for
each variant, without re-embedding. Its ``default`` row matches ``shortlist eval --train``.

Example sets (``--sets``):

* ``all``: every train query of a tool (the embedding side keeps the latest 512, ``max_examples``).
* ``spread10``: 10 per tool, picked as ``bench_enrichment.py``'s ``spread`` stand-in does.
* ``random10``: 10 per tool, ``random.Random("18:<tool>").sample`` (its ``random`` stand-in).

Usage::

    OMP_NUM_THREADS=1 python bench/bench_examples.py --metatool ../shared/data/metatool --json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (label, tau, example weight, BM25 examples field weight): the grid reported.
VARIANTS: list[tuple[str, float, float, float]] = [
    ("before: tau 0.05, w 0.7, field 2", 0.05, 0.7, 2.0),
    ("tau 0.065, w 0.7, field 2", 0.065, 0.7, 2.0),
    ("tau 0.05, w 0.75, field 2", 0.05, 0.75, 2.0),
    ("tau 0.05, w 0.7, field 1", 0.05, 0.7, 1.0),
    ("tau 0.065, w 0.75, field 2", 0.065, 0.75, 2.0),
    ("tau 0.065, w 0.7, field 1", 0.065, 0.7, 1.0),
    ("default: tau 0.065, w 0.75, field 1", 0.065, 0.75, 1.0),
    ("tau 0.065, w 0.8, field 1", 0.065, 0.8, 1.0),
    ("tau 0.08, w 0.75, field 1", 0.08, 0.75, 1.0),
    ("tau 0.1, w 0.75, field 1", 0.1, 0.75, 1.0),
    ("tau 0.04, w 0.75, field 1", 0.04, 0.75, 1.0),
]


def _metrics(scores: Any, gold: list[list[int]], splits: list[str]) -> dict[str, Any]:
    from shortlist.eval._metrics import ndcg_at_k, recall_at_k

    order = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    nd, r5 = [], []
    for row, g in zip(order, gold, strict=True):
        ranked, gs = [str(t) for t in row], {str(t) for t in g}
        nd.append(ndcg_at_k(ranked, gs, 10))
        r5.append(recall_at_k(ranked, gs, 5))
    nda, r5a, sp = np.array(nd), np.array(r5), np.array(splits)
    out: dict[str, Any] = {"ndcg@10": round(float(nda.mean()), 4), "recall@5": round(float(r5a.mean()), 4)}
    out["multi"] = [round(float(nda[sp == "multi"].mean()), 4), round(float(r5a[sp == "multi"].mean()), 4)]
    return out


def main(argv: list[str] | None = None) -> int:
    from bench_enrichment import SEED, N, spread
    from shortlist.embeddings._default import default_embedder
    from shortlist.eval._datasets import load_dataset, load_queries
    from shortlist.rankers._base import candidate_text
    from shortlist.rankers._bm25 import Bm25Ranker

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--metatool", type=Path, required=True)
    p.add_argument("--sets", default="all,spread10,random10")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    ds = load_dataset(args.metatool)
    ids = [t.id for t in ds.tools]
    tid = {t: i for i, t in enumerate(ids)}
    n = len(ids)
    by_tool: dict[str, list[str]] = {}
    for q in load_queries(args.metatool / "train.jsonl", ids):
        for g in q.gold:
            if q.text.strip():
                by_tool.setdefault(g, []).append(q.text)
    pos = [q for q in ds.queries if q.gold]
    gold = [[tid[g] for g in q.gold] for q in pos]
    splits = [q.split or "" for q in pos]
    emb = default_embedder()
    ex_texts = sorted({e for v in by_tool.values() for e in v})
    ex_row = {e: i for i, e in enumerate(ex_texts)}
    desc = np.asarray(emb.embed([candidate_text(t) for t in ds.tools]), dtype=np.float32)
    qv = np.asarray(emb.embed([q.text for q in pos]), dtype=np.float32)
    ev = np.asarray(emb.embed(ex_texts), dtype=np.float32)
    sd, se = qv @ desc.T, qv @ ev.T

    def pick(rule: str) -> dict[str, list[str]]:
        out = {}
        for t, qs in by_tool.items():
            if rule == "all":
                out[t] = list(qs)  # BM25 indexes them all; the embedding side keeps the latest 512
            elif len(qs) <= N:
                out[t] = list(qs)
            elif rule == "random10":
                out[t] = random.Random(f"{SEED}:{t}").sample(qs, N)
            else:
                out[t] = [qs[i] for i in spread(ev[[ex_row[e] for e in qs]], N)]
        return out

    report: dict[str, Any] = {"queries": len(pos), "variants": {}}
    for name in args.sets.split(","):
        examples = pick(name)
        tools = tuple(t.with_examples(examples[t.id]) if examples.get(t.id) else t for t in ds.tools)
        bm = Bm25Ranker()
        index = bm._index(tools)
        main_s, ex_s = np.zeros((len(pos), n)), np.zeros((len(pos), n))
        for j, q in enumerate(pos):
            terms = bm.analyzer.tokens(q.text)
            main_s[j] = index.main.scores(terms, n) if index.main is not None else 0.0
            ex_s[j] = index.examples.scores(terms, n) if index.examples is not None else 0.0
        cols = {t: [ex_row[e] for e in v[-512:]] for t, v in examples.items()}
        zs = main_s.max(axis=1, keepdims=True)
        zero = sd + 0.2 * np.where(zs > 0, main_s / np.where(zs > 0, zs, 1), 0)
        rows: dict[str, Any] = {"zero-shot": _metrics(zero, gold, splits)}
        for label, tau, w, field in VARIANTS:
            dense = sd.astype(np.float64).copy()
            for t, c in cols.items():
                s = se[:, c].astype(np.float64)
                best = s.max(axis=1)
                lse = best + tau * np.log(np.exp((s - best[:, None]) / tau).sum(axis=1))
                d = dense[:, tid[t]]
                dense[:, tid[t]] = np.maximum(d, (1 - w) * d + w * lse)
            lexical = main_s + field * ex_s
            mx = lexical.max(axis=1, keepdims=True)
            fused = dense + 0.2 * np.where(mx > 0, lexical / np.where(mx > 0, mx, 1), 0)
            rows[label] = _metrics(fused, gold, splits)
        report["variants"][name] = rows
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, rows in report["variants"].items():
            print(f"== {name}")
            for label, m in rows.items():
                print(f"  {label:40s} {m['ndcg@10']:.4f} / {m['recall@5']:.4f}  multi {m['multi'][0]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
