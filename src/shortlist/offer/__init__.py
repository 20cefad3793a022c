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

from shortlist.offer.policies import (
    DEFAULT_POLICY,
    DEFAULT_PREFETCH,
    DEFAULT_PREFETCH_FLAT,
    DEFAULT_PREFETCH_MAX,
    DEFAULT_SUITE_BOOST,
    FORMAT_POLICIES,
    OFFER_POLICIES,
    PREFETCH_QUERY,
    OfferPolicy,
    check_policy,
    decide_offer,
    default_policy,
)
from shortlist.offer.prices import MISS_RATE, PRICE_PRESETS, Prices
from shortlist.offer.search import (
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    SEARCH_TOOL_PARAMETERS,
    ToolSearch,
    ToolSearched,
    search_tools,
)
from shortlist.offer.session import ToolSession
from shortlist.offer.state import MAX_STATE_COUNT, Offer, OfferChanged, OfferState, OfferStateRepaired

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_PREFETCH",
    "DEFAULT_PREFETCH_FLAT",
    "DEFAULT_PREFETCH_MAX",
    "DEFAULT_SUITE_BOOST",
    "FORMAT_POLICIES",
    "MAX_STATE_COUNT",
    "MISS_RATE",
    "OFFER_POLICIES",
    "PREFETCH_QUERY",
    "PRICE_PRESETS",
    "SEARCH_TOOL_DESCRIPTION",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "Offer",
    "OfferChanged",
    "OfferPolicy",
    "OfferState",
    "OfferStateRepaired",
    "Prices",
    "ToolSearch",
    "ToolSearched",
    "ToolSession",
    "check_policy",
    "decide_offer",
    "default_policy",
    "search_tools",
]
