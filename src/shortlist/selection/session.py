"""Selection across a conversation: which tools a conversation offers, turn after turn, and why.

Providers cache prompts by prefix, tools first: a tools block that changes re-bills the whole
system prompt and history at the cache-write price. :class:`ToolSession` remembers what a
conversation was offered and what the model called, and decides each turn's offer under an
:data:`OfferPolicy`:

* ``per_turn``: narrow on the latest user message every turn (the seed's behaviour; the tools
  block changes whenever the ranking does).
* ``stable``: the tools block is the pins, a tool-search tool and the first turn's top ``k``;
  it changes only when the model's search found a tool it needs (the found tools join the
  block, with the reason recorded) or when re-writing the cached prefix costs less than the
  search round trip it saves (:meth:`Prices.worth_changing`); when the re-writes narrowing is
  expected to force cost more than carrying the whole catalog (a long history), the whole
  catalog joins at once and the block never changes again. For providers whose API can only
  call tools listed in the request's tools array (OpenAI chat completions, most
  OpenAI-compatible servers).
* ``deferred``: the tools block never changes: the pins and a tool-search tool (plus the first
  turn's ``hot`` top tools, none by default). The rest of the catalog is deferred and enters
  *in the history*, after the cached prefix, through the provider's deferred loading
  (Anthropic ``defer_loading`` + ``tool_reference``; OpenAI Responses tool search) or, for
  any other model, through the definitions a ``find_tools`` result carries. Each turn the
  runtime *prefetches* the turn's top ``prefetch`` tools (and, with co-usage, the tools
  usually called with them) that way, before the model call and without one; the model
  searches for the rest.

The decision is a pure function of an :class:`OfferState` (a small JSON-ready value) and the
turn's query, so the HTTP service can answer it without server-side session state: the client
sends the previous state back and any replica answers the same. :class:`ToolSession` is the
stateful convenience around it for the library and the runtime.

The in-turn escape hatch is :meth:`ToolSession.search`: the model asks for a tool it was not
offered; the bound selector ranks the catalog minus what is already available; a failing
selector falls back to a dependency-free lexical ranking (never to the whole catalog, which
would flood the history). Each search is a :class:`ToolSearched` event, so hosts can record
it in the feedback log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from shortlist.errors import ConfigError
from shortlist.events import Event, EventHook, emit
from shortlist.selection.cousage import CoUsage
from shortlist.selection.narrowing import TurnSelection, narrow
from shortlist.types import Candidate, Query

if TYPE_CHECKING:
    from shortlist.selection.facade import Shortlist

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_PREFETCH",
    "MISS_RATE",
    "OFFER_POLICIES",
    "PREFETCH_QUERY",
    "SEARCH_TOOL_DESCRIPTION",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "Offer",
    "OfferChanged",
    "OfferPolicy",
    "OfferState",
    "OfferStateRepaired",
    "Prices",
    "ToolSearched",
    "ToolSession",
    "decide_offer",
    "definition_text",
    "definition_tokens",
    "search_tools",
]

OfferPolicy = Literal["per_turn", "stable", "deferred"]
#: Every policy name, in the order the evaluation reports them.
OFFER_POLICIES: tuple[str, ...] = get_args(OfferPolicy)
#: The policy a :class:`ToolSession` uses unless told otherwise: it measured best on cost and
#: completeness in the conversation replay (``docs/evaluation.md``).
DEFAULT_POLICY: OfferPolicy = "deferred"
#: ``deferred``: how many of a turn's top tools are loaded into the history before the call.
DEFAULT_PREFETCH = 3
#: The query of the synthetic ``find_tools`` call that carries a turn's prefetched tools (a
#: label for the model: the user's message is right above it, so it is not repeated).
PREFETCH_QUERY = "tools for the request above"
#: The name of the tool-search tool a ``stable`` or ``deferred`` conversation offers.
SEARCH_TOOL_NAME = "find_tools"
#: Its description and JSON Schema, as every request format and the cost model render it.
SEARCH_TOOL_DESCRIPTION = (
    "Search the tool catalog for tools that are not loaded yet. Describe the action you need; "
    "the best matching tools become callable."
)
SEARCH_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "what the tool should do"}},
    "required": ["query"],
}


@dataclass(frozen=True, kw_only=True)
class OfferChanged(Event):
    """A conversation's tools block changed (re-billing the cached prefix behind it), and why."""

    name: ClassVar[str] = "selection.offer_changed"
    area: ClassVar[str] = "selection"
    level: int = logging.INFO
    policy: str = ""
    reason: str = ""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    prefix_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class OfferStateRepaired(Event):
    """An offer state named tools the catalog no longer holds; they were dropped (the turn goes on)."""

    name: ClassVar[str] = "selection.offer_state_repaired"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ToolSearched(Event):
    """The model searched for tools it was not offered (the in-turn escape hatch)."""

    name: ClassVar[str] = "selection.tool_searched"
    area: ClassVar[str] = "selection"
    level: int = logging.INFO
    query: str = ""
    found: tuple[str, ...] = ()
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class Prices:
    """Input-token prices relative to the base input price (Anthropic's published defaults).

    Args:
        cache_write: a token written to the prompt cache (Anthropic: 1.25x).
        cache_read: a token read from the prompt cache (Anthropic: 0.1x).
    """

    cache_write: float = 1.25
    cache_read: float = 0.1

    def __post_init__(self) -> None:
        if self.cache_write < 0 or self.cache_read < 0:
            raise ConfigError("cache prices must be non-negative")

    def call(self, prompt_tokens: int, cached_tokens: int) -> float:
        """The cost of one model call whose first ``cached_tokens`` were read from the cache."""
        cached = min(cached_tokens, prompt_tokens)
        return cached * self.cache_read + (prompt_tokens - cached) * self.cache_write

    def carrying(self, tokens: int, calls: int) -> float:
        """The cost of ``tokens`` of tools block kept for ``calls`` calls: written once, then read."""
        return tokens * (self.cache_write + self.cache_read * max(calls - 1, 0))

    def worth_widening(self, prefix_tokens: int, *, extra_tokens: int, calls: int, miss_rate: float) -> bool:
        """True when offering ``extra_tokens`` more definitions for ``calls`` calls costs less than
        the re-writes of the ``prefix_tokens`` behind the block that narrowing is expected to
        force (a miss on ``miss_rate`` of those calls, each one a change)."""
        rewrites = miss_rate * calls
        return rewrites * prefix_tokens * (self.cache_write - self.cache_read) > self.carrying(extra_tokens, calls)

    def worth_changing(self, prefix_tokens: int, *, p_needed: float, round_trip_tokens: int) -> bool:
        """True when changing the tools block costs less than the search it is expected to save.

        Changing re-writes the whole cached prefix behind the tools block; not changing costs,
        with probability ``p_needed``, a search round trip: one more call that reads the prefix
        from the cache and writes ``round_trip_tokens`` of its own.
        """
        rewrite = prefix_tokens * (self.cache_write - self.cache_read)
        search = p_needed * (prefix_tokens * self.cache_read + round_trip_tokens * self.cache_write)
        return search > rewrite


