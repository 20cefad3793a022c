"""A rough large catalog for the scale levers: several catalogs merged, each tool tagged with a suite.

Writes, under ``--out`` (keep it in ``.cache/``; never commit it):

* ``<out>/large-conv``: every tool of every ``--catalog NAME=DIR`` in one ``tools.jsonl`` and the
  ``conversations.jsonl`` of ``--conversations DIR`` (a conversation dataset, to replay with
  ``shortlist eval``);
* ``<out>/large-NAME``: the same tools with the queries of each catalog that has a
  ``queries.jsonl`` (gold ids renamed like the tools; ``--unseen NAME`` keeps only the queries
  whose gold tools are all held out of the embedder's fine-tune).

Each tool's ``metadata`` becomes ``{"suite": S, "source": NAME}``, S being its own ``suite`` or
``server`` when it has one, else NAME (so a catalog without servers is one suite: a stronger hint
than a real catalog gives). A tool whose id is already taken gets ``~NAME`` appended.

Usage::

    python bench/merge_catalogs.py --out .cache/eval --conversations "$EVAL_DATA/bfcl-conversations-dev" \\
        --catalog bfcl="$EVAL_DATA/bfcl-conversations-dev" --catalog metatool="$EVAL_DATA/metatool" \\
        --catalog livemcpbench=.cache/eval/livemcpbench --catalog nestful-glaive=.cache/eval/nestful-glaive \\
        --catalog nestful-sgd=.cache/eval/nestful-sgd --catalog nestful-exec=.cache/eval/nestful-exec \\
        --unseen metatool
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "scripts" / "train_embedder_heldout.json"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--catalog", action="append", default=[], required=True, help="NAME=DIR (with tools.jsonl)")
    p.add_argument("--conversations", type=Path, help="a folder with conversations.jsonl")
    p.add_argument("--unseen", action="append", default=[], help="NAME: keep only its held-out-tool queries")
    args = p.parse_args(argv)

    sources: list[tuple[str, Path]] = []
    for spec in args.catalog:
        name, sep, directory = spec.partition("=")
        if not sep or not name or not (Path(directory) / "tools.jsonl").is_file():
            raise SystemExit(f"--catalog wants NAME=DIR with a tools.jsonl, got {spec!r}")
        sources.append((name, Path(directory)))
    tools: list[dict[str, Any]] = []
    renamed: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for name, directory in sources:
        for tool in _lines(directory / "tools.jsonl"):
            meta = tool.get("metadata") or {}
            suite = meta.get("suite") or meta.get("server") or name
            tid = tool["id"] if tool["id"] not in taken else f"{tool['id']}~{name}"
            taken.add(tid)
            renamed[(name, tool["id"])] = tid
            tools.append({**tool, "id": tid, "metadata": {"suite": suite, "source": name}})

    def write(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "tools.jsonl").open("w", encoding="utf-8") as f:
            for tool in tools:
                f.write(json.dumps(tool) + "\n")

    if args.conversations:
        write(args.out / "large-conv")
        shutil.copy(args.conversations / "conversations.jsonl", args.out / "large-conv" / "conversations.jsonl")
    held = set(json.loads(HELDOUT.read_text())["tools"])
    for name, directory in sources:
        queries_file = directory / "queries.jsonl"
        if not queries_file.is_file():
            continue
        folder = args.out / f"large-{name}"
        write(folder)
        with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
            for q in _lines(queries_file):
                if name in args.unseen and not (q["gold"] and set(q["gold"]) <= held):
                    continue
                f.write(json.dumps({**q, "gold": [renamed[(name, g)] for g in q["gold"]]}) + "\n")
    print(f"{len(tools)} tools, {sum(1 for k, v in renamed.items() if k[1] != v)} renamed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
