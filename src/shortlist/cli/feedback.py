"""``shortlist feedback add|import|stats``: record which tools a turn used, import, inspect."""

from __future__ import annotations

import argparse
from typing import Any

from shortlist.cli._output import write_json, write_text

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``feedback`` subcommand and its actions."""
    p: argparse.ArgumentParser = sub.add_parser(
        "feedback",
        help="record and inspect usage feedback (the queries where each tool was used)",
        description="The feedback log (SQLite) turns past turns into example queries of the tools "
        "the model called; rankers index them with the description.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    p.set_defaults(func=lambda _args: _missing_action(p))

    add = actions.add_parser("add", help="record one turn")
    add.add_argument("--db", required=True, help="the feedback database (SQLite file)")
    add.add_argument("--query", required=True, help="the user's message")
    add.add_argument("--used", action="append", default=[], metavar="ID", help="an id the model called (repeatable)")
    add.add_argument(
        "--selected", action="append", default=[], metavar="ID", help="an id the selection surfaced (repeatable)"
    )
    add.add_argument("--kind", default="tool", help="tool, skill, ... (default tool)")
    add.add_argument("--json", action="store_true", help="print one JSON object")
    add.set_defaults(func=_add)

    imp = actions.add_parser("import", help="import a queries.jsonl file (text + gold) as used turns")
    imp.add_argument("file", metavar="FILE.jsonl")
    imp.add_argument("--db", required=True, help="the feedback database (SQLite file)")
    imp.add_argument("--kind", default="tool", help="tool, skill, ... (default tool)")
    imp.add_argument("--json", action="store_true", help="print one JSON object")
    imp.set_defaults(func=_import)

    stats = actions.add_parser("stats", help="counts of the feedback log")
    stats.add_argument("--db", required=True, help="the feedback database (SQLite file)")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(func=_stats)


def _missing_action(p: argparse.ArgumentParser) -> int:
    from shortlist.errors import ConfigError

    raise ConfigError("feedback needs an action: add, import or stats (see shortlist feedback --help)")


def _add(args: argparse.Namespace) -> int:
    from shortlist.errors import ConfigError
    from shortlist.feedback import FeedbackStore

    if not args.used:
        raise ConfigError("feedback add needs at least one --used ID")
    if not args.query.strip():
        raise ConfigError("feedback add needs a non-empty --query")
    with FeedbackStore(args.db) as store:
        turn_id = store.record(args.query, selected=args.selected, used=args.used, kind=args.kind)
    if args.json:
        write_json({"db": args.db, "turn": turn_id, "used": args.used, "selected": args.selected})
    else:
        write_text(f"recorded turn {turn_id} in {args.db}: used {', '.join(args.used)}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from shortlist.feedback import FeedbackStore

    with FeedbackStore(args.db) as store:
        added = store.import_jsonl(args.file, kind=args.kind)
        total = store.stats()["turns"]
    if args.json:
        write_json({"db": args.db, "added": added, "turns": total})
    else:
        write_text(f"imported {added} turns from {args.file} into {args.db} ({total} turns in all)")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from pathlib import Path

    from shortlist.errors import CatalogError
    from shortlist.feedback import FeedbackStore

    if not Path(args.db).is_file():
        raise CatalogError(f"{args.db}: no such feedback database")
    with FeedbackStore(args.db) as store:
        stats = store.stats()
    if args.json:
        write_json(stats)
        return 0
    lines = [
        f"{stats['path']}: {stats['turns']} turns, {stats['uses']} uses of {stats['candidates']} candidates",
        "kinds: " + (", ".join(f"{k} {n}" for k, n in stats["kinds"].items()) or "-"),
    ]
    if stats["top"]:
        lines.append("most used: " + ", ".join(f"{t['id']} ({t['uses']})" for t in stats["top"]))
    write_text("\n".join(lines))
    return 0
