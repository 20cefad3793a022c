"""The hybrid's scale levers, side by side, on every single-turn tool-retrieval set.

Runs ``shortlist.eval._runner.run_eval`` for each variant (``--variant NAME='{"option": value}'``,
the hybrid's constructor options as JSON; ``default`` is always run first) on:

* ``metatool``: every MetaTool query (159 of its 199 tools were trained on by the default
  embedder: flattering);
* ``metatool-unseen``: only the queries whose gold tools are all held out of the fine-tune
  (``scripts/train_embedder_heldout.json``), the whole catalog ranked;
* every ``--dataset`` directory (LiveMCPBench tools, NESTFUL glaive/sgd/exec: ``shortlist eval
  prepare``).

One embedder is shared by every variant (its query cache holds every query), so the variants
differ only in ranking. Prints nDCG@10 / Recall@5 per set and variant (``--json``: one object),
then each variant's nDCG@10 difference from ``default`` with its 95% interval over the set's
queries, the same queries drawn from both (``shortlist eval diff``'s paired bootstrap): a
difference is clear when the interval leaves out zero.

Usage (OMP_NUM_THREADS=1)::

    OMP_NUM_THREADS=1 python bench/bench_scale_rank.py --metatool "$EVAL_DATA/metatool" \\
        --dataset .cache/eval/livemcpbench --dataset .cache/eval/nestful-glaive \\
        --dataset .cache/eval/nestful-sgd --dataset .cache/eval/nestful-exec \\
        --variant 'servers={"server_weight": 0.3}' --json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "scripts" / "train_embedder_heldout.json"


def _variant(spec: str) -> tuple[str, dict[str, Any]]:
    name, sep, options = spec.partition("=")
    if not sep or not name:
        raise SystemExit(f"--variant wants NAME=JSON, got {spec!r}")
    parsed = json.loads(options)
    if not isinstance(parsed, dict):
        raise SystemExit(f"--variant {name}: the options must be a JSON object")
    return name, parsed


def main(argv: list[str] | None = None) -> int:
    from shortlist.embeddings._default import TOOLS_MODEL_NAME, DefaultEmbedder
    from shortlist.eval._datasets import load_dataset
    from shortlist.eval._intervals import diff_reports
    from shortlist.eval._runner import run_eval
    from shortlist.rankers._hybrid import HybridRanker

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--metatool", type=Path, help="the MetaTool folder (whole set and unseen-tool split)")
    p.add_argument("--dataset", type=Path, action="append", default=[])
    p.add_argument("--variant", action="append", default=[], help="NAME=JSON hybrid options")
    p.add_argument("--limit", type=int, default=0, help="at most this many queries per set (0: all)")
    p.add_argument("--query-precision", default="float32", choices=("float32", "int8"), help="the query path's model")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    sets: list[tuple[str, Any]] = []
    if args.metatool:
        held = set(json.loads(HELDOUT.read_text())["tools"])
        metatool = load_dataset(args.metatool)
        sets.append(("metatool", metatool))
        unseen = tuple(q for q in metatool.queries if q.gold and set(q.gold) <= held)
        sets.append(("metatool-unseen", replace(metatool, queries=unseen)))
    sets += [(d.name, load_dataset(d)) for d in args.dataset]
    if args.limit:
        sets = [(n, replace(ds, queries=ds.queries[: args.limit])) for n, ds in sets]
    variants = [("default", {}), *(_variant(v) for v in args.variant)]
    embedder = DefaultEmbedder(model=TOOLS_MODEL_NAME, query_cache_size=100_000, query_precision=args.query_precision)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    defaults: dict[str, dict[str, Any]] = {}  # each set's default report, what the variants are paired with
    for vname, options in variants:
        for sname, ds in sets:
            rep = run_eval(HybridRanker(embedder=embedder, **options), ds, progress=False)
            row = {"ndcg@10": rep.get("ndcg@10"), "recall@5": rep.get("recall@5"), "queries": rep.get("queries")}
            if vname == "default":
                defaults[sname] = rep
            else:
                row["vs_default"] = diff_reports(defaults[sname], rep)["ndcg@10"]
            results.setdefault(sname, {})[vname] = row
            print(f"{sname:24s} {vname:16s} {row['ndcg@10']:.4f} / {row['recall@5']:.4f}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"variants": dict(variants), "results": results}, indent=2))
    else:
        names = [v for v, _ in variants]
        print("| set | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for sname, by_variant in results.items():
            cells = [f"{by_variant[v]['ndcg@10']:.3f} / {by_variant[v]['recall@5']:.3f}" for v in names]
            print(f"| {sname} | " + " | ".join(cells) + " |")
        if len(names) > 1:
            print("\nnDCG@10 minus default's, 95% interval of the paired difference (clear: it leaves out zero)\n")
            print("| set | " + " | ".join(names[1:]) + " |")
            print("|---|" + "---|" * (len(names) - 1))
            for sname, by_variant in results.items():
                cells = []
                for v in names[1:]:
                    fig = by_variant[v]["vs_default"]
                    low, high = fig["interval"] or (0.0, 0.0)
                    mark = " clear" if fig["clear"] else ""
                    cells.append(f"{fig['difference']:+.4f} ({low:+.4f} to {high:+.4f}){mark}")
                print(f"| {sname} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
