"""``shortlist catalog enrich|show``: have the host's model write example requests per tool; inspect them."""

from __future__ import annotations

import argparse
from typing import Any

from shortlist.cli._output import write_json, write_text
from shortlist.cli._progress import add_progress_flag, progress_line

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``catalog`` subcommand and its actions."""
    p: argparse.ArgumentParser = sub.add_parser(
        "catalog",
        help="enrich a tool catalog with example requests written by your model",
        description="Ask the host's model (an OpenAI-compatible endpoint or a Python callable) for short, "
        "varied user requests per tool, once per tool definition and model, and record them in a feedback "
        "log as the tools' usage examples (read by select/serve --examples and selection.examples).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    p.set_defaults(func=lambda _args: _missing_action())

    e = actions.add_parser("enrich", help="generate example requests for the tools that have none yet")
    e.add_argument("--catalog", required=True, help="the tools (JSON/YAML list, OpenAI/Anthropic/MCP format)")
    e.add_argument("--db", help="the feedback log to write (default: the config's selection.examples)")
    e.add_argument("--config", help="a runtime.yaml whose spec.enrichment names the model")
    e.add_argument("--base-url", help="the model's OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    e.add_argument("--model", help="the model name sent to the endpoint")
    e.add_argument("--api-key-env", help="the variable holding the endpoint's key (default OPENAI_API_KEY)")
    e.add_argument("--callable", metavar="MODULE:ATTR", help="a Python model instead: prompt -> str, or a ChatModel")
    e.add_argument("--examples", type=int, help="requests per tool (default 10; at least 2)")
    e.add_argument("--concurrency", type=int, help="requests in flight (default 4)")
    e.add_argument("--tools-per-request", type=int, help="tools per request (default 1: each tool alone)")
    e.add_argument("--retries", type=int, help="attempts after a failure (default 3)")
    e.add_argument("--timeout", type=float, help="seconds per request (default 60)")
    e.add_argument("--force", action="store_true", help="ask again even for tools already enriched")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress_flag(e)
    e.set_defaults(func=_enrich)

    s = actions.add_parser("show", help="what enrichment stored in a feedback log")
    s.add_argument("--db", required=True, help="the feedback log")
    s.add_argument("--tool", action="append", default=[], metavar="ID", help="list this tool's requests")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_show)


def _missing_action() -> int:
    from shortlist.errors import ConfigError

    raise ConfigError("catalog needs an action: enrich or show (see shortlist catalog --help)")


def _enrich(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from shortlist.adapters._catalog import load_catalog
    from shortlist.enrichment import CatalogEnricher, EnrichmentStore
    from shortlist.enrichment._config import enrichment_settings
    from shortlist.enrichment._enricher import EnrichmentReport
    from shortlist.errors import ConfigError

    settings = enrichment_settings(
        config=args.config,
        db=args.db,
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        callable_path=args.callable,
        examples=args.examples,
        concurrency=args.concurrency,
        tools_per_request=args.tools_per_request,
        retries=args.retries,
        timeout_s=args.timeout,
    )
    catalog = load_catalog(args.catalog)
    if not catalog:
        raise ConfigError(f"{args.catalog}: the catalog has no tools")
    Path(settings.db).parent.mkdir(parents=True, exist_ok=True)
    model = settings.build_model()

    async def run(store: EnrichmentStore) -> EnrichmentReport:
        # One event loop for the requests and the client's close: an HTTP model's pooled
        # keep-alive connections belong to the loop that opened them, and closing them from a
        # second asyncio.run() raised "Event loop is closed" after the examples were saved.
        try:
            enricher = CatalogEnricher(model, store=store, **settings.enricher_options())
            return await enricher.aenrich(catalog, force=args.force)
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    with EnrichmentStore(settings.db) as store, progress_line(args):
        report = asyncio.run(run(store))
    out = report.to_dict()
    out["db"] = settings.db
    if args.json:
        write_json(out)
    else:
        tokens = out["tokens"]
        lines = [
            f"{report.tools} tools: {report.generated} enriched, {report.cached} already were, {report.failed} failed "
            f"({report.examples} requests written to {settings.db}"
            + (f"; {report.dropped} dropped as not requests for their tool" if report.dropped else "")
            + ")",
            f"model {report.model}: {report.requests} requests, {report.retries} retries, "
            f"{tokens['prompt']} prompt + {tokens['completion']} completion tokens"
            + (" (estimated: chars / 4)" if tokens["estimated"] else ""),
        ]
        lines += [f"failed: {tool}: {why}" for tool, why in report.failures.items()]
        write_text("\n".join(lines))
    return 1 if report.failed else 0


def _show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from shortlist.enrichment import EnrichmentStore
    from shortlist.errors import CatalogError

    if not Path(args.db).is_file():
        raise CatalogError(f"{args.db}: no such feedback log")
    with EnrichmentStore(args.db) as store:
        stats = store.stats()
        sets = store.sets(args.tool or None) if args.tool else []
    if args.json:
        write_json(
            {
                **stats,
                "db": args.db,
                "generated": [
                    {"tool": s.tool_id, "model": s.model, "content_hash": s.content_hash, "requests": list(s.requests)}
                    for s in sets
                ],
            }
        )
        return 0
    lines = [
        f"{args.db}: {stats['tools']} tools enriched ({stats['sets']} sets, {stats['requests']} requests, "
        f"{stats['prompt_tokens']} prompt + {stats['completion_tokens']} completion tokens)"
    ]
    for s in sets:
        lines.append(f"{s.tool_id} ({s.model}):")
        lines += [f"  - {r}" for r in s.requests]
    write_text("\n".join(lines))
    return 0
