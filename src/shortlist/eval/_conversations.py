"""Selection across a conversation, replayed: quality, tools-block churn and what the prompts cost.

A conversation dataset is ``tools.jsonl`` (the catalog) plus ``conversations.jsonl``: one
conversation a line, ``{"cid", "turns": [{"user", "calls": [{"name", "arguments"}]}]}``. A
turn's gold tools are the distinct names of its calls. Each conversation is replayed turn by
turn for every strategy (``all``, ``per_turn``, ``stable``, ``deferred``) through the public
:class:`~shortlist.offer.ToolSession`, with the history rebuilt as a model would
have seen it: the user message, an assistant message carrying the turn's calls, one short
tool result per call. ``oracle`` is the floor: each turn's tools enter the history on first
use (an exchange carrying their definitions, as ``deferred`` loads them), the tools block is
empty and nothing is searched; it is complete by construction and every strategy's cost is
also reported as a multiple of its (``cost_vs_oracle``). ``bridge`` is the fixed surface for
providers without deferred loading (chat completions): the ``deferred`` decisions (the same
session, prefetch and searches, the found definitions in the history), with ``call_tool`` in the
tools block beside ``find_tools`` and every call of the turn made through it
(``call_tool(name, arguments)``), so it is priced with the bridge's definition and wrapper.

**The cost model** (``docs/evaluation.md`` has the long form). One model call's prompt is, in
order: the tools block (the definitions offered in the request's tools array, plus the
search tool's definition when offered), a system prompt of ``system_tokens``, a prior history
of ``H`` tokens (the ``--history`` sizes), then the conversation's messages so far. The
provider caches by prefix with a breakpoint after the last message, so a call reads from the
cache everything the previous call of the conversation sent — *if its tools block is
byte-identical* — and writes the rest; a changed tools block re-writes the whole prompt. The
first call of a conversation writes everything. A call costs ``read x cached + write x
uncached`` (Anthropic's 1.25x / 0.1x by default), in base-price input-token equivalents.
Every strategy makes one model call per turn (the call that emits the turn's tool calls);
``stable`` and ``deferred`` add one call per search. The simulated model searches only when a
gold tool of the turn is not available, at most ``max_searches`` times a turn, with the user's
message as its query (a stand-in for the query a model would write; :class:`Simulation` makes
the model less obliging: shorter queries, unnoticed misses, spurious searches, and what an
incomplete turn costs); the search call and its
result join the history: under ``deferred`` the result carries the found definitions (as the
providers' ``tool_reference`` expansion does), under ``stable`` the found tools join the tools
block of the next call instead. Tokens are counted with the offline tiktoken ``o200k_base``
counter (else ``len/4``, named in the report).

**The rest of the prompt** (off by default, so the figures above do not move):
``grounding_tokens`` / ``memory_tokens`` of context enter every turn where ``placement`` puts
them, as the runtime's ``grounding_placement`` does: ``history`` appends them to the history
with the turn (read from the cache by every later call), ``system`` renders them into the
system prompt, which then changes every turn (the relevant documents differ from turn to turn)
and re-writes everything behind the tools block on the turn's first call. ``history_budget``
reduces the history (prior history included) to ``low_water`` x the budget whenever a turn
starts over it, as :class:`~shortlist.runtime._context.HistoryWindow` does: the call after a
reduction reads only the tools block and the system prompt from the cache. The prices'
``min_prefix`` (the provider's minimum cacheable prefix, :data:`~shortlist.offer.PRICE_PRESETS`)
bills a prompt below it at the base price and never reads a cached prefix below it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from shortlist._events import Event
from shortlist._progress import report as progress_report
from shortlist._tokens import default_counter, definition_text
from shortlist._types import Candidate
from shortlist.errors import ConfigError
from shortlist.eval._conversation_cases import (
    ConversationCase,
    ConversationTurn,
    is_conversation_dataset,
    load_conversations,
)
from shortlist.eval._conversation_models import MISS_COSTS, SEARCH_QUERIES, CostModel, Simulation
from shortlist.eval._conversation_models import name_words as name_words  # re-exported: its old home
from shortlist.eval._datasets import load_tools
from shortlist.eval._intervals import DRAWS, LEVEL, intervals_of, resamples
from shortlist.eval._loads import LoadTally
from shortlist.feedback._store import FeedbackStore, apply_examples
from shortlist.offer import OfferPolicy, ToolSession
from shortlist.offer._bridge import CALL_TOOL_DEFINITION, CALL_TOOL_NAME
from shortlist.offer._policies import PREFETCH_QUERY
from shortlist.offer._search import SEARCH_TOOL_DEFINITION, SEARCH_TOOL_NAME, ToolSearched
from shortlist.selection._cousage import CoUsage

__all__ = [
    "MISS_COSTS",
    "SEARCH_QUERIES",
    "STRATEGIES",
    "ConversationCase",
    "ConversationTurn",
    "CostModel",
    "Simulation",
    "is_conversation_dataset",
    "load_conversations",
    "run_conversation_eval",
]

#: Every strategy the replay compares, in report order (``oracle`` is the floor: see the module docs).
STRATEGIES: tuple[str, ...] = ("all", "per_turn", "stable", "deferred", "bridge", "oracle")


@dataclass
class _Meter:
    """Bills the calls of one conversation.

    ``system_version`` and ``history_version`` change when the system prompt changes (a turn's
    context rendered into it) and when the history is reduced: a call then reads from the cache
    only the parts before the change.
    """

    model: CostModel
    history_tokens: int
    cost: float = 0.0
    calls: int = 0
    reductions: int = 0
    system_version: int = 0
    history_version: int = 0
    _prev_block: tuple[str, ...] | None = None
    _prev_prompt: int = 0
    _prev_versions: tuple[int, int] = (0, 0)

    @property
    def system_tokens(self) -> int:
        """The system prompt's size, with the turn's context when it is placed there."""
        if self.model.placement == "system":
            return self.model.system_tokens + self.model.context_tokens
        return self.model.system_tokens

    def start_turn(self) -> None:
        """The turn's context enters where it is placed; a history over its budget is reduced."""
        model = self.model
        if model.context_tokens:
            if model.placement == "history":
                self.history_tokens += model.context_tokens
            else:
                self.system_version += 1  # other documents, another system prompt
        if model.history_budget is not None and self.history_tokens > model.history_budget:
            self.history_tokens = max(1, int(model.history_budget * model.low_water))
            self.history_version += 1
            self.reductions += 1

    def call(self, block: tuple[str, ...], block_tokens: int) -> None:
        system = self.system_tokens
        prompt = block_tokens + system + self.history_tokens
        if block != self._prev_block:
            cached = 0
        elif self.system_version != self._prev_versions[0]:
            cached = block_tokens  # the tools block survives; the system prompt and all after it do not
        elif self.history_version != self._prev_versions[1]:
            cached = block_tokens + system
        else:
            cached = self._prev_prompt
        self.cost += self.model.prices.call(prompt, cached)
        self.calls += 1
        self._prev_block, self._prev_prompt = block, prompt
        self._prev_versions = (self.system_version, self.history_version)


