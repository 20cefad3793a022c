"""``ToolSession``: the tools one conversation offers, turn after turn (the library's and the runtime's).

A stateful convenience around the pure decisions: it keeps the conversation's
:class:`~shortlist.offer._state.OfferState`, decides each turn with
:func:`~shortlist.offer._policies.decide_offer`, searches with
:func:`~shortlist.offer._search.search_tools` and learns co-usage from the calls it is told of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from shortlist._events import EventHook
from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError
from shortlist.offer._policies import (
    DEFAULT_POLICY,
    DEFAULT_PREFETCH,
    DEFAULT_PREFETCH_COLD,
    DEFAULT_PREFETCH_FLAT,
    DEFAULT_PREFETCH_MAX,
    DEFAULT_PREFETCH_TOKENS,
    DEFAULT_SUITE_BOOST,
    OfferPolicy,
    check_policy,
    decide_offer,
)
from shortlist.offer._prices import Prices
from shortlist.offer._search import DEFAULT_SEARCH_TOKENS, DEFAULT_SUITE_SLOTS, search_tools
from shortlist.offer._state import Offer, OfferState
from shortlist.selection._cousage import CoUsage
from shortlist.selection._query import query_text

if TYPE_CHECKING:
    from shortlist.selection._facade import Shortlist

__all__ = ["ToolSession"]


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
        prefetch_cold: ``deferred``: while the conversation has called no tool yet, the prefetch
            loads this many more and a flat top widens this much further (default
            :data:`DEFAULT_PREFETCH_COLD`: the top 4, up to 6, then the top 2, up to 4).
        co_usage: tools called together, brought along by the prefetch and by searches; it learns
            from :meth:`record_calls`. ``"log"`` (default): a table of this conversation's own,
            layered on the counts of the shortlist's bound feedback log
            (:meth:`~shortlist.Shortlist.co_usage`), and none when no log is bound (a conversation
            alone seldom repeats a pair: on the development conversations its own calls gave
            nothing); None: no co-usage; a table: that one (a pack's conversations may share one).
        horizon: ``stable``: model calls the conversation is expected to make (see
            :func:`decide_offer`).
        hot: ``deferred``: the first turn's top tools kept in the fixed block (default 0).
        state: resume from a saved :class:`OfferState`.
        prefetch_max, prefetch_flat, suite_boost, prefetch_tokens: ``deferred``'s prefetch (see
            :func:`decide_offer`; ``prefetch_tokens`` defaults to :data:`DEFAULT_PREFETCH_TOKENS`).
        suite_slots: of a search's results, how many go to the best tools of the servers the
            conversation called (see :func:`~shortlist.offer._search.search_tools`; 0: off).
        search_context: rank a search with the last offered turn's user message as a second
            query (see :func:`~shortlist.offer._search.search_tools`' ``context``).
        search_tokens: a search's results after the first carry only definitions of at most this
            many tokens (default :data:`~shortlist.offer._search.DEFAULT_SEARCH_TOKENS`; None: any size).
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
        co_usage: CoUsage | Literal["log"] | None = "log",
        horizon: int = 5,
        hot: int = 0,
        state: OfferState | None = None,
        prefetch_max: int | None = DEFAULT_PREFETCH_MAX,
        prefetch_flat: float = DEFAULT_PREFETCH_FLAT,
        suite_boost: float = DEFAULT_SUITE_BOOST,
        suite_slots: int = DEFAULT_SUITE_SLOTS,
        search_context: bool = True,
        prefetch_cold: int = DEFAULT_PREFETCH_COLD,
        prefetch_tokens: int | None = DEFAULT_PREFETCH_TOKENS,
        search_tokens: int | None = DEFAULT_SEARCH_TOKENS,
    ) -> None:
        self.shortlist = shortlist
        if prefetch is None:
            prefetch = DEFAULT_PREFETCH if policy == "deferred" else 0
        if prefetch < 0:
            raise ConfigError("prefetch must be non-negative")
        self.prefetch = prefetch
        if co_usage == "log":
            log = shortlist.co_usage()
            co_usage = None if log is None else CoUsage(base=log)
        elif co_usage is not None and not isinstance(co_usage, CoUsage):
            raise ConfigError(f"co_usage must be a CoUsage, 'log' or None, not {co_usage!r}")
        self.co_usage: CoUsage | None = co_usage
        if horizon < 1:
            raise ConfigError("horizon must be at least 1")
        self.horizon = horizon
        if hot < 0:
            raise ConfigError("hot must be non-negative")
        self.hot = hot
        self.policy: OfferPolicy = check_policy(policy)
        if search_k < 1:
            raise ConfigError("search_k must be at least 1")
        self.k = k
        self.search_k = search_k
        self.prices = prices or Prices()
        self.state = state or OfferState()
        if (prefetch_max is not None and prefetch_max < 0) or prefetch_flat < 0 or suite_boost < 0 or prefetch_cold < 0:
            raise ConfigError("prefetch_max, prefetch_cold, prefetch_flat and suite_boost must be non-negative")
        self.prefetch_cold = prefetch_cold
        if any(n is not None and n < 0 for n in (prefetch_tokens, search_tokens)):
            raise ConfigError("prefetch_tokens and search_tokens must be non-negative or None")
        self.prefetch_tokens = prefetch_tokens
        self.search_tokens = search_tokens
        if suite_slots < 0:
            raise ConfigError("suite_slots must be non-negative")
        self.suite_slots = suite_slots
        self.search_context = search_context
        self._turn_text: str | None = None  # the last offered turn's user message
        self.prefetch_max = prefetch_max
        self.prefetch_flat = prefetch_flat
        self.suite_boost = suite_boost

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
            prefetch_max=self.prefetch_max,
            prefetch_flat=self.prefetch_flat,
            suite_boost=self.suite_boost,
            prefetch_cold=self.prefetch_cold,
            prefetch_tokens=self.prefetch_tokens,
            hooks=hooks,
        )
        self.state = offer.state
        self._turn_text = query_text(query)
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
        result = search_tools(
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
            suite_slots=self.suite_slots,
            context=self._turn_text if self.search_context else None,
            search_tokens=self.search_tokens,
            hooks=hooks,
        )
        self.state = result.state
        return result.found

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
