"""``shortlist eval``'s arguments turned into the evaluation's inputs: selector options, the embedder,
number lists, the ``--add-tools`` catalogs, and whether conversation-only flags were given.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from shortlist.cli._eval_progress import log

__all__ = ["added_sources", "costed", "grow", "int_list", "parse_options", "simulated", "with_embedder"]


def parse_options(pairs: list[str]) -> dict[str, Any]:
    from shortlist.errors import ConfigError

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


_TAKES_EMBEDDER = ("embedding", "hybrid")


def with_embedder(name: str, options: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``options`` plus ``--embedder``'s model and ``--query-precision`` for the selectors that embed (the others
    ignore them)."""
    precision = getattr(args, "query_precision", None) or "float32"
    if (not args.embedder and precision == "float32") or name not in _TAKES_EMBEDDER:
        return options
    from shortlist.embeddings._default import DefaultEmbedder

    return {**options, "embedder": DefaultEmbedder(model=args.embedder, query_precision=precision)}


def int_list(raw: str, flag: str) -> list[int]:
    from shortlist.errors import ConfigError

    try:
        out = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated whole numbers, got {raw!r}") from None
    if not out:
        raise ConfigError(f"{flag} needs at least one value")
    return out


def added_sources(args: argparse.Namespace) -> list[tuple[str, Any, int | None, str]]:
    """The ``--add-tools`` catalogs, read (``(label, tools, N, default suite)`` each)."""
    from shortlist.eval._catalogs import load_added_tools, parse_add_tools

    out: list[tuple[str, Any, int | None, str]] = []
    for raw in args.add_tools:
        spec = parse_add_tools(raw)
        out.append((str(spec.path), load_added_tools(spec), spec.count, spec.suite))
    return out


def grow(base: Any, sources: list[tuple[str, Any, int | None, str]], seed: int) -> tuple[Any, Any]:
    from shortlist.eval._catalogs import grow_catalog

    tools, added = grow_catalog(base, sources, seed=seed)
    for a in added:
        if a.requested is not None and a.requested > a.added:
            log(f"--add-tools {a.source}:{a.requested}: only {a.added:,} tools with new names; added them all")
        log(f"--add-tools {a.source}: {a.added:,} tools added ({a.skipped:,} skipped: name already taken)")
    return tools, added


def simulated(args: argparse.Namespace) -> bool:
    """Whether a flag of the simulated model differs from its default."""
    return (args.search_query, args.miss_rate, args.spurious_rate, args.miss_cost) != ("message", 0.0, 0.0, "call")


def costed(args: argparse.Namespace) -> bool:
    """Whether a flag of the conversation cost model differs from its default."""
    given = (args.prices, args.cache_write, args.cache_read, args.history_budget, args.low_water)
    sizes = (args.grounding_tokens, args.memory_tokens, args.placement)
    return any(v is not None for v in given) or sizes != (0, 0, "history")
