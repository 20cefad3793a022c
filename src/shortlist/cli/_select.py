"""``shortlist select``: narrow a catalog for one query and print what surfaces."""

from __future__ import annotations

import argparse
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shortlist.cli._output import write_json, write_text
from shortlist.cli._progress import add_progress_flag, progress_line

if TYPE_CHECKING:
    from shortlist._types import Candidate

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``select`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "select",
        help="narrow a catalog of tools or skills for a query",
        description="Print the tools/skills that surface for QUERY. Without --catalog, a bundled "
        "example catalog of 38 tools is used.",
    )
    p.add_argument("query", metavar="QUERY", help="the user's message")
    p.add_argument(
        "--catalog",
        help="JSON/JSONL tool definitions (OpenAI, Anthropic, MCP, candidates) or a directory of SKILL.md folders",
    )
    p.add_argument(
        "--kind",
        choices=["tool", "skill"],
        default=None,
        help="query kind (default: tool, or skill for a skills directory)",
    )
    p.add_argument(
        "--k",
        type=int,
        default=5,
        help="most items to surface besides pins (default 5; 0: the selector's own default, 10 for the "
        "built-in rankers, fewer when fewer match)",
    )
    p.add_argument(
        "--selector",
        help="selector name: a built-in type (bm25, embedding, hybrid, ...), "
        "a runtime.yaml entry, or exec:COMMAND (default: the config's binding, else the default)",
    )
    p.add_argument("--config", help="runtime.yaml")
    p.add_argument("--order", choices=["ranking", "source"], help="order of the result")
    p.add_argument("--on-abstain", choices=["all", "pins"], help="what surfaces when nothing fits")
    p.add_argument(
        "--mcp-server",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="also narrow the tools of a live MCP server: NAME=COMMAND (stdio, split like a shell) or "
        "NAME=http(s)://URL (repeatable; MCP tools are ranked, not pinned)",
    )
    p.add_argument(
        "--examples",
        metavar="FEEDBACK_DB",
        help="a feedback log (shortlist feedback --db) whose logged queries are used as the tools' usage "
        "examples (default: the config's selection.examples)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress_flag(p)
    p.set_defaults(func=run)


def _mcp_candidates(values: list[str]) -> list[Candidate]:
    """List the tools of the ``--mcp-server`` servers (started over stdio, stopped on return)."""
    from shortlist.mcp._client import parse_server_arg
    from shortlist.mcp._sync import MCPToolSource

    specs = [parse_server_arg(v) for v in values]
    with MCPToolSource(specs) as source:
        return source.list_candidates()


def run(args: argparse.Namespace) -> int:
    """Run ``shortlist select``."""
    from dataclasses import replace

    from shortlist.adapters._catalog import load_catalog
    from shortlist.adapters._tools import check_unique
    from shortlist.errors import CatalogError
    from shortlist.mcp._tools import mcp_policy
    from shortlist.selection._facade import DEFAULT, Shortlist

    if args.k < 0:
        raise CatalogError("--k must be >= 0")
    start = time.perf_counter()
    if args.catalog:
        catalog = load_catalog(args.catalog)
        default_kind = "skill" if Path(args.catalog).is_dir() else "tool"
    elif args.mcp_server:
        catalog, default_kind = [], "tool"
    else:
        with resources.as_file(resources.files("shortlist.data") / "example_tools.json") as path:
            catalog = load_catalog(path)
        default_kind = "tool"
    if args.mcp_server:
        catalog = [*catalog, *_mcp_candidates(args.mcp_server)]
        check_unique(catalog, source="--catalog and --mcp-server")
    with (
        progress_line(args),
        Shortlist(
            catalog,
            selector=args.selector or DEFAULT,
            config=args.config,
            kind=args.kind or default_kind,
            examples=args.examples,
        ) as sl,
    ):
        if args.mcp_server:  # live MCP tools are narrowed like any tool (the mcp namespace is not pinned)
            sl.policy = mcp_policy(sl.policy)
        if args.order or args.on_abstain:
            sl.policy = replace(
                sl.policy, order=args.order or sl.policy.order, on_abstain=args.on_abstain or sl.policy.on_abstain
            )
        turn = sl.select(args.query, k=args.k)
    elapsed = (time.perf_counter() - start) * 1000
    if args.json:
        out = turn.to_dict()
        out["elapsed_ms"] = round(elapsed, 3)
        out["selector_ms"] = round(turn.elapsed_ms, 3)
        write_json(out)
        return 0
    lines = []
    for c in turn.surfaced:
        score = turn.scores.get(c.id)
        tag = "pinned" if c.id in turn.pinned else (f"{score:.3f}" if score is not None else "")
        lines.append(f"{c.id:<32} {tag:>8}  {c.description[:80]}")
    status = f"fallback: {turn.fallback}" if turn.fallback else f"selector: {turn.selector}"
    lines.append(f"-- {len(turn.surfaced)} of {len(catalog)} surfaced ({status}, {elapsed:.1f} ms)")
    write_text("\n".join(lines))
    return 0