@dataclass(frozen=True, slots=True)
class OfferState:
    """What a conversation has been offered and has called: all the offer decision needs.

    JSON-ready (:meth:`to_dict` / :meth:`from_dict`), so a client can carry it between turns
    and any replica of the service decides the same.

    Attributes:
        block: the ids in the tools block (the cached prefix), in order.
        loaded: ids whose definitions entered the history through a search (deferred), in order.
        called: ids the model called in this conversation, oldest first, without repeats.
        turns: turns decided so far.
        changes: times the tools block changed after the first turn.
    """

    block: tuple[str, ...] = ()
    loaded: tuple[str, ...] = ()
    called: tuple[str, ...] = ()
    turns: int = 0
    changes: int = 0

    @property
    def available(self) -> tuple[str, ...]:
        """Every id the model can call now: the block, then what searches loaded."""
        seen = set(self.block)
        return self.block + tuple(i for i in self.loaded if i not in seen)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "block": list(self.block),
            "loaded": list(self.loaded),
            "called": list(self.called),
            "turns": self.turns,
            "changes": self.changes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OfferState:
        """Read the JSON form (missing keys take their defaults).

        Raises:
            ConfigError: a field of the wrong type.
        """
        if not data:
            return cls()
        try:
            return cls(
                block=_ids(data.get("block", ())),
                loaded=_ids(data.get("loaded", ())),
                called=_ids(data.get("called", ())),
                turns=_count(data.get("turns", 0)),
                changes=_count(data.get("changes", 0)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"invalid offer state: {exc}") from None


def _ids(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError("ids must be a list of strings")
    out = tuple(value)
    if not all(isinstance(i, str) for i in out):
        raise TypeError("ids must be a list of strings")
    return out


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("counts must be non-negative integers")
    return value


@dataclass(frozen=True, slots=True)
class Offer:
    """One turn's offer.

    Attributes:
        policy: the policy that decided it.
        block: the ids in the tools block this turn, in order (pins included).
        loaded: ids already loaded into the history by earlier searches (deferred).
        deferred: ids the model can reach only through the search tool this turn.
        search_tool: whether the search tool (:data:`SEARCH_TOOL_NAME`) is offered.
        changed: the tools block differs from the previous turn's (False on the first turn).
        reason: why the block is what it is (``first_turn``, ``unchanged``, ``narrowed``,
            ``fallback:<reason>``, ``worth_changing``).
        selection: this turn's narrowing (None when the policy kept the block without ranking).
        state: the state after this turn's decision (send it back with the next turn).
    """

    policy: str
    block: tuple[str, ...]
    loaded: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    search_tool: bool = False
    changed: bool = False
    reason: str = ""
    selection: TurnSelection | None = None
    prefetched: tuple[str, ...] = ()
    state: OfferState = field(default_factory=OfferState)

    @property
    def available(self) -> tuple[str, ...]:
        """Every id the model can call this turn without searching."""
        return self.state.available

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used by the CLI and the HTTP API."""
        return {
            "policy": self.policy,
            "block": list(self.block),
            "loaded": list(self.loaded),
            "deferred": list(self.deferred),
            "search_tool": self.search_tool,
            "changed": self.changed,
            "reason": self.reason,
            "selection": self.selection.to_dict() if self.selection is not None else None,
            "prefetched": list(self.prefetched),
            "state": self.state.to_dict(),
        }


def _hooks(shortlist: Shortlist, extra: Sequence[EventHook]) -> tuple[EventHook, ...]:
    """The binding's own hooks (its ``on_event``) and this call's."""
    return (*shortlist.hooks, *extra)


def _repaired(
    shortlist: Shortlist, state: OfferState, eligible_ids: set[str], hooks: Sequence[EventHook]
) -> OfferState:
    """``state`` without the tools the catalog no longer holds (a catalog may change between turns)."""
    dropped = tuple(dict.fromkeys(i for i in (*state.block, *state.loaded) if i not in eligible_ids))
    if not dropped:
        return state
    emit(OfferStateRepaired(dropped=dropped), hooks=_hooks(shortlist, hooks))
    return replace(
        state,
        block=tuple(i for i in state.block if i in eligible_ids),
        loaded=tuple(i for i in state.loaded if i in eligible_ids),
    )


def _check_policy(policy: str) -> OfferPolicy:
    if policy not in OFFER_POLICIES:
        raise ConfigError(f"offer policy must be one of {', '.join(OFFER_POLICIES)}, not {policy!r}")
    return policy  # type: ignore[return-value]


def decide_offer(
    shortlist: Shortlist,
    state: OfferState,
    query: str | Query | Sequence[Mapping[str, Any]],
    *,
    policy: OfferPolicy,
    candidates: Sequence[Candidate] | None = None,
    k: int | None = None,
    prefix_tokens: int = 0,
    prices: Prices | None = None,
    prefetch: int = 0,
    co_usage: CoUsage | None = None,
    horizon: int = 5,
    hot: int = 0,
    hooks: Sequence[EventHook] = (),
) -> Offer:
    """Decide this turn's offer from the conversation's ``state`` (pure: nothing is stored).

    Args:
        shortlist: the binding (catalog, selector, pins) to narrow with.
        state: what was offered and called so far (``OfferState()`` on the first turn).
        query: the turn's text, a :class:`Query`, or the conversation's messages.
        policy: ``per_turn``, ``stable`` or ``deferred``.
        candidates: the eligible candidates (default: the binding's catalog).
        k: the most tools ranked into the block besides pins.
        prefix_tokens: the tokens behind the tools block (system prompt + history) that a
            change would re-write; used by ``stable``.
        prices: cache prices (default :class:`Prices`).
        prefetch: ``deferred`` only: the most of this turn's top-ranked tools the runtime
            loads into the history before the model call (no model call needed; 0: none).
        co_usage: with ``prefetch``, also load the tools usually called with the likely ones.
        hot: ``deferred``: how many of the first turn's top tools stay in the fixed block (0: the
            block is the pins and the search tool; every other tool enters the history).
        horizon: ``stable``: the model calls a conversation is expected to make from here;
            when the prefix re-writes that narrowing is expected to force over that many calls
            (:data:`MISS_RATE` of them) cost more than carrying the whole catalog, ``stable``
            offers the whole catalog instead of narrowing.
        hooks: extra event hooks for this call.
    """
    policy = _check_policy(policy)
    prices = prices or Prices()
    eligible = tuple(shortlist.catalog if candidates is None else candidates)
    eligible_ids = {c.id for c in eligible}
    previous_block = state.block
    state = _repaired(shortlist, state, eligible_ids, hooks)
    first = state.turns == 0
    prefetched: tuple[str, ...] = ()
    selection: TurnSelection | None = None
    if policy == "per_turn" or first:
        turn = selection = shortlist.select(query, eligible, k=k, hooks=hooks)
        block = turn.ids
        reason = "narrowed" if turn.narrowed else f"fallback:{turn.fallback}"
        if first and turn.narrowed:
            reason = "first_turn"
            if policy == "stable":
                block, reason = _widened(block, eligible, reason, prefix_tokens, prices, horizon)
            elif policy == "deferred":  # the fixed block: pins and the ``hot`` top tools
                keep = set(turn.pinned) | set(turn.ranked[:hot])
                block = tuple(i for i in block if i in keep)
    else:
        block, reason = state.block, ("unchanged" if state.block == previous_block else "catalog_changed")
    if policy == "deferred" and prefetch > 0:
        turn = selection or shortlist.select(query, eligible, k=k, hooks=hooks)
        selection = turn
        if turn.narrowed and _informative(turn):
            available = set(state.available) | set(block)
            prefetched = tuple(i for i in turn.ranked[:prefetch] if i not in available)
            if co_usage is not None:  # tools usually called with the likely ones, never named
                likely = list(turn.ranked[:prefetch])
                exclude = available | set(prefetched)
                prefetched += tuple(i for i in co_usage.companions(likely, exclude=exclude) if i in eligible_ids)
    if policy == "stable" and not first:
        turn = shortlist.select(query, eligible, k=k, hooks=hooks)
        available = set(state.available)
        new = tuple(i for i in turn.ranked if i not in available)
        # the top-ranked tool missing from the block is the one a search would have to find
        p_needed = 1.0 if turn.ranked and turn.ranked[0] in new else 0.0
        if new and prices.worth_changing(prefix_tokens, p_needed=p_needed, round_trip_tokens=_ROUND_TRIP):
            block, reason, selection = state.block + new, "worth_changing", turn
    search_tool = policy != "per_turn"
    loaded = tuple(i for i in (*state.loaded, *prefetched) if i in eligible_ids and i not in block)
    changed = not first and block != previous_block
    new_state = replace(
        state,
        block=block,
        loaded=loaded,
        turns=state.turns + 1,
        changes=state.changes + (1 if changed else 0),
    )
    if changed:
        emit(
            OfferChanged(
                policy=policy,
                reason=reason,
                added=tuple(i for i in block if i not in previous_block),
                removed=tuple(i for i in previous_block if i not in block),
                prefix_tokens=prefix_tokens,
            ),
            hooks=_hooks(shortlist, hooks),
        )
    available = set(new_state.available)
    deferred = tuple(c.id for c in eligible if c.id not in available) if search_tool else ()
    return Offer(
        policy=policy,
        block=block,
        loaded=loaded,
        deferred=deferred,
        search_tool=search_tool,
        changed=changed,
        reason=reason,
        selection=selection,
        prefetched=prefetched,
        state=new_state,
    )


def _informative(turn: TurnSelection) -> bool:
    """Whether a turn's ranking says which tools are likely (prefetch needs it).

    A ranking whose scores are all the same non-positive value (BM25's 0.0 everywhere when no
    tool shares a word with "thanks") is an arbitrary order: prefetching its head would load tools
    the turn has nothing to do with. Ties at a positive score (two tools matching equally) are
    information and still prefetch.
    """
    values = [turn.scores[i] for i in turn.ranked if i in turn.scores]
    return not values or max(values) > min(values) or max(values) > 0


#: ``stable``'s prior for the share of turns whose tools a narrowed block misses (each miss
#: forces a change). Per-turn narrowing at k = 5 missed a needed tool on 28% of the turns of
#: the conversation set; a host with a feedback log can measure its own.
MISS_RATE = 0.3


def definition_text(c: Candidate) -> str:
    """The tool definition a model would receive for ``c`` (JSON of name, description, parameters)."""
    body: dict[str, Any] = {"name": c.name, "description": c.description}
    if c.parameters:
        body["parameters"] = dict(c.parameters)
    return json.dumps(body, ensure_ascii=False, sort_keys=True, default=str)


def definition_tokens(c: Candidate) -> int:
    """An estimate of the tokens of ``c``'s definition in a request (``len(definition_text) / 4``)."""
    return -(-len(definition_text(c)) // 4)


def _widened(
    block: tuple[str, ...],
    eligible: Sequence[Candidate],
    reason: str,
    prefix_tokens: int,
    prices: Prices,
    horizon: int,
) -> tuple[tuple[str, ...], str]:
    """``stable``: the whole catalog when carrying it is cheaper than the changes narrowing would force."""
    inside = set(block)
    rest = [c for c in eligible if c.id not in inside]
    extra = sum(definition_tokens(c) for c in rest)
    if rest and prices.worth_widening(prefix_tokens, extra_tokens=extra, calls=horizon, miss_rate=MISS_RATE):
        return block + tuple(c.id for c in rest), "whole_catalog_cheaper"
    return block, reason


#: Tokens a search round trip writes besides the prefix: the call, its result, the definitions.
_ROUND_TRIP = 600


def search_tools(
    shortlist: Shortlist,
    state: OfferState,
    query: str,
    *,
    policy: OfferPolicy,
    candidates: Sequence[Candidate] | None = None,
    k: int = 5,
    co_usage: CoUsage | None = None,
    prefix_tokens: int = 0,
    prices: Prices | None = None,
    horizon: int = 5,
    hooks: Sequence[EventHook] = (),
) -> tuple[tuple[Candidate, ...], OfferState]:
    """Rank the tools the model cannot call yet for ``query``; return them and the new state.

    Under ``deferred`` the found tools are *loaded* (their definitions enter the history);
    under ``stable`` and ``per_turn`` they join the tools block of the next request (a change
    that re-writes ``prefix_tokens``; when carrying the whole catalog for ``horizon`` calls
    costs less than the changes still expected, the whole catalog joins instead). With
    ``co_usage``, the tools usually called with the found ones come along.
    """
    policy = _check_policy(policy)
    catalog = tuple(shortlist.catalog if candidates is None else candidates)
    state = _repaired(shortlist, state, {c.id for c in catalog}, hooks)
    available = set(state.available)
    pool = tuple(c for c in catalog if c.id not in available)
    if not pool or not query.strip() or k <= 0:
        emit(ToolSearched(query=query, found=(), fallback=None), hooks=_hooks(shortlist, hooks))
        return (), state
    turn = shortlist.select(Query(query, "tool", k), pool, k=k, hooks=hooks)
    fallback = turn.fallback
    if turn.narrowed:
        found = turn.surfaced[:k]
    else:  # never flood the history with the whole catalog: a cheap lexical ranking instead
        from shortlist.selection.lexical import LexicalSelector

        lexical = narrow(LexicalSelector(top_k=k), Query(query, "tool", k), pool, hooks=_hooks(shortlist, hooks))
        found = lexical.surfaced[:k]
    if co_usage is not None and found:
        pool_by_id = {c.id: c for c in pool}
        seen = {c.id for c in found}
        extra = co_usage.companions([c.id for c in found], exclude=available | seen)
        found = (*found, *(pool_by_id[i] for i in extra if i in pool_by_id))
    ids = tuple(c.id for c in found)
    if policy == "deferred":
        state = replace(state, loaded=state.loaded + ids)
    elif ids:  # the found tools must join the tools block: a change, so make it the last one if cheaper
        block, reason = _widened(state.block + ids, pool, "search", prefix_tokens, prices or Prices(), horizon)
        added = tuple(i for i in block if i not in state.block)
        state = replace(state, block=block, changes=state.changes + 1)
        emit(
            OfferChanged(policy=policy, reason=reason, added=added, prefix_tokens=prefix_tokens),
            hooks=_hooks(shortlist, hooks),
        )
    emit(ToolSearched(query=query, found=ids, fallback=fallback), hooks=_hooks(shortlist, hooks))
    return found, state


class ToolSession:
    """The tools one conversation offers, turn after turn (library and runtime).

    Args:
        shortlist: the binding: catalog, selector and pins (see :class:`~shortlist.Shortlist`).
        policy: ``deferred`` (default), ``stable`` or ``per_turn``; see the module docs.
        k: tools ranked into the block besides pins (the first turn's hot tools).
        search_k: tools a search returns.
        prices: cache prices used by ``stable``'s change rule.
        prefetch: ``deferred``: this turn's top tools loaded into the history before the call
            (None: :data:`DEFAULT_PREFETCH` under ``deferred``, else 0).
        co_usage: tools called together (shared by a pack's conversations; learns from
            :meth:`record_calls`).
        horizon: ``stable``: model calls the conversation is expected to make (see
            :func:`decide_offer`).
        hot: ``deferred``: the first turn's top tools kept in the fixed block (default 0).
        state: resume from a saved :class:`OfferState`.
    """

    def __init__(
        self,
        shortlist: Shortlist,
        *,
        policy: OfferPolicy = DEFAULT_POLICY,
        k: int | None = None,
        search_k: int = 5,
        prices: Prices | None = None,
        prefetch: int | None = None,
        co_usage: CoUsage | None = None,
        horizon: int = 5,
        hot: int = 0,
        state: OfferState | None = None,
    ) -> None:
        self.shortlist = shortlist
        if prefetch is None:
            prefetch = DEFAULT_PREFETCH if policy == "deferred" else 0
        if prefetch < 0:
            raise ConfigError("prefetch must be non-negative")
        self.prefetch = prefetch
        self.co_usage = co_usage
        if horizon < 1:
            raise ConfigError("horizon must be at least 1")
        self.horizon = horizon
        if hot < 0:
            raise ConfigError("hot must be non-negative")
        self.hot = hot
        self.policy: OfferPolicy = _check_policy(policy)
        if search_k < 1:
            raise ConfigError("search_k must be at least 1")
        self.k = k
        self.search_k = search_k
        self.prices = prices or Prices()
        self.state = state or OfferState()

    def offer(
        self,
        query: str | Query | Sequence[Mapping[str, Any]],
        *,
        candidates: Sequence[Candidate] | None = None,
        prefix_tokens: int = 0,
        hooks: Sequence[EventHook] = (),
    ) -> Offer:
        """Decide this turn's offer and remember it."""
        offer = decide_offer(
            self.shortlist,
            self.state,
            query,
            policy=self.policy,
            candidates=candidates,
            k=self.k,
            prefix_tokens=prefix_tokens,
            prices=self.prices,
            prefetch=self.prefetch,
            co_usage=self.co_usage,
            horizon=self.horizon,
            hot=self.hot,
            hooks=hooks,
        )
        self.state = offer.state
        return offer

    def search(
        self,
        query: str,
        *,
        candidates: Sequence[Candidate] | None = None,
        k: int | None = None,
        prefix_tokens: int = 0,
        hooks: Sequence[EventHook] = (),
    ) -> tuple[Candidate, ...]:
        """The escape hatch: tools for ``query`` that the model cannot call yet (now available).

        ``prefix_tokens``: under ``stable``, the system prompt and history behind the block.
        """
        found, self.state = search_tools(
            self.shortlist,
            self.state,
            query,
            policy=self.policy,
            candidates=candidates,
            k=k or self.search_k,
            co_usage=self.co_usage,
            prefix_tokens=prefix_tokens,
            prices=self.prices,
            horizon=self.horizon,
            hooks=hooks,
        )
        return found

    def record_calls(self, names: Iterable[str]) -> None:
        """Note the tools the model called in one turn (and teach the co-usage counts)."""
        names = list(names)
        if self.co_usage is not None and names:
            self.co_usage.observe(names)
        called = list(self.state.called)
        for name in names:
            if name in called:
                called.remove(name)
            called.append(name)
        self.state = replace(self.state, called=tuple(called))
