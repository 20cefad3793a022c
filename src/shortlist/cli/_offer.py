"""``shortlist offer``: decide one turn's tool offer of a conversation, statelessly.

The CLI face of :mod:`shortlist.offer`, like ``POST /v1/offer``: it reads the
previous turn's offer state (``--state FILE``), decides this turn's offer (or, with
``--search``, runs the model's ``find_tools`` search) and prints the offer with the new state,
which the caller passes back next turn (``--save-state FILE`` writes it).
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path
from typing import Any

from shortlist.cli._output import write_json, write_text

__all__ = ["add_size_limits", "register", "size_limits_of"]

#: ``--prefetch-tokens`` / ``--search-tokens`` not given (``none`` is a value: any size).
_DEFAULT_TOKENS: Any = object()


def register(sub: Any) -> None:
    """Add the ``offer`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "offer",
        help="decide a conversation turn's tool offer (per_turn, stable, deferred)",
        description="Print the tools block, what is prefetched and what stays deferred for this turn of a "
        "conversation, and the offer state to pass back next turn. Without --catalog, the bundled "
        "38-tool example catalog is used.",
    )
    p.add_argument("query", metavar="QUERY", nargs="?", help="the turn's user message (or use --messages)")
    p.add_argument("--messages", help="a JSON file of OpenAI chat messages; the latest user message is ranked")
    p.add_argument("--catalog", help="tool definitions (OpenAI, Anthropic, MCP, candidates)")
    p.add_argument("--selector", help="selector name (default: the config's binding, else the default)")
    p.add_argument("--config", help="runtime.yaml")
    p.add_argument(
        "--format",
        choices=["openai", "anthropic", "openai-responses"],
        default="openai",
        help="the request format the conversation is sent in; it decides the default policy (default openai)",
    )
    p.add_argument(
        "--policy",
        choices=["per_turn", "stable", "deferred"],
        help="the offer policy (default: the format's: deferred; openai calls found tools through call_tool)",
    )
    p.add_argument("--k", type=int, default=5, help="tools ranked per turn (default 5)")
    p.add_argument("--prefetch", type=int, help="deferred: top tools loaded this turn (default 2)")
    p.add_argument(
        "--prefetch-max", type=int, help="deferred: most tools loaded while the ranking's top is flat (default 4)"
    )
    p.add_argument(
        "--prefetch-cold",
        type=int,
        help="deferred: loaded more, and widened further, while no tool was called yet (default 2)",
    )
    add_size_limits(p)
    p.add_argument("--hot", type=int, default=0, help="deferred: first-turn top tools kept in the block")
    p.add_argument("--prefix-tokens", type=int, default=0, help="system prompt + history behind the block")
    p.add_argument("--state", help="the previous turn's offer state (JSON file); absent: the first turn")
    p.add_argument("--save-state", help="write the new offer state to this file")
    p.add_argument("--search", metavar="QUERY", help="run the model's find_tools search instead of a turn")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def add_size_limits(p: Any) -> None:
    """Add ``--prefetch-tokens`` and ``--search-tokens`` to a parser or argument group (``shortlist
    offer``, ``shortlist eval``); read them with :func:`size_limits_of`."""
    p.add_argument(
        "--prefetch-tokens",
        type=_tokens_arg,
        default=_DEFAULT_TOKENS,
        help="deferred: past the first --prefetch tools, only definitions of at most this many tokens are "
        "loaded ('none': any size; default 250)",
    )
    p.add_argument(
        "--search-tokens",
        type=_tokens_arg,
        default=_DEFAULT_TOKENS,
        help="a search's results after the first carry only definitions of at most this many tokens "
        "('none': any size; default 300)",
    )


def size_limits_of(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """``--prefetch-tokens`` and ``--search-tokens``, each the offer's default when not given."""
    from shortlist.offer._policies import DEFAULT_PREFETCH_TOKENS
    from shortlist.offer._search import DEFAULT_SEARCH_TOKENS

    prefetch: int | None = args.prefetch_tokens
    search: int | None = args.search_tokens
    return (
        DEFAULT_PREFETCH_TOKENS if prefetch is _DEFAULT_TOKENS else prefetch,
        DEFAULT_SEARCH_TOKENS if search is _DEFAULT_TOKENS else search,
    )


def _tokens_arg(raw: str) -> int | None:
    """A definition size limit: a whole number of tokens (0 or more), or ``none`` for any size."""
    if raw.strip().lower() == "none":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of tokens or 'none', not {raw!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 or 'none', not {value}")
    return value


def _read_json(path: str, what: str) -> Any:
    from shortlist.errors import CatalogError

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CatalogError(f"{path}: cannot read the {what}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Run ``shortlist offer``."""
    from shortlist.adapters._catalog import load_catalog
    from shortlist.errors import ConfigError
    from shortlist.offer import OfferState, ToolSession
    from shortlist.offer._bridge import offer_json
    from shortlist.offer._policies import DEFAULT_PREFETCH_COLD, DEFAULT_PREFETCH_MAX, default_policy
    from shortlist.selection._facade import DEFAULT, Shortlist

    if (args.query is None) == (args.messages is None) and args.search is None:
        raise ConfigError("offer needs exactly one of QUERY or --messages (or --search QUERY)")
    counts = (args.k, args.hot, args.prefix_tokens, args.prefetch, args.prefetch_max, args.prefetch_cold)
    if any(n is not None and n < 0 for n in counts):
        raise ConfigError("--k, --prefetch, --prefetch-max, --prefetch-cold, --hot and --prefix-tokens must be >= 0")
    if args.catalog:
        catalog = load_catalog(args.catalog)
    else:
        with resources.as_file(resources.files("shortlist.data") / "example_tools.json") as path:
            catalog = load_catalog(path)
    state = OfferState.from_dict(_read_json(args.state, "offer state")) if args.state else OfferState()
    prefetch_tokens, search_tokens = size_limits_of(args)
    with Shortlist(catalog, selector=args.selector or DEFAULT, config=args.config) as sl:
        policy = args.policy or default_policy(args.format)
        session = ToolSession(
            sl,
            policy=policy,
            k=args.k,
            prefetch=args.prefetch,
            prefetch_max=DEFAULT_PREFETCH_MAX if args.prefetch_max is None else args.prefetch_max,
            prefetch_cold=DEFAULT_PREFETCH_COLD if args.prefetch_cold is None else args.prefetch_cold,
            prefetch_tokens=prefetch_tokens,
            search_tokens=search_tokens,
            hot=args.hot,
            state=state,
        )
        if args.search is not None:
            found = session.search(args.search, prefix_tokens=args.prefix_tokens)
            out: dict[str, Any] = {
                "tools": [{"id": c.id, "description": c.description} for c in found],
                "state": session.state.to_dict(),
            }
        else:
            query = args.query if args.messages is None else _read_json(args.messages, "messages")
            if not isinstance(query, str) and (
                not isinstance(query, list) or not all(isinstance(m, dict) for m in query)
            ):
                raise ConfigError(f"{args.messages}: messages must be a JSON list of message objects")
            out = offer_json(session.offer(query, prefix_tokens=args.prefix_tokens), args.format)
    if args.save_state:
        Path(args.save_state).write_text(json.dumps(out["state"]) + "\n", encoding="utf-8")
    if args.json:
        write_json(out)
    elif args.search is not None:
        write_text("\n".join([f"found {t['id']}" for t in out["tools"]] or ["found nothing"]))
    else:
        block = [*out["block"], *(t["name"] for t in out["fixed_tools"])]  # find_tools (and call_tool) too
        lines = [f"block     {' '.join(block) or '-'}"]
        lines.append(f"prefetch  {' '.join(out['prefetched']) or '-'}")
        lines.append(f"loaded    {len(out['loaded'])}, deferred {len(out['deferred'])}")
        lines.append(f"-- {out['policy']}: {out['reason']}{' (block changed)' if out['changed'] else ''}")
        write_text("\n".join(lines))
    return 0
