"""The framework-free part of every integration: which of a framework's tools one model call is offered.

A framework hands its adapter the agent's tools and the conversation on each model call; the
adapter turns the tools into candidates once (:meth:`ToolNarrower.catalog`), asks
:meth:`ToolNarrower.choose` which names to offer, and gives the framework back only those.

* The offer policy (``policy``) says how the tools change across a conversation. Providers cache
  prompts by prefix, tools first: a tools list that changes re-bills the whole system prompt and
  history behind it, so the default is ``stable``
  (:func:`~shortlist.offer.decide_offer`): the tools are decided at the
  conversation's **first** user message (the whole catalog when carrying it costs less than the
  re-writes narrowing is expected to force, :meth:`~shortlist.offer.Prices.worth_widening`,
  on an estimate of the system prompt and history, characters / 4), stay fixed on later turns,
  and grow only by the tools ``find_tools`` found or by ``stable``'s
  :meth:`~shortlist.offer.Prices.worth_changing` rule. ``per_turn`` re-selects on
  every user message (the tools change whenever the ranking does). The adapters pass the
  conversation they see (:class:`TurnLog`: its user messages, the size of what precedes
  each, the tools searches found), so the decision is derived from it on every call with no
  per-conversation state (one adapter serves concurrent runs); each decision is remembered by
  the conversation's turns, so a tool round re-uses its turn's and a failing selector emits one
  ``selection.fallback`` per turn, not one per round.
* Every narrowing guarantee is the core's (:func:`~shortlist.selection.narrow`): a selector that
  raises, times out or answers nothing leaves the call with **all** the tools, as an event.
* The escape hatch is a ``find_tools`` tool (:data:`SEARCH_TOOL_NAME`) the adapter adds to the
  agent: it ranks what the model call that searched cannot use yet (not the tools it was offered
  nor those earlier searches found, so asking again pages on) for the model's own description
  (:func:`~shortlist.offer.search_tools`; a failing selector falls back to a lexical
  ranking) and answers a JSON list of tools. The adapters read the names back from the
  conversation's tool results (:func:`found_in`), so the found tools are offered on every later
  call of the conversation with no state kept between calls (one adapter serves concurrent runs).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import replace
from typing import Literal

from shortlist._events import EventHook
from shortlist._tokens import tool_tokens
from shortlist._types import Candidate, Query, TurnSelection
from shortlist.errors import ConfigError
from shortlist.integrations._turn import ToolChoice, TurnLog, found_in, tool_candidate
from shortlist.offer import OfferState, Prices, decide_offer, search_tools
from shortlist.offer._search import SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_NAME, SEARCH_TOOL_PARAMETERS
from shortlist.selection._base import Selector
from shortlist.selection._facade import DEFAULT, Shortlist

__all__ = [
    "SEARCH_TOOL_DESCRIPTION",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "NarrowerPolicy",
    "ToolChoice",
    "ToolNarrower",
    "TurnLog",
    "found_in",
    "tool_candidate",
]


#: The offer policies an integration supports (``deferred`` needs the provider's deferred loading).
NarrowerPolicy = Literal["stable", "per_turn"]


class ToolNarrower:
    """Narrow a framework's tools for each model call (the engine behind every integration).

    Args:
        shortlist: the binding to narrow with (selector, config, pins); default: a
            :class:`~shortlist.Shortlist` with ``selector``. Tools of MCP servers are narrowed
            like any tool (:meth:`Shortlist.for_tools`).
        selector: the selector when no ``shortlist`` is given (a name, an instance, ``None``
            for no narrowing, or ``DEFAULT``: the config's binding, else the built-in default).
        policy: ``stable`` (default: the tools are decided at the conversation's first user
            message and only grow, so the provider's prompt cache keeps the history behind
            them) or ``per_turn`` (re-selected on every user message). ``deferred`` is refused:
            it loads tools into the history, which a framework's tools list cannot do.
        k: the most tools ranked in per turn besides pins (and found tools).
        search_tool: offer ``find_tools`` when some tool is left out of the call.
        search_k: the most tools one ``find_tools`` call returns.
        on_event: a hook called with every event of this narrower's decisions.
        cache_size: turns remembered (a turn is a catalog and a user message, under ``stable``
            with the conversation's earlier turns); a tool round of a remembered turn reuses
            its decision.
        prices: cache prices for ``stable``'s widening and change rules (default :class:`Prices`).
        horizon: ``stable``: model calls a conversation is expected to make (see
            :func:`~shortlist.offer.decide_offer`).
    """

    def __init__(
        self,
        shortlist: Shortlist | None = None,
        *,
        selector: Selector | str | None = DEFAULT,
        policy: str = "stable",
        k: int = 5,
        search_tool: bool = True,
        search_k: int = 5,
        on_event: EventHook | None = None,
        cache_size: int = 256,
        prices: Prices | None = None,
        horizon: int = 5,
    ) -> None:
        if policy == "deferred":
            raise ConfigError(
                "policy 'deferred' is not supported by the framework integrations: it loads tools into the"
                " history (the provider's deferred loading), while an adapter only chooses the request's tools"
                " list; use 'stable' (the default: a fixed tools list that only grows) or 'per_turn'"
            )
        if policy not in ("stable", "per_turn"):
            raise ConfigError(f"policy must be 'stable' or 'per_turn', not {policy!r}")
        if horizon < 1:
            raise ConfigError("horizon must be at least 1")
        if k < 0:
            raise ConfigError("k must be non-negative (0: the selector's default)")
        if search_k < 1:
            raise ConfigError("search_k must be at least 1")
        if cache_size < 0:
            raise ConfigError("cache_size must be non-negative")
        self._owned = shortlist is None
        base = shortlist if shortlist is not None else Shortlist(selector=selector, on_event=on_event)
        self.shortlist = base.for_tools()  # live MCP tools ranked; one such binding per base
        self.policy: NarrowerPolicy = "stable" if policy == "stable" else "per_turn"
        self.prices = prices or Prices()
        self.horizon = horizon
        self.k = k
        self.search_tool = search_tool
        self.search_k = search_k
        self._extra_hooks: tuple[EventHook, ...] = (on_event,) if on_event and shortlist is not None else ()
        self._cache_size = cache_size
        self._catalogs: OrderedDict[Hashable, tuple[Candidate, ...]] = OrderedDict()
        self._turns: OrderedDict[tuple[int, str], TurnSelection] = OrderedDict()
        self._offers: OrderedDict[Hashable, tuple[OfferState, TurnSelection]] = OrderedDict()
        self._searches: OrderedDict[str, TurnLog] = OrderedDict()
        self._lock = threading.Lock()

    # -- the catalog ---------------------------------------------------------------------------

    def catalog(self, key: Hashable, build: Callable[[], Iterable[Candidate]]) -> tuple[Candidate, ...]:
        """The candidates of one tool list, built once per ``key`` (say, the tools' names and ids).

        Raises:
            ConfigError: a tool is named like the search tool.
        """
        with self._lock:
            hit = self._catalogs.get(key)
            if hit is not None:
                self._catalogs.move_to_end(key)
                return hit
        built = tuple(c for c in build() if c.id != SEARCH_TOOL_NAME or not self.search_tool)
        with self._lock:
            self._catalogs[key] = built
            while len(self._catalogs) > 16:
                self._catalogs.popitem(last=False)
        return built

    # -- a model call --------------------------------------------------------------------------

    def _cached(self, candidates: tuple[Candidate, ...], text: str) -> tuple[tuple[int, str], TurnSelection | None]:
        key = (id(candidates), text)
        with self._lock:
            hit = self._turns.get(key)
            if hit is not None:
                self._turns.move_to_end(key)
        return key, hit

    def _remember(self, key: tuple[int, str], turn: TurnSelection) -> None:
        if self._cache_size == 0:
            return
        with self._lock:
            self._turns[key] = turn
            while len(self._turns) > self._cache_size:
                self._turns.popitem(last=False)

    def _choice(self, candidates: tuple[Candidate, ...], turn: TurnSelection, found: Iterable[str]) -> ToolChoice:
        return self._offered(candidates, turn.ids, turn, found)

    def _offered(
        self, candidates: tuple[Candidate, ...], ids: Iterable[str], turn: TurnSelection, found: Iterable[str]
    ) -> ToolChoice:
        offered = set(ids)
        found_known = tuple(dict.fromkeys(n for n in found if n not in offered and n in _names(candidates)))
        offered.update(found_known)
        names = tuple(c.id for c in candidates if c.id in offered)
        return ToolChoice(names, turn, found_known, self.search_tool and len(names) < len(candidates))

    @staticmethod
    def _conversation(query: str | TurnLog, found: Iterable[str]) -> TurnLog:
        if isinstance(query, TurnLog):
            return replace(query, found=[*query.found, *found]) if found else query
        return TurnLog.of(query, found)

    def _stable_start(
        self, candidates: tuple[Candidate, ...], conv: TurnLog
    ) -> tuple[list[Hashable], int, OfferState, TurnSelection | None]:
        """The keys of the conversation's turns and the latest turn already decided (its state)."""
        turns = tuple(conv.turns)
        keys: list[Hashable] = [(id(candidates), turns[: i + 1]) for i in range(len(turns))]
        with self._lock:
            for i in range(len(keys) - 1, -1, -1):
                hit = self._offers.get(keys[i])
                if hit is not None:
                    self._offers.move_to_end(keys[i])
                    return keys, i + 1, hit[0], hit[1]
        return keys, 0, OfferState(), None

    def _stable_step(
        self,
        candidates: tuple[Candidate, ...],
        state: OfferState,
        selection: TurnSelection | None,
        turn: tuple[str, int, tuple[str, ...]],
    ) -> tuple[OfferState, TurnSelection | None]:
        """One user message of a ``stable`` conversation: :func:`decide_offer` on the state so far."""
        text, prefix_tokens, found_before = turn
        if state.turns:  # the tools searches found joined the block before this turn
            known = _names(candidates)
            inside = set(state.block)
            joined = tuple(n for n in dict.fromkeys(found_before) if n in known and n not in inside)
            state = replace(state, block=state.block + joined)
        offer = decide_offer(
            self.shortlist,
            state,
            Query(text, "tool", self.k),
            policy="stable",
            candidates=candidates,
            k=self.k,
            prefix_tokens=prefix_tokens,
            prices=self.prices,
            horizon=self.horizon,
            hooks=self._extra_hooks,
        )
        if offer.selection is not None and (selection is None or offer.changed):
            selection = offer.selection
        return offer.state, selection

    def _stable_remember(self, key: Hashable, value: tuple[OfferState, TurnSelection]) -> None:
        if self._cache_size == 0:
            return
        with self._lock:
            self._offers[key] = value
            while len(self._offers) > self._cache_size:
                self._offers.popitem(last=False)

    def _stable(self, candidates: tuple[Candidate, ...], conv: TurnLog) -> ToolChoice:
        keys, start, state, selection = self._stable_start(candidates, conv)
        for i in range(start, len(conv.turns)):
            state, selection = self._stable_step(candidates, state, selection, conv.turns[i])
            assert selection is not None  # the first turn always selects
            self._stable_remember(keys[i], (state, selection))
        assert selection is not None
        return self._offered(candidates, state.block, selection, conv.found)

    def choose(self, candidates: tuple[Candidate, ...], query: str | TurnLog, found: Iterable[str] = ()) -> ToolChoice:
        """The tools one model call is offered.

        Args:
            candidates: the catalog (from :meth:`catalog`; the same tuple on every call).
            query: the conversation so far (:class:`TurnLog`), or just the latest user
                message ("" falls back to every tool; a bare message is a conversation of one
                turn, so ``stable`` cannot keep its tools across turns).
            found: tool names earlier ``find_tools`` results named (:func:`found_in`), besides
                the conversation's own.
        """
        conv = self._conversation(query, found)
        if self.policy == "stable" and conv.turns:
            return self._stable(candidates, conv)
        key, turn = self._cached(candidates, conv.latest)
        if turn is None:
            turn = self.shortlist.select(
                Query(conv.latest, "tool", self.k), candidates, k=self.k, hooks=self._extra_hooks
            )
            self._remember(key, turn)
        return self._choice(candidates, turn, conv.found)

    async def achoose(
        self, candidates: tuple[Candidate, ...], query: str | TurnLog, found: Iterable[str] = ()
    ) -> ToolChoice:
        """Async twin of :meth:`choose` (the selector runs through ``aselect``; ``stable``'s decision in a thread)."""
        conv = self._conversation(query, found)
        if self.policy == "stable" and conv.turns:
            keys, start, _, _ = self._stable_start(candidates, conv)
            if start < len(keys):  # a new turn: the selector runs off the event loop
                return await asyncio.to_thread(self._stable, candidates, conv)
            return self._stable(candidates, conv)
        key, turn = self._cached(candidates, conv.latest)
        if turn is None:
            turn = await self.shortlist.aselect(
                Query(conv.latest, "tool", self.k), candidates, k=self.k, hooks=self._extra_hooks
            )
            self._remember(key, turn)
        return self._choice(candidates, turn, conv.found)

    # -- the escape hatch ----------------------------------------------------------------------

    def note_searches(self, call_ids: Iterable[str], conversation: TurnLog) -> None:
        """Remember the conversation a model call searched from, by its ``find_tools`` calls' ids.

        An adapter that cannot hand its ``find_tools`` tool the conversation (the framework gives
        a tool only its call's id) notes it when the model's answer asks for a search; the tool
        then finds it with :meth:`searched_from`, so concurrent conversations never mix. At most
        ``cache_size`` are kept (at least 64).
        """
        with self._lock:
            for call_id in call_ids:
                if call_id:
                    self._searches[call_id] = conversation
                    self._searches.move_to_end(call_id)
            while len(self._searches) > max(self._cache_size, 64):
                self._searches.popitem(last=False)

    def searched_from(self, call_id: str | None) -> TurnLog | None:
        """The conversation :meth:`note_searches` noted for a ``find_tools`` call (None: not noted)."""
        if not call_id:
            return None
        with self._lock:
            return self._searches.get(call_id)

    def search(
        self, candidates: tuple[Candidate, ...], query: str, conversation: TurnLog | None = None
    ) -> tuple[Candidate, ...]:
        """The tools ``find_tools`` returns for the model's ``query`` (a ``selection.tool_searched`` event).

        ``conversation``: the conversation the model searched from (what the adapter passed to
        :meth:`choose` for the call that asked). With it, the search ranks only what the model
        cannot call yet, as a :class:`~shortlist.offer.ToolSession`'s search does: the tools that
        call was offered and those earlier searches found are left out, so a result never spends
        a slot on a tool the model has, and asking again pages on through the rest; the latest
        user message ranks as a second query (``context`` of
        :func:`~shortlist.offer.search_tools`). Without it the whole catalog is ranked.
        """
        state, context = OfferState(), None
        if conversation is not None and conversation.turns:
            state = OfferState(block=self.choose(candidates, conversation).names)  # a remembered decision
            context = conversation.latest
        return search_tools(
            self.shortlist,
            state,
            query,
            policy="deferred",  # nothing to re-write: the found tools join the next call's tools
            candidates=candidates,
            k=self.search_k,
            context=context,
            hooks=self._extra_hooks,
        ).found

    @staticmethod
    def search_result(found: Sequence[Candidate]) -> str:
        """The JSON text a ``find_tools`` call answers (names and descriptions; :func:`found_in` reads it)."""
        if not found:
            return json.dumps({"found": [], "note": "no tool matches; describe the action differently"})
        return json.dumps(
            {
                "found": [{"name": c.name, "description": c.description} for c in found],
                "note": "these tools are callable from your next step on",
            },
            ensure_ascii=False,
        )

    def find(self, candidates: tuple[Candidate, ...], query: str, conversation: TurnLog | None = None) -> str:
        """:meth:`search` and :meth:`search_result` in one: what a ``find_tools`` tool returns."""
        return self.search_result(self.search(candidates, query, conversation))

    # -- measuring -----------------------------------------------------------------------------

    @staticmethod
    def definition_tokens(candidates: Iterable[Candidate]) -> int:
        """The tokens ``candidates``' definitions take in a request (:func:`shortlist._tokens.tool_tokens`)."""
        return tool_tokens(candidates)

    def close(self) -> None:
        """Close the selectors this narrower built (nothing when it was given a ``shortlist``)."""
        if self._owned:
            self.shortlist.registry.close()


_NAMES: dict[int, tuple[tuple[Candidate, ...], frozenset[str]]] = {}


def _names(candidates: tuple[Candidate, ...]) -> frozenset[str]:
    hit = _NAMES.get(id(candidates))
    if hit is not None and hit[0] is candidates:
        return hit[1]
    names = frozenset(c.id for c in candidates)
    if len(_NAMES) > 64:
        _NAMES.clear()
    _NAMES[id(candidates)] = (candidates, names)
    return names
