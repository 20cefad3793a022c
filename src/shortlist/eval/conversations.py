"""Selection across a conversation, replayed: quality, tools-block churn and what the prompts cost.

A conversation dataset is ``tools.jsonl`` (the catalog) plus ``conversations.jsonl``: one
conversation a line, ``{"cid", "turns": [{"user", "calls": [{"name", "arguments"}]}]}``. A
turn's gold tools are the distinct names of its calls. Each conversation is replayed turn by
turn for every strategy (``all``, ``per_turn``, ``stable``, ``deferred``) through the public
:class:`~shortlist.offer.ToolSession`, with the history rebuilt as a model would
have seen it: the user message, an assistant message carrying the turn's calls, one short
tool result per call.

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
message as its query (a stand-in for the query a model would write); the search call and its
result join the history: under ``deferred`` the result carries the found definitions (as the
providers' ``tool_reference`` expansion does), under ``stable`` the found tools join the tools
block of the next call instead. Tokens are counted with the offline tiktoken ``o200k_base``
counter (else ``len/4``, named in the report).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from shortlist.errors import CatalogError, ConfigError
from shortlist.eval.datasets import load_tools
from shortlist.offer import (
    PREFETCH_QUERY,
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    SEARCH_TOOL_PARAMETERS,
    OfferPolicy,
    Prices,
    ToolSession,
)
from shortlist.selection.cousage import CoUsage
from shortlist.tokens import default_counter, definition_text
from shortlist.types import Candidate

__all__ = [
    "STRATEGIES",
    "ConversationCase",
    "ConversationTurn",
    "CostModel",
    "is_conversation_dataset",
    "load_conversations",
    "run_conversation_eval",
]

#: Every strategy the replay compares, in report order.
STRATEGIES: tuple[str, ...] = ("all", "per_turn", "stable", "deferred")

#: The search tool as offered to the model (its definition is part of the tools block).
SEARCH_TOOL_DEFINITION: dict[str, Any] = {
    "name": SEARCH_TOOL_NAME,
    "description": SEARCH_TOOL_DESCRIPTION,
    "parameters": SEARCH_TOOL_PARAMETERS,
}


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn: the user's message and the calls that answer it (the reference)."""

    user: str
    calls: tuple[Mapping[str, Any], ...] = ()

    @property
    def gold(self) -> frozenset[str]:
        """The distinct tools the turn needs."""
        return frozenset(str(c["name"]) for c in self.calls)


@dataclass(frozen=True, slots=True)
class ConversationCase:
    """One conversation of the dataset."""

    cid: str
    turns: tuple[ConversationTurn, ...]


def is_conversation_dataset(directory: str | Path) -> bool:
    """True when ``directory`` holds a conversation dataset (``conversations.jsonl``)."""
    return (Path(directory) / "conversations.jsonl").is_file()


def load_conversations(path: str | Path, tool_ids: Sequence[str] | None = None) -> tuple[ConversationCase, ...]:
    """Read ``conversations.jsonl``.

    Raises:
        CatalogError: unreadable, malformed, or a call naming a tool missing from ``tool_ids``.
    """
    known = set(tool_ids) if tool_ids is not None else None
    out: list[ConversationCase] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read conversations: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
            turns = tuple(
                ConversationTurn(str(t["user"]), tuple(dict(c) for c in t.get("calls") or ())) for t in obj["turns"]
            )
            case = ConversationCase(str(obj.get("cid", n)), turns)
        except (ValueError, KeyError, TypeError) as exc:
            raise CatalogError(f"{where}: not a conversation ({type(exc).__name__}: {exc})") from None
        if known is not None:
            missing = sorted({g for t in turns for g in t.gold} - known)
            if missing:
                raise CatalogError(f"{where}: calls tools that tools.jsonl does not define: {', '.join(missing)}")
        out.append(case)
    if not out:
        raise CatalogError(f"{path}: no conversations")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CostModel:
    """What one call's prompt holds and how it is billed (see the module docs).

    Args:
        prices: cache write/read multipliers of the base input price.
        system_tokens: the system prompt's size.
        result_tokens: the placeholder result of one tool call.
    """

    prices: Prices = field(default_factory=Prices)
    system_tokens: int = 400
    result_tokens: int = 10


