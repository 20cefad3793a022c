"""The fine-tuned tool embedder against all-MiniLM-L6-v2, side by side, on every tool-retrieval set.

For each model (``old``: the shipped all-MiniLM-L6-v2 int8; ``new``: an int8 ONNX file, by
default the packaged ``minilm-tools-int8``) and each selector (``embedding``, ``hybrid``),
runs ``shortlist.eval._runner.run_eval`` on MetaTool and reports:

* ``metatool-heldout``: only the queries whose gold tools are all among the tools held out
  of the fine-tune (``scripts/train_embedder_heldout.json``), the whole catalog ranked. This
  is the figure that says whether the fine-tune transfers to tools it never saw; with
  ``wrong_top1`` (queries whose first tool is wrong) and ``wrong_top1_trained_tool`` (of those,
  how many put a trained tool first).
* ``metatool-heldout-catalog``: the same queries ranked among the 40 held-out tools alone: a
  catalog no tool of which was trained on, as a user's catalog is. The whole-catalog figure
  above also counts the trained tools' pull on unseen queries (a trained description sits
  nearer every query-like text), which a user's catalog does not have.
* ``metatool`` (``--all-metatool``): every query (the seen tools' queries included: flattering
  for ``new``).
* every other dataset directory given with ``--dataset`` (LiveMCPBench tools and servers,
  NESTFUL glaive/sgd/exec: ``shortlist eval prepare``), none of which the model trained on.

Usage (OMP_NUM_THREADS=1; one run, so the models share the machine's state)::

    OMP_NUM_THREADS=1 python bench/bench_embedder.py --metatool ../shared/data/metatool \\
        --dataset /tmp/evaldata/livemcpbench --dataset /tmp/evaldata/livemcpbench-servers \\
        --dataset /tmp/evaldata/nestful-glaive --dataset /tmp/evaldata/nestful-sgd \\
        --dataset /tmp/evaldata/nestful-exec --json
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


def _embedder(which: str, path: str | None) -> Any:
    from shortlist.embeddings._default import DEFAULT_MODEL_NAME, TOOLS_MODEL_NAME, DefaultEmbedder

    if which == "old":
        return DefaultEmbedder(model=DEFAULT_MODEL_NAME, vector_cache=None)
    if path:
        emb = DefaultEmbedder(model_path=path, model_sha256=None, vector_cache=None)
        emb.model_name = f"bench-new:{path}"
        return emb
    return DefaultEmbedder(model=TOOLS_MODEL_NAME, vector_cache=None)


def _selector(kind: str, embedder: Any) -> Any:
    if kind == "embedding":
        from shortlist.rankers._embedding import EmbeddingRanker

        return EmbeddingRanker(embedder=embedder)
    from shortlist.rankers._hybrid import HybridRanker

    return HybridRanker(embedder=embedder)


def _metrics(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "ndcg@10": summary.get("ndcg@10"),
        "recall@5": summary.get("recall@5"),
        "queries": summary.get("queries"),
    }


def main(argv: list[str] | None = None) -> int:
    from shortlist.eval._datasets import load_dataset
    from shortlist.eval._runner import run_eval

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--metatool", type=Path, required=True)
    p.add_argument("--dataset", type=Path, action="append", default=[])
    p.add_argument("--new-model", help="an int8 ONNX file (default: the packaged minilm-tools-int8)")
    p.add_argument("--selectors", default="embedding,hybrid")
    p.add_argument("--models", default="old,new")
    p.add_argument("--all-metatool", action="store_true", help="also every MetaTool query (seen tools included)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    held = set(json.loads(HELDOUT.read_text())["tools"])
    results: dict[str, dict[str, Any]] = {}
    metatool = load_dataset(args.metatool)
    heldout = replace(metatool, queries=tuple(q for q in metatool.queries if q.gold and set(q.gold) <= held))
    unseen_catalog = replace(heldout, tools=tuple(t for t in metatool.tools if t.id in held))
    sets: list[tuple[str, Any]] = [("metatool-heldout", heldout), ("metatool-heldout-catalog", unseen_catalog)]
    if args.all_metatool:
        sets.append(("metatool", metatool))
    sets += [(d.name, load_dataset(d)) for d in args.dataset]
    for model in args.models.split(","):
        emb = _embedder(model, args.new_model)
        for kind in args.selectors.split(","):
            for name, ds in sets:
                misses: list[str] = []  # the top-1 of each query whose top-1 is wrong

                def miss(o: Any, misses: list[str] = misses) -> None:
                    if o.ranked and o.ranked[0] not in o.gold:
                        misses.append(o.ranked[0])

                rep = run_eval(_selector(kind, emb), ds, progress=False, on_query=miss)
                row = _metrics(rep)
                if name == "metatool-heldout":
                    # how many of the wrong top-1s are tools the fine-tune trained on (their pull)
                    row["wrong_top1"] = len(misses)
                    row["wrong_top1_trained_tool"] = sum(t not in held for t in misses)
                results.setdefault(name, {})[f"{kind}/{model}"] = row
                print(f"{name} {kind}/{model}: {results[name][f'{kind}/{model}']}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name, row in results.items():
            print(name)
            for key, m in row.items():
                print(f"  {key:20s} nDCG@10 {m['ndcg@10']}  R@5 {m['recall@5']}  ({m['queries']} q)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
