"""``shortlist feedback add|import|stats|train``: record which tools a turn used, import, inspect, and fit
a per-deployment query adapter from the log."""

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
        description="The feedback log (SQLite, or PostgreSQL for replicas) turns past turns into example "
        "queries of the tools the model called; rankers index them with the description.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    p.set_defaults(func=lambda _args: _missing_action(p))

    add = actions.add_parser("add", help="record one turn")
    add.add_argument("--db", required=True, help="the feedback database (SQLite file, or a postgresql:// URL)")
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
    imp.add_argument("--db", required=True, help="the feedback database (SQLite file, or a postgresql:// URL)")
    imp.add_argument("--kind", default="tool", help="tool, skill, ... (default tool)")
    imp.add_argument("--json", action="store_true", help="print one JSON object")
    imp.set_defaults(func=_import)

    train = actions.add_parser(
        "train",
        help="fit a query adapter for the hybrid ranker from the log (per deployment)",
        description="Fit a linear query-side adapter on the log's (query, used tool) pairs and write it "
        "to --out; the hybrid ranker applies it (option adapter: FILE) to the tools it was trained on only.",
    )
    train.add_argument("--db", required=True, help="the feedback database (SQLite file, or a postgresql:// URL)")
    train.add_argument("--catalog", required=True, help="the tool catalog (OpenAI/Anthropic/MCP list or JSONL)")
    train.add_argument("--out", required=True, help="the adapter file to write (.npz)")
    train.add_argument("--kind", default="tool", help="tool, skill, ... (default tool)")
    train.add_argument("--ridge", type=float, default=1.0, help="pull toward the identity, per pair (default 1.0)")
    train.add_argument("--json", action="store_true", help="print one JSON object")
    train.set_defaults(func=_train)

    stats = actions.add_parser("stats", help="counts of the feedback log")
    stats.add_argument("--db", required=True, help="the feedback database (SQLite file, or a postgresql:// URL)")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(func=_stats)


def _missing_action(p: argparse.ArgumentParser) -> int:
    from shortlist.errors import ConfigError

    raise ConfigError("feedback needs an action: add, import, stats or train (see shortlist feedback --help)")


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
        write_json({"db": _shown(args.db), "turn": turn_id, "used": args.used, "selected": args.selected})
    else:
        write_text(f"recorded turn {turn_id} in {_shown(args.db)}: used {', '.join(args.used)}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from shortlist.feedback import FeedbackStore

    with FeedbackStore(args.db) as store:
        added = store.import_jsonl(args.file, kind=args.kind)
        total = store.stats()["turns"]
    if args.json:
        write_json({"db": _shown(args.db), "added": added, "turns": total})
    else:
        write_text(f"imported {added} turns from {args.file} into {_shown(args.db)} ({total} turns in all)")
    return 0


def _shown(db: str) -> str:
    """The database as messages show it (a URL without its password)."""
    from shortlist.feedback._store import is_postgres_url

    if is_postgres_url(db):
        from shortlist.retrieval._backends.postgres import redact_url

        return redact_url(db)
    return db


def _existing(db: str) -> None:
    """Refuse a feedback file that does not exist (reading it would create an empty one); a
    ``postgresql://`` URL is checked by connecting."""
    from pathlib import Path

    from shortlist.errors import CatalogError
    from shortlist.feedback._store import is_postgres_url

    if not is_postgres_url(db) and not Path(db).is_file():
        raise CatalogError(f"{db}: no such feedback database")


def _stats(args: argparse.Namespace) -> int:
    from shortlist.feedback import FeedbackStore

    _existing(args.db)
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


def _train(args: argparse.Namespace) -> int:
    from shortlist.adapters._catalog import load_catalog
    from shortlist.errors import CatalogError, ConfigError
    from shortlist.feedback import FeedbackStore
    from shortlist.rankers._adapter import train_adapter
    from shortlist.rankers._embedding import EmbeddingRanker
    from shortlist.rankers._hybrid import DEFAULT_QUERY_PREFIX

    _existing(args.db)
    if args.ridge <= 0:
        raise ConfigError("--ridge must be positive")
    catalog = load_catalog(args.catalog)
    with FeedbackStore(args.db) as store:
        examples = store.examples([c.id for c in catalog], kind=args.kind)
    pairs = [(q, cid) for cid, queries in examples.items() for q in queries]
    if not pairs:
        raise CatalogError(f"{_shown(args.db)}: no logged use of any tool of {args.catalog}")
    embedder = EmbeddingRanker().embedder
    adapter = train_adapter(pairs, catalog, embedder, query_prefix=DEFAULT_QUERY_PREFIX, ridge=args.ridge)
    adapter.save(args.out)
    summary = {"out": args.out, "pairs": adapter.pairs, "tools": len(adapter.tools), "model": adapter.model_name}
    if args.json:
        write_json(summary)
    else:
        write_text(
            f"wrote {args.out}: {adapter.pairs} pairs over {len(adapter.tools)} of {len(catalog)} tools "
            f"({adapter.model_name}); use it with the hybrid ranker's option adapter: {args.out}"
        )
    return 0
