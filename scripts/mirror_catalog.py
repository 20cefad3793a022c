"""Stress a large catalog with variants: every added tool offered again by other servers.

    python scripts/mirror_catalog.py --catalog .cache/eval/large-dev --copies 2 --out .cache/eval/large-variants

A host that connects several MCP servers sees one tool under several names: the file system and a
desktop server both offer ``read_file``, two builds of one price server offer ``get_asset_price``.
This writes ``OUT/tools.jsonl``: the tools of ``--catalog`` (a dataset directory), then, for each tool
that is not one of ``--keep``'s (default: the tools of ``../shared/data/bfcl-conversations-dev``, whose
calls are the gold and stay one of a kind), ``--copies`` variants named as an MCP host names them,
``mcp__<server>-mirror<N>__<name>``, on the server ``<server>-mirror<N>`` (the tool's server or suite),
with the description lightly edited as a second build would have it: the first copy without its last
sentence (or opening "Use this tool to ..." when it has one sentence), the second with
" (community edition)" appended. ``OUT/conversations.jsonl`` (or ``queries.jsonl``) is copied. The
output is the same on every run. Then: ``shortlist eval --dataset OUT``. Measured in
``docs/evaluation.md``, "Variants of one tool on two servers".
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SERVER_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def variant_description(description: str, copy: int) -> str:
    """The ``copy``-th variant's description (1: the last sentence dropped; 2 and later: a suffix)."""
    text = description.strip()
    if copy == 1:
        sentences = _SENTENCE_END.split(text)
        if len(sentences) > 1:
            return " ".join(sentences[:-1])
        return "Use this tool to " + text[:1].lower() + text[1:]
    return f"{text} (community edition)"


def mirrored(tool: dict[str, Any], copy: int) -> dict[str, Any]:
    """``tool`` as the ``copy``-th mirror server offers it."""
    meta = tool.get("metadata") or {}
    server = str(meta.get("server") or meta.get("suite") or "tools")
    mirror = f"{_SERVER_CHARS.sub('_', server)}-mirror{copy}"
    name = f"mcp__{mirror}__{tool['name']}"
    out = {**tool, "id": name, "name": name, "description": variant_description(tool.get("description") or "", copy)}
    out["metadata"] = {"server": mirror}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--catalog", required=True, type=Path, help="a dataset directory (tools.jsonl and its queries)")
    p.add_argument(
        "--keep",
        type=Path,
        default=ROOT.parent / "shared/data/bfcl-conversations-dev/tools.jsonl",
        help="a tools.jsonl whose tools are not mirrored (default: the BFCL dev conversations' 128)",
    )
    p.add_argument("--copies", type=int, default=2, help="variants per added tool (default 2)")
    p.add_argument("--out", required=True, type=Path, help="the output directory")
    args = p.parse_args(argv)
    if args.copies < 1:
        p.error("--copies must be >= 1")
    try:
        tools = [json.loads(line) for line in (args.catalog / "tools.jsonl").read_text().splitlines() if line.strip()]
        keep = {json.loads(line)["id"] for line in args.keep.read_text().splitlines() if line.strip()}
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"mirror_catalog: {exc}\n")
        return 2
    extra = [mirrored(t, n) for t in tools if t["id"] not in keep for n in range(1, args.copies + 1)]
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "tools.jsonl").open("w") as f:
        for tool in [*tools, *extra]:
            f.write(json.dumps(tool) + "\n")
    for name in ("conversations.jsonl", "queries.jsonl"):
        if (args.catalog / name).is_file():
            shutil.copy(args.catalog / name, args.out / name)
    sys.stderr.write(f"mirror_catalog: {len(tools):,} tools and {len(extra):,} variants -> {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