@dataclass
class _Meter:
    """Bills the calls of one conversation."""

    model: CostModel
    history_tokens: int
    cost: float = 0.0
    calls: int = 0
    _prev_block: tuple[str, ...] | None = None
    _prev_prompt: int = 0

    def call(self, block: tuple[str, ...], block_tokens: int) -> None:
        prompt = block_tokens + self.model.system_tokens + self.history_tokens
        cached = self._prev_prompt if block == self._prev_block else 0
        self.cost += self.model.prices.call(prompt, cached)
        self.calls += 1
        self._prev_block, self._prev_prompt = block, prompt


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
    ) -> None:
        self.strategy = strategy
        self.catalog = tuple(catalog)
        self.by_id = {c.id: c for c in self.catalog}
        self.make_session = make_session
        self.cost_model = cost_model
        self.count = count
        self.max_searches = max_searches
        self._def_tokens = {c.id: count(definition_text(c)) for c in self.catalog}
        self._search_tokens = count(json.dumps(SEARCH_TOOL_DEFINITION, sort_keys=True))

    def block_tokens(self, ids: Sequence[str], search_tool: bool) -> int:
        return sum(self._def_tokens.get(i, 0) for i in ids) + (self._search_tokens if search_tool else 0)

    def message_tokens(self, message: Mapping[str, Any]) -> int:
        return self.count(json.dumps(message, ensure_ascii=False, default=str))

    def exchange_tokens(self, query: str, content: list[str]) -> int:
        """A ``find_tools`` call with ``query`` and its result carrying ``content``."""
        ask = {"role": "assistant", "tool_calls": [{"name": SEARCH_TOOL_NAME, "arguments": {"query": query}}]}
        return self.message_tokens(ask) + self.message_tokens({"role": "tool", "content": content})

    def conversation(self, case: ConversationCase, prior: int, totals: _Totals, co_usage: CoUsage | None) -> None:
        meter = _Meter(self.cost_model, prior)
        all_ids = tuple(c.id for c in self.catalog)
        session = None if self.strategy == "all" else self.make_session(self.strategy, co_usage)  # type: ignore[arg-type]
        messages: list[dict[str, Any]] = []
        for turn in case.turns:
            user = {"role": "user", "content": turn.user}
            messages.append(user)
            meter.history_tokens += self.message_tokens(user)
            prefix = self.cost_model.system_tokens + meter.history_tokens
            if session is None:
                block: tuple[str, ...] = all_ids
                search_tool = False
                available = set(all_ids)
            else:
                before = session.state.changes
                offer = session.offer(messages, prefix_tokens=prefix)
                block, search_tool = offer.block, offer.search_tool
                available = set(offer.available)
                totals.changes += session.state.changes - before
                if offer.prefetched:  # loaded by the runtime before the call: a search exchange, no model call
                    defs = [definition_text(self.by_id[i]) for i in offer.prefetched]
                    meter.history_tokens += self.exchange_tokens(PREFETCH_QUERY, defs)
            gold = turn.gold
            searches = 0
            while session is not None and search_tool and not gold <= available and searches < self.max_searches:
                meter.call(block, self.block_tokens(block, search_tool))  # the call that asks for a search
                before = session.state.changes
                found = session.search(turn.user, prefix_tokens=self.cost_model.system_tokens + meter.history_tokens)
                totals.changes += session.state.changes - before
                searches += 1
                if session.policy == "deferred":  # the result expands into the found definitions
                    content = [definition_text(c) for c in found]
                else:  # the found tools join the tools block of the next call
                    content = [c.id for c in found]
                    block = session.state.block
                meter.history_tokens += self.exchange_tokens(turn.user, content)
                available = set(session.state.available)
                if not found:
                    break
            meter.call(block, self.block_tokens(block, search_tool))  # the call that answers the turn
            reply = {"role": "assistant", "tool_calls": [dict(c) for c in turn.calls]}
            meter.history_tokens += self.message_tokens(reply)
            meter.history_tokens += len(turn.calls) * self.cost_model.result_tokens
            messages.append({"role": "assistant", "content": ""})
            if session is not None:
                session.record_calls(c["name"] for c in turn.calls)
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


def _iter(cases: Sequence[ConversationCase], desc: str, progress: bool) -> Iterator[ConversationCase]:
    yield from tqdm(cases, desc=desc, unit="conv", file=sys.stderr, disable=not progress)


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
    progress: bool = True,
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
        progress: a progress bar on stderr.

    Returns:
        ``{"conversations", "turns", "catalog_tokens", "default", "counter", "strategies":
        {name: {"turn_recall", "complete_turns", "tools_per_turn", "tool_tokens_per_turn",
        "tool_block_changes", "model_calls_per_turn", "searches_per_turn", "cost": {H: cost},
        "by_history": {H: {...}}}}}``; the top-level quality figures are those of the first
        history size (``by_history`` has each size's), costs are per conversation.
    """
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ConfigError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
    if not histories or any(h < 0 for h in histories):
        raise ConfigError("history sizes must be non-negative token counts")
    if max_searches < 0:
        raise ConfigError("max_searches must be non-negative")
    root = Path(directory)
    catalog = load_tools(root / "tools.jsonl")
    cases = load_conversations(root / "conversations.jsonl", [c.id for c in catalog])
    if limit is not None:
        cases = cases[:limit]
    counter = default_counter()
    model = cost_model or CostModel()
    report: dict[str, Any] = {
        "conversations": len(cases),
        "turns": sum(len(c.turns) for c in cases),
        "catalog_tokens": sum(counter.count(definition_text(c)) for c in catalog),
        "default": default,
        "counter": counter.name,
        "strategies": {},
    }
    for strategy in strategies:
        replay = _Replay(
            strategy, catalog, make_session, cost_model=model, count=counter.count, max_searches=max_searches
        )
        row: dict[str, Any] = {}
        costs: dict[str, float] = {}
        by_history: dict[str, dict[str, float]] = {}
        for i, prior in enumerate(histories):
            totals = _Totals()
            co_usage = CoUsage() if learn else None  # a fresh log per pass: no pass sees another's
            for case in _iter(cases, f"{strategy} @{prior}", progress):
                replay.conversation(case, prior, totals, co_usage)
            costs[str(prior)] = round(totals.cost / len(cases), 1)
            t = totals.turns or 1
            by_history[str(prior)] = {
                "complete_turns": round(totals.complete / t, 4),
                "tool_tokens_per_turn": round(totals.tool_tokens / t, 1),
                "tool_block_changes": round(totals.changes / len(cases), 3),
                "model_calls_per_turn": round(totals.calls / t, 3),
            }
            if i == 0:
                row = {
                    "turn_recall": round(totals.recall / t, 4),
                    "complete_turns": round(totals.complete / t, 4),
                    "tools_per_turn": round(totals.tools / t, 2),
                    "tool_tokens_per_turn": round(totals.tool_tokens / t, 1),
                    "tool_block_changes": round(totals.changes / len(cases), 3),
                    "model_calls_per_turn": round(totals.calls / t, 3),
                    "searches_per_turn": round(totals.searches / t, 3),
                }
        row["cost"] = costs
        row["by_history"] = by_history  # the decisions of ``stable`` depend on the history's size
        report["strategies"][strategy] = row
    return report