@dataclass
class _Totals:
    turns: int = 0
    recall: float = 0.0
    complete: int = 0
    tools: int = 0
    tool_tokens: int = 0
    calls: int = 0
    changes: int = 0
    searches: int = 0
    cost: float = 0.0
    preloaded: float = 0.0
    reductions: int = 0
    loads: LoadTally = field(default_factory=LoadTally)
    #: each conversation's cost and complete turns, in replay order (for the intervals and ``eval diff``)
    case_costs: list[float] = field(default_factory=list)
    case_complete: list[int] = field(default_factory=list)


class _Replay:
    """Replays one strategy over the dataset at one prior-history size."""

    def __init__(
        self,
        strategy: str,
        catalog: Sequence[Candidate],
        make_session: Callable[[OfferPolicy, CoUsage | None], ToolSession],
        *,
        cost_model: CostModel,
        count: Callable[[str], int],
        max_searches: int,
        simulation: Simulation | None = None,
    ) -> None:
        self.strategy = strategy
        self.catalog = tuple(catalog)
        self.by_id = {c.id: c for c in self.catalog}
        self.make_session = make_session
        self.cost_model = cost_model
        self.count = count
        self.max_searches = max_searches
        self.sim = simulation or Simulation()
        self._def_tokens = {c.id: count(definition_text(c)) for c in self.catalog}
        self._search_tokens = count(json.dumps(SEARCH_TOOL_DEFINITION, sort_keys=True))
        if strategy == "bridge":  # call_tool is offered with find_tools
            self._search_tokens += count(json.dumps(CALL_TOOL_DEFINITION, sort_keys=True))

    def block_tokens(self, ids: Sequence[str], search_tool: bool) -> int:
        return sum(self._def_tokens.get(i, 0) for i in ids) + (self._search_tokens if search_tool else 0)

    def message_tokens(self, message: Mapping[str, Any]) -> int:
        return self.count(json.dumps(message, ensure_ascii=False, default=str))

    def exchange_tokens(self, query: str, content: list[str]) -> int:
        """A ``find_tools`` call with ``query`` and its result carrying ``content``."""
        ask = {"role": "assistant", "tool_calls": [{"name": SEARCH_TOOL_NAME, "arguments": {"query": query}}]}
        return self.message_tokens(ask) + self.message_tokens({"role": "tool", "content": content})

    def loading_tokens(self, ids: Sequence[str]) -> int:
        """The exchange that loads ``ids``' definitions into the history (prefetch, oracle, retry)."""
        return self.exchange_tokens(PREFETCH_QUERY, [definition_text(self.by_id[i]) for i in ids])

    def conversation(
        self,
        case: ConversationCase,
        prior: int,
        totals: _Totals,
        co_usage: CoUsage | None,
        feedback: FeedbackStore | None = None,
    ) -> None:
        meter = _Meter(self.cost_model, prior)
        complete_before = totals.complete
        all_ids = tuple(c.id for c in self.catalog)
        oracle = self.strategy == "oracle"
        policy = "deferred" if self.strategy == "bridge" else self.strategy  # the bridge's decisions are deferred's
        session = None if self.strategy in ("all", "oracle") else self.make_session(policy, co_usage)  # type: ignore[arg-type]
        oracle_loaded: list[str] = []  # what the oracle loaded so far, in order
        # the catalog with the usage examples the feedback log holds so far (the conversations before this one)
        candidates = None
        if feedback is not None and session is not None:
            candidates = tuple(apply_examples(self.catalog, feedback))
        messages: list[dict[str, Any]] = []
        for index, turn in enumerate(case.turns):
            user = {"role": "user", "content": turn.user}
            messages.append(user)
            meter.history_tokens += self.message_tokens(user)
            meter.start_turn()
            prefix = meter.system_tokens + meter.history_tokens
            if oracle:  # the turn's tools enter the history on first use; nothing else, no search tool
                block: tuple[str, ...] = ()
                search_tool = False
                new = [i for i in turn.tools if i not in oracle_loaded]
                if new:
                    meter.history_tokens += self.loading_tokens(new)
                    oracle_loaded += new
                available = set(oracle_loaded)
            elif session is None:
                block = all_ids
                search_tool = False
                available = set(all_ids)
            else:
                before = session.state.changes
                offer = session.offer(messages, candidates=candidates, prefix_tokens=prefix)
                block, search_tool = offer.block, offer.search_tool
                available = set(offer.available)
                totals.changes += session.state.changes - before
                if offer.prefetched:  # loaded by the runtime before the call: a search exchange, no model call
                    totals.loads.loaded("prefetch", case, index, offer.prefetched, offer.companions, self._def_tokens)
                    defs = [definition_text(self.by_id[i]) for i in offer.prefetched]
                    meter.history_tokens += self.exchange_tokens(PREFETCH_QUERY, defs)
            gold = turn.gold
            totals.preloaded += len(gold & available) / len(gold) if gold else 1.0
            # the tools the model knows it lacks (the others go unnoticed: no search for them)
            noticed = frozenset(g for g in gold if g in available or not self.sim.unnoticed(case.cid, index, g))
            searches = 0
            spurious = (
                session is not None
                and search_tool
                and gold <= available
                and self.max_searches > 0
                and self.sim.spurious(case.cid, index)
            )
            while session is not None and search_tool and searches < self.max_searches:
                lacking = [g for g in turn.tools if g in noticed and g not in available]
                if not lacking and not (spurious and searches == 0):
                    break
                target = lacking[0] if lacking else (turn.tools[0] if turn.tools else None)
                query = self.sim.query(turn.user, target)
                meter.call(block, self.block_tokens(block, search_tool))  # the call that asks for a search
                before = session.state.changes
                heard: list[Event] = []  # the search's event names its co-usage companions
                found = session.search(
                    query,
                    candidates=candidates,
                    prefix_tokens=meter.system_tokens + meter.history_tokens,
                    hooks=(heard.append,),
                )
                totals.changes += session.state.changes - before
                searches += 1
                companions = next((e.companions for e in reversed(heard) if isinstance(e, ToolSearched)), ())
                totals.loads.loaded("search", case, index, [c.id for c in found], companions, self._def_tokens)
                if session.policy == "deferred":  # the result expands into the found definitions
                    content = [definition_text(c) for c in found]
                else:  # the found tools join the tools block of the next call
                    content = [c.id for c in found]
                    block = session.state.block
                meter.history_tokens += self.exchange_tokens(query, content)
                available = set(session.state.available)
                if not found:
                    break
            meter.call(block, self.block_tokens(block, search_tool))  # the call that answers the turn
            missing = [g for g in turn.tools if g not in available]
            if missing and self.sim.miss_cost == "retry":  # the missing definitions, then the turn again
                meter.history_tokens += self.loading_tokens(missing)
                meter.call(block, self.block_tokens(block, search_tool))
            calls = [dict(c) for c in turn.calls]
            if self.strategy == "bridge" and search_tool:  # every call goes through call_tool
                calls = [{"name": CALL_TOOL_NAME, "arguments": {"name": c["name"], **_args(c)}} for c in calls]
            reply = {"role": "assistant", "tool_calls": calls}
            meter.history_tokens += self.message_tokens(reply)
            meter.history_tokens += len(turn.calls) * self.cost_model.result_tokens
            messages.append({"role": "assistant", "content": ""})
            if session is not None:
                session.record_calls(c["name"] for c in turn.calls)
            if feedback is not None and candidates is not None and turn.tools:  # as the runtime logs a turn
                feedback.record(turn.user, used=list(turn.tools))
            hit = len(gold & available)
            totals.turns += 1
            totals.recall += hit / len(gold) if gold else 1.0
            totals.complete += hit == len(gold)
            loaded = [i for i in available if i not in block]
            totals.tools += len(available)
            totals.tool_tokens += self.block_tokens(block, search_tool) + sum(
                self._def_tokens.get(i, 0) for i in loaded
            )
            totals.searches += searches
        totals.calls += meter.calls
        totals.cost += meter.cost
        totals.reductions += meter.reductions
        totals.case_costs.append(meter.cost)
        totals.case_complete.append(totals.complete - complete_before)


