"""Exact-name fast path: a query that names a tool must rank it first, on every catalog given.

For every tool of every catalog (``--dataset DIR``, any folder with a ``tools.jsonl``), a
query names it (``shortlist.rankers._scale.naming_queries``: snake_case, camelCase, spaced,
Title-Kebab, dotted or as written, in one of a few sentences; ``--every-spelling`` for all of
them) and the hybrid (``name_match`` on, or the options of ``--options``) ranks the whole
catalog. Reports per catalog: queries, how many put the named tool first, and how many of the
others are *ambiguous* (another tool of the catalog has the same name words, so no spelling can
tell them apart; those count as first when the named tool is among the equally named ones at
the top). Exit code 1 when any unambiguous query misses.

Usage (OMP_NUM_THREADS=1)::

    OMP_NUM_THREADS=1 python bench/bench_named.py --dataset "$EVAL_DATA/metatool" \\
        --dataset "$EVAL_DATA/bfcl-conversations-dev" --dataset .cache/eval/livemcpbench \\
        --dataset .cache/eval/nestful-glaive --dataset .cache/eval/nestful-sgd \\
        --dataset .cache/eval/nestful-exec --json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    from shortlist._types import Query
    from shortlist.embeddings._default import TOOLS_MODEL_NAME, DefaultEmbedder
    from shortlist.eval._datasets import load_tools
    from shortlist.rankers._hybrid import HybridRanker
    from shortlist.rankers._scale import name_words, naming_queries

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", type=Path, action="append", default=[], required=True)
    p.add_argument("--options", default='{"name_match": true}', help="hybrid options as JSON")
    p.add_argument("--every-spelling", action="store_true")
    p.add_argument("--misses", type=int, default=5, help="misses listed per catalog")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    ranker = HybridRanker(embedder=DefaultEmbedder(model=TOOLS_MODEL_NAME), **json.loads(args.options))
    report: dict[str, Any] = {}
    failed = False
    for directory in args.dataset:
        tools = load_tools(directory / "tools.jsonl")
        words = {t.id: name_words(t.name) for t in tools}
        twins = Counter(words.values())
        first = ambiguous = 0
        misses: list[dict[str, Any]] = []
        pairs = naming_queries(tools, every_spelling=args.every_spelling)
        for text, tid in pairs:
            ranked = ranker.select(Query(text, k=10), tools).selected
            same = twins[words[tid]] > 1
            ambiguous += same
            top = ranked[0] if ranked else None
            ok = top == tid or (same and top is not None and words[top] == words[tid] and tid in ranked)
            first += ok
            if not ok and len(misses) < args.misses:
                misses.append({"query": text, "tool": tid, "ranked": list(ranked[:3])})
        failed |= first < len(pairs)
        report[directory.name] = {
            "queries": len(pairs),
            "first": first,
            "share": round(first / len(pairs), 4) if pairs else None,
            "ambiguous": ambiguous,
            "misses": misses,
        }
        print(f"{directory.name}: {first}/{len(pairs)} first ({ambiguous} ambiguous)", file=sys.stderr, flush=True)
    total = sum(r["queries"] for r in report.values())
    ranked_first = sum(r["first"] for r in report.values())
    summary = {"catalogs": report, "queries": total, "first": ranked_first, "share": ranked_first / max(total, 1)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for name, r in report.items():
            print(f"{name:28s} {r['first']:5d} / {r['queries']:5d} first ({r['ambiguous']} ambiguous)")
            for m in r["misses"]:
                print(f"    {m['query']!r} -> {m['ranked']} (wanted {m['tool']})")
        print(f"{'all':28s} {ranked_first:5d} / {total:5d} ({summary['share']:.2%})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
