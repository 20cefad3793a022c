"""The offer: which tools a conversation's requests carry, turn after turn, and why.

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

The in-turn escape hatch is :func:`search_tools` (:meth:`ToolSession.search`): the model asks
for a tool it was not offered; the bound selector ranks the catalog minus what is already
available; a failing selector falls back to a dependency-free lexical ranking (never to the
whole catalog, which would flood the history). Each search is a :class:`ToolSearched` event, so
hosts can record it in the feedback log.

Modules: ``prices`` (cache prices and the cost rules), ``state`` (the JSON-ready state and one
turn's offer), ``policies`` (one function per policy, :func:`decide_offer`, the default per
request format), ``search`` (the one tool search), ``session`` (:class:`ToolSession`).
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.offer._policies import OfferPolicy, decide_offer
    from shortlist.offer._prices import PRICE_PRESETS, Prices
    from shortlist.offer._search import search_tools
    from shortlist.offer._session import ToolSession
    from shortlist.offer._state import OfferState

__all__ = [
    "PRICE_PRESETS",
    "OfferPolicy",
    "OfferState",
    "Prices",
    "ToolSession",
    "decide_offer",
    "search_tools",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "OfferPolicy": "shortlist.offer._policies",
    "OfferState": "shortlist.offer._state",
    "PRICE_PRESETS": "shortlist.offer._prices",
    "Prices": "shortlist.offer._prices",
    "ToolSession": "shortlist.offer._session",
    "decide_offer": "shortlist.offer._policies",
    "search_tools": "shortlist.offer._search",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "Offer": ("shortlist.offer._state", None),
    "DEFAULT_POLICY": ("shortlist.offer._policies", None),
    "DEFAULT_PREFETCH": ("shortlist.offer._policies", None),
    "DEFAULT_PREFETCH_FLAT": ("shortlist.offer._policies", None),
    "DEFAULT_PREFETCH_MAX": ("shortlist.offer._policies", None),
    "DEFAULT_SUITE_BOOST": ("shortlist.offer._policies", None),
    "FORMAT_POLICIES": ("shortlist.offer._policies", None),
    "MAX_STATE_COUNT": ("shortlist.offer._state", None),
    "MISS_RATE": ("shortlist.offer._prices", None),
    "OFFER_POLICIES": ("shortlist.offer._policies", None),
    "OfferChanged": ("shortlist.offer._state", None),
    "OfferStateRepaired": ("shortlist.offer._state", None),
    "PREFETCH_QUERY": ("shortlist.offer._policies", None),
    "SEARCH_TOOL_DESCRIPTION": ("shortlist.offer._search", None),
    "SEARCH_TOOL_NAME": ("shortlist.offer._search", None),
    "SEARCH_TOOL_PARAMETERS": ("shortlist.offer._search", None),
    "ToolSearch": ("shortlist.offer._search", None),
    "ToolSearched": ("shortlist.offer._search", None),
    "check_policy": ("shortlist.offer._policies", None),
    "default_policy": ("shortlist.offer._policies", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
