"""``shortlist eval`` on a conversation dataset: the cost model and simulated model from the flags,
the selector bound once, and the replay under each offer policy (:mod:`shortlist.eval._conversations`).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from shortlist.cli._eval_inputs import grow, int_list, with_embedder
from shortlist.cli._eval_output import conversation_table, write_report
from shortlist.cli._eval_progress import Progress, progress_listening
from shortlist.cli._offer import size_limits_of
from shortlist.cli._output import write_json, write_text

__all__ = ["run_conversations"]


def run_conversations(
    args: argparse.Namespace,
    names: list[str],
    options: dict[str, Any],
    progress: Progress,
    sources: list[tuple[str, Any, int | None, str]],
) -> int:
    import dataclasses
    import math

    from shortlist.errors import ConfigError
    from shortlist.eval._conversations import CostModel, Simulation, run_conversation_eval
    from shortlist.eval._datasets import load_tools
    from shortlist.offer import OfferPolicy, Prices, ToolSession
    from shortlist.offer._policies import DEFAULT_POLICY, DEFAULT_PREFETCH, DEFAULT_PREFETCH_COLD, DEFAULT_PREFETCH_MAX
    from shortlist.rankers._registry import create_builtin_selector
    from shortlist.selection._cousage import CoUsage
    from shortlist.selection._facade import Shortlist

    if len(names) > 1:
        raise ConfigError("--compare is for tool-retrieval datasets; a conversation dataset takes one --selector")
    if args.train or args.curve or args.misses:
        raise ConfigError("--train, --curve and --misses are for tool-retrieval datasets (queries.jsonl)")
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    histories = int_list(args.history, "--history")
    for flag, price in (("--cache-write", args.cache_write), ("--cache-read", args.cache_read)):
        if price is not None and (not math.isfinite(price) or price < 0):
            raise ConfigError(f"{flag} must be a finite number >= 0, not {price}")
    for flag, size in (
        ("--system-tokens", args.system_tokens),
        ("--grounding-tokens", args.grounding_tokens),
        ("--memory-tokens", args.memory_tokens),
    ):
        if size < 0:
            raise ConfigError(f"{flag} must be >= 0, not {size}")
    for flag, count in (
        ("--prefetch", args.prefetch),
        ("--prefetch-max", args.prefetch_max),
        ("--prefetch-cold", args.prefetch_cold),
    ):
        if count is not None and count < 0:
            raise ConfigError(f"{flag} must be >= 0, not {count}")
    prefetch_n = DEFAULT_PREFETCH if args.prefetch is None else args.prefetch
    prefetch_max = DEFAULT_PREFETCH_MAX if args.prefetch_max is None else args.prefetch_max
    prefetch_cold = DEFAULT_PREFETCH_COLD if args.prefetch_cold is None else args.prefetch_cold
    prefetch_tokens, search_tokens = size_limits_of(args)
    if args.history_budget is not None and args.history_budget < 1:
        raise ConfigError(f"--history-budget must be a positive number of tokens, not {args.history_budget}")
    from shortlist.runtime._context import DEFAULT_LOW_WATER

    low_water = DEFAULT_LOW_WATER if args.low_water is None else args.low_water
    if not 0 < low_water <= 1:
        raise ConfigError(f"--low-water must be a share of --history-budget in (0, 1], not {low_water}")
    prices = Prices.preset(args.prices) if args.prices else Prices()
    if args.cache_write is not None or args.cache_read is not None:  # explicit numbers win over the preset's
        prices = dataclasses.replace(
            prices,
            cache_write=prices.cache_write if args.cache_write is None else args.cache_write,
            cache_read=prices.cache_read if args.cache_read is None else args.cache_read,
            name=f"{prices.name}+custom" if prices.name else "",
        )
    model = CostModel(
        prices,
        system_tokens=args.system_tokens,
        grounding_tokens=args.grounding_tokens,
        memory_tokens=args.memory_tokens,
        placement=args.placement,
        history_budget=args.history_budget,
        low_water=low_water,
    )
    simulation = Simulation(args.search_query, args.miss_rate, args.spurious_rate, args.seed, args.miss_cost)
    catalog = load_tools(Path(args.dataset) / "tools.jsonl")
    added: Any = ()
    if sources:
        catalog, added = grow(catalog, sources, args.seed)
    selector = create_builtin_selector(names[0], **with_embedder(names[0], options, args))
    shortlist = Shortlist(catalog, selector=selector)
    with progress, progress_listening(progress):  # the model load and the index, before the replay's bars
        progress.phase(f"eval {names[0]}: loading the selector and indexing {len(shortlist.catalog):,} tools")
        shortlist.for_tools().warm()  # the offer narrows under the tool policy (mcp__ tools ranked)

    def make(policy: OfferPolicy, co_usage: CoUsage | None) -> ToolSession:
        prefetch = prefetch_n if policy == "deferred" else 0
        return ToolSession(
            shortlist,
            policy=policy,
            k=args.k,
            search_k=args.search_k,
            prefetch=prefetch,
            prefetch_max=prefetch_max,
            prefetch_cold=prefetch_cold,
            prefetch_tokens=prefetch_tokens,
            search_tokens=search_tokens,
            co_usage=co_usage,
            prices=prices,  # stable weighs its changes with the prices the replay bills
        )

    replay: Any = contextlib.nullcontext()
    if progress.lines is not None:  # on a terminal the replay draws its own bars
        progress.phase(f"eval {names[0]}")
        replay = progress_listening(progress)
    try:
        with replay:
            report = run_conversation_eval(
                args.dataset,
                make,
                strategies=strategies,
                histories=histories,
                cost_model=model,
                max_searches=args.max_searches,
                default=DEFAULT_POLICY,
                limit=args.limit,
                learn=not args.no_learn,
                learn_examples=args.learn_examples,
                progress=progress.enabled,
                simulation=simulation,
                catalog=catalog,
            )
    finally:
        selector.close()
    report["offer"] = {
        "k": args.k,
        "search_k": args.search_k,
        "prefetch": prefetch_n,
        "prefetch_max": prefetch_max,
        "prefetch_cold": prefetch_cold,
        "prefetch_tokens": prefetch_tokens,
        "search_tokens": search_tokens,
    }
    if added:
        report["added_tools"] = [a.to_json() for a in added]
    if args.query_precision != "float32":  # what the figures were measured with
        report["query_precision"] = args.query_precision
    if args.report:
        write_report(args, conversation=report)
    if args.json:
        write_json(report)
    else:
        write_text(conversation_table(report, histories))
    return 0