def _args(call: Mapping[str, Any]) -> dict[str, Any]:
    return {"arguments": call["arguments"]} if "arguments" in call else {}


def _iter(cases: Sequence[ConversationCase], desc: str, progress: bool) -> Iterator[ConversationCase]:
    """The cases, with a bar on stderr when ``progress`` and each one reported to :mod:`shortlist._progress`."""
    task = f"replaying {desc}"
    progress_report(task, 0, len(cases))
    for done, case in enumerate(tqdm(cases, desc=desc, unit="conv", file=sys.stderr, disable=not progress), 1):
        yield case
        progress_report(task, done, len(cases))


def run_conversation_eval(
    directory: str | Path,
    make_session: Callable[[OfferPolicy, CoUsage | None], ToolSession],
    *,
    strategies: Sequence[str] = STRATEGIES,
    histories: Sequence[int] = (0, 20_000),
    cost_model: CostModel | None = None,
    max_searches: int = 2,
    default: str = "deferred",
    limit: int | None = None,
    learn: bool = True,
    learn_examples: bool = False,
    progress: bool = True,
    simulation: Simulation | None = None,
    catalog: Sequence[Candidate] | None = None,
) -> dict[str, Any]:
    """Replay every conversation of ``directory`` under each strategy; return the report.

    Args:
        directory: ``tools.jsonl`` + ``conversations.jsonl``.
        make_session: builds a fresh :class:`ToolSession` for a policy and a co-usage table
            (one session per conversation).
        strategies: which of :data:`STRATEGIES` to run.
        histories: prior-history sizes (tokens) to price each strategy at.
        cost_model: prompt layout and prices.
        max_searches: the most searches the simulated model makes in one turn.
        default: the name reported as the default strategy.
        limit: replay only the first N conversations.
        learn: learn co-usage online, as a feedback log would: each pass starts from nothing
            and each conversation sees only the calls of the turns replayed before it.
        learn_examples: learn usage examples online too: a feedback log (in memory, one per pass)
            records each turn's message and calls, and each conversation ranks the catalog with the
            examples of the conversations before it (:func:`~shortlist.feedback.apply_examples`, as
            ``shortlist serve --examples`` does with the runtime's log). Strategies that rank
            nothing (``all``, ``oracle``) neither read nor fill it.
        progress: a progress bar on stderr.
        simulation: how the simulated model searches and misses (default: :class:`Simulation`,
            the obliging model).
        catalog: the catalog to replay against instead of ``directory/tools.jsonl`` (a grown
            one, :mod:`shortlist.eval._catalogs`); every called tool must be in it.

    Returns:
        ``{"conversations", "turns", "catalog_tokens", "default", "counter", "simulation",
        "strategies": {name: {"turn_recall", "complete_turns", "preloaded", "tools_per_turn",
        "tool_tokens_per_turn", "tool_block_changes", "model_calls_per_turn",
        "searches_per_turn", "loads", "cost": {H: cost}, "cost_vs_oracle": {H: ratio}, "by_history":
        {H: {...}}, "intervals", "per_conversation"}}, "conversation_ids", "conversation_turns",
        "intervals"}``; the top-level quality figures are those of the first history size
        (``by_history`` has each size's), costs are per conversation. ``per_conversation`` holds
        each conversation's ``complete`` turns and ``cost`` at each history (in the order of
        ``conversation_ids``); ``intervals`` the bootstrap intervals of ``complete_turns`` and
        ``cost_vs_oracle`` over the conversations (:mod:`shortlist.eval._intervals`, seeded by the
        simulation's seed; the report's ``intervals`` says how); when ``strategies`` leaves the
        oracle out, the report's ``oracle`` holds its ``per_conversation``. ``loads`` (every strategy
        but ``all`` and ``oracle``) says where the prefetched and searched definitions went
        (:class:`~shortlist.eval._loads.LoadTally`). ``cost_vs_oracle`` divides
        by the ``oracle``'s cost (replayed for it even when not among ``strategies``).
    """
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ConfigError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
    if not histories or any(h < 0 for h in histories):
        raise ConfigError("history sizes must be non-negative token counts")
    if max_searches < 0:
        raise ConfigError("max_searches must be non-negative")
    root = Path(directory)
    catalog = tuple(catalog) if catalog is not None else load_tools(root / "tools.jsonl")
    cases = load_conversations(root / "conversations.jsonl", [c.id for c in catalog])
    if limit is not None:
        cases = cases[:limit]
    counter = default_counter()
    model = cost_model or CostModel()
    sim = simulation or Simulation()
    report: dict[str, Any] = {
        "conversations": len(cases),
        "turns": sum(len(c.turns) for c in cases),
        "catalog_tokens": sum(counter.count(definition_text(c)) for c in catalog),
        "default": default,
        "counter": counter.name,
        "simulation": {**sim.to_json(), "max_searches": max_searches},
        "learn": {"co_usage": learn, "examples": learn_examples},
        "strategies": {},
    }
    if model.prices.name:  # a preset: recorded with its numbers
        report["prices"] = model.prices.to_dict()
    context = model.context_json()
    if context is not None:
        report["context"] = context

    def replay(strategy: str) -> dict[str, Any]:
        run = _Replay(
            strategy,
            catalog,
            make_session,
            cost_model=model,
            count=counter.count,
            max_searches=max_searches,
            simulation=sim,
        )
        row: dict[str, Any] = {}
        costs: dict[str, float] = {}
        by_history: dict[str, dict[str, float]] = {}
        case_complete: dict[str, list[int]] = {}
        case_cost: dict[str, list[float]] = {}
        for i, prior in enumerate(histories):
            totals = _Totals()
            co_usage = CoUsage() if learn else None  # a fresh log per pass: no pass sees another's
            feedback = FeedbackStore() if learn_examples else None
            try:
                for case in _iter(cases, f"{strategy} @{prior}", progress):
                    run.conversation(case, prior, totals, co_usage, feedback)
            finally:
                if feedback is not None:
                    feedback.close()
            costs[str(prior)] = round(totals.cost / len(cases), 1)
            case_complete[str(prior)] = totals.case_complete
            case_cost[str(prior)] = [round(c, 1) for c in totals.case_costs]
            t = totals.turns or 1
            by_history[str(prior)] = {
                "complete_turns": round(totals.complete / t, 4),
                "tool_tokens_per_turn": round(totals.tool_tokens / t, 1),
                "tool_block_changes": round(totals.changes / len(cases), 3),
                "model_calls_per_turn": round(totals.calls / t, 3),
                "preloaded": round(totals.preloaded / t, 4),
                "searches_per_turn": round(totals.searches / t, 3),
            }
            if model.history_budget is not None:
                by_history[str(prior)]["reductions"] = round(totals.reductions / len(cases), 3)
            if i == 0:
                row = {
                    "turn_recall": round(totals.recall / t, 4),
                    "complete_turns": round(totals.complete / t, 4),
                    "preloaded": round(totals.preloaded / t, 4),
                    "tools_per_turn": round(totals.tools / t, 2),
                    "tool_tokens_per_turn": round(totals.tool_tokens / t, 1),
                    "tool_block_changes": round(totals.changes / len(cases), 3),
                    "model_calls_per_turn": round(totals.calls / t, 3),
                    "searches_per_turn": round(totals.searches / t, 3),
                }
                if strategy not in ("all", "oracle"):  # what the loaded definitions were for
                    row["loads"] = totals.loads.to_json(len(cases))
        row["cost"] = costs
        row["by_history"] = by_history  # the decisions of ``stable`` depend on the history's size
        row["per_conversation"] = {"complete": case_complete, "cost": case_cost}
        return row

    rows = {strategy: replay(strategy) for strategy in strategies}
    oracle = rows["oracle"] if "oracle" in rows else replay("oracle")
    floor = oracle["cost"]
    if "oracle" not in rows:  # what cost_vs_oracle divides by, conversation by conversation (``eval diff``)
        report["oracle"] = {"per_conversation": oracle["per_conversation"]}
    report["conversation_ids"] = [c.cid for c in cases]
    report["conversation_turns"] = turns = [len(c.turns) for c in cases]
    report["intervals"] = {"level": LEVEL, "draws": DRAWS, "seed": sim.seed, "unit": "conversation"}
    draws = resamples(len(cases), sim.seed) if cases else None
    first = str(histories[0])
    for strategy, row in rows.items():
        row["cost_vs_oracle"] = {h: (round(c / floor[h], 4) if floor[h] else None) for h, c in row["cost"].items()}
        if draws is not None:
            row["intervals"] = intervals_of(row["per_conversation"], oracle["per_conversation"], turns, draws, first)
        report["strategies"][strategy] = row
    return report
