"""The offer policies: which tools a conversation's request carries this turn, one small function each.

* ``per_turn``: narrow on the latest user message every turn (the seed's behaviour; the tools
  block changes whenever the ranking does).
* ``stable``: the block is the pins, the search tool and the first turn's top ``k``; it changes
  only when a search found a tool the model needs, or when re-writing the cached prefix costs
  less than the search it saves; when carrying the whole catalog is cheaper than the changes
  narrowing will force (a long history), the whole catalog joins once.
* ``deferred``: the block (pins and the search tool, plus the first turn's ``hot`` top tools)
  never changes; each turn the likely tools are *prefetched* into the history, after the cached
  prefix, and the model searches for the rest.

:func:`decide_offer` is pure: a function of the :class:`~shortlist.offer._state.OfferState` the
client carries and the turn's query. :func:`default_policy` is the one place that says which
policy a conversation in a given request format uses when none is named.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from shortlist._events import Event, EventHook, emit
from shortlist._tokens import definition_tokens
from shortlist._types import Candidate, Query, TurnSelection, candidate_group
from shortlist.errors import ConfigError
from shortlist.offer._prices import ROUND_TRIP_TOKENS, Prices, widened
from shortlist.offer._state import Offer, OfferChanged, OfferState, binding_hooks, bump, repaired
from shortlist.rankers._scale import same_tool, variant_key
from shortlist.selection._cousage import CoUsage

if TYPE_CHECKING:
    from shortlist.selection._facade import Shortlist

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_PREFETCH",
    "DEFAULT_PREFETCH_COLD",
    "DEFAULT_PREFETCH_FLAT",
    "DEFAULT_PREFETCH_MAX",
    "DEFAULT_PREFETCH_TOKENS",
    "DEFAULT_SUITE_BOOST",
    "FORMAT_POLICIES",
    "OFFER_POLICIES",
    "PREFETCH_QUERY",
    "OfferPolicy",
    "check_policy",
    "decide_offer",
    "default_policy",
    "distinct_tools",
    "groups_of",
    "suite_reranked",
    "without_long",
    "without_variants",
]

OfferPolicy = Literal["per_turn", "stable", "deferred"]
#: Every policy name, in the order the evaluation reports them.
OFFER_POLICIES: tuple[str, ...] = get_args(OfferPolicy)
#: The policy when no request format is known (a :class:`~shortlist.offer.ToolSession` of the
#: library): it measured best on cost and completeness in the conversation replay.
DEFAULT_POLICY: OfferPolicy = "deferred"
#: The policy per request format, when none is named: ``deferred`` everywhere. Anthropic's
#: Messages API defers tools (``defer_loading`` + ``tool_reference``) and so does the Responses
#: API (client ``tool_search`` over deferred functions); chat completions cannot defer, so found
#: tools are called through the fixed ``find_tools`` + ``call_tool`` bridge
#: (:mod:`shortlist.offer._bridge`) and the block never changes either. Measured on the
#: development conversations (docs/evaluation.md): the bridge costs 0.44x ``stable`` with no prior
#: history and 0.68x at 20k tokens, and completes more turns (0.976 against 0.971).
FORMAT_POLICIES: Mapping[str, OfferPolicy] = {
    "anthropic": "deferred",
    "openai": "deferred",
    "openai-responses": "deferred",
}
#: ``deferred``: how many of a turn's top tools are loaded into the history before the call, once
#: the conversation has called a tool (:data:`DEFAULT_PREFETCH_COLD` more before that).
DEFAULT_PREFETCH = 2
#: ``deferred``: the most tools prefetched when the top of the ranking is flat, and how close to
#: the first tool's score "flat" is (in the default hybrid's score units). Measured on the
#: development large catalog (1,004 tools) and the 128-tool set (docs/evaluation.md, "At scale"):
#: 0.12 preloads more of a turn than 0.05 (0.853 against 0.830 at 1,004 tools), completes more
#: turns there and costs about the same with no history, less behind one (fewer searches).
DEFAULT_PREFETCH_MAX = 4
DEFAULT_PREFETCH_FLAT = 0.12
#: ``deferred``: how many more tools the prefetch loads, and how much further a flat top widens it,
#: while the conversation has called no tool yet. Before the first call nothing says which servers
#: are in use, so recall comes first (the top 4, up to 6); after it the servers in use and the
#: co-usage companions concentrate the ranking, and a 3rd or 4th tool is called too rarely to pay
#: for its definition (the top 2, up to 4). Measured against one depth for every turn (3, up to 6):
#: the same complete turns at 0.975x-0.99x the cost (docs/evaluation.md, "Before and after the
#: first call").
DEFAULT_PREFETCH_COLD = 2
#: ``deferred``: past the first ``prefetch`` tools (the slots the cold start and a flat top add), a
#: tool is loaded only when its definition is at most this many tokens
#: (:func:`~shortlist._tokens.definition_tokens`, the estimate). Those slots are called about one time
#: in five, and a long definition costs more than the search it may save. Measured on the development
#: large catalog (1,004 tools) and the 128-tool set (docs/evaluation.md, "Big definitions in the deep
#: slots and a search's later results"): the same complete turns and preloaded share on both, for
#: 2.0% / 0.2% less at 1,004 tools and 0.6% / 0.1% less at 128 (no history / 20k tokens of it); 200
#: lowered the preloaded share, 300 and more saved less.
DEFAULT_PREFETCH_TOKENS = 250
#: What a tool of a server or suite the conversation already called gains on its score before the
#: prefetch is chosen (in the default hybrid's score units; a search takes it as an option, off).
DEFAULT_SUITE_BOOST = 0.3
#: The query of the synthetic ``find_tools`` call that carries a turn's prefetched tools (a
#: label for the model: the user's message is right above it, so it is not repeated).
PREFETCH_QUERY = "tools for the request above"


def default_policy(fmt: str | None = None) -> OfferPolicy:
    """The offer policy a conversation in request format ``fmt`` uses unless told otherwise.

    ``"anthropic"``, ``"openai-responses"`` and ``"openai"`` (chat completions, through the
    ``call_tool`` bridge): ``deferred``; None:
    :data:`DEFAULT_POLICY`. Runtime, ``/v1/offer``, ``shortlist offer`` all ask here.

    Raises:
        ConfigError: an unknown format.
    """
    if fmt is None:
        return DEFAULT_POLICY
    try:
        return FORMAT_POLICIES[fmt]
    except KeyError:
        raise ConfigError(f"request format must be one of {', '.join(FORMAT_POLICIES)}, not {fmt!r}") from None


def check_policy(policy: str) -> OfferPolicy:
    """``policy`` when it names an offer policy.

    Raises:
        ConfigError: it does not.
    """
    if policy not in OFFER_POLICIES:
        raise ConfigError(f"offer policy must be one of {', '.join(OFFER_POLICIES)}, not {policy!r}")
    return policy  # type: ignore[return-value]


@dataclass(slots=True)
class _Turn:
    """One decision's inputs, and its ranking once asked (a policy asks at most what it needs)."""

    shortlist: Shortlist
    query: str | Query | Sequence[Mapping[str, Any]]
    eligible: tuple[Candidate, ...]
    by_id: dict[str, Candidate]  # the eligible candidates by id
    state: OfferState  # repaired: only tools the catalog holds
    previous_block: tuple[str, ...]
    k: int | None
    hooks: Sequence[EventHook]

    @property
    def first(self) -> bool:
        return self.state.turns == 0

    def select(self, depth: int = 0) -> TurnSelection:
        """The turn's ranking: ``k`` deep, or ``depth`` when that is deeper (prefetch looks further)."""
        k = max(self.k or 0, depth) if depth else self.k
        return self.shortlist.select(self.query, self.eligible, k=k, hooks=self.hooks)

    def narrowed(self, depth: int = 0) -> tuple[TurnSelection, tuple[str, ...], str]:
        """Narrow this turn: the selection (``depth`` deep when deeper than ``k``), its block and the
        reason (``first_turn`` on turn one)."""
        turn = self.select(depth)
        reason = "narrowed" if turn.narrowed else f"fallback:{turn.fallback}"
        if self.first and turn.narrowed:
            reason = "first_turn"
        return turn, turn.ids, reason

    def kept(self) -> tuple[tuple[str, ...], str]:
        """The previous block, and whether the catalog changed it."""
        return self.state.block, ("unchanged" if self.state.block == self.previous_block else "catalog_changed")


@dataclass(frozen=True, slots=True)
class _Options:
    prefix_tokens: int
    prices: Prices
    prefetch: int
    co_usage: CoUsage | None
    horizon: int
    hot: int
    prefetch_max: int
    prefetch_flat: float
    suite_boost: float
    prefetch_cold: int = 0
    prefetch_tokens: int | None = None


#: A policy's answer: the block, why, the turn's selection (None when it kept the block unranked),
#: the tools prefetched into the history and, of those, the co-usage companions (the last ones).
_Decision = tuple[tuple[str, ...], str, TurnSelection | None, tuple[str, ...], tuple[str, ...]]


def _per_turn(t: _Turn, o: _Options) -> _Decision:
    turn, block, reason = t.narrowed()
    return block, reason, turn, (), ()


def _stable(t: _Turn, o: _Options) -> _Decision:
    if t.first:
        turn, block, reason = t.narrowed()
        if turn.narrowed:
            block, reason = widened(block, t.eligible, reason, o.prefix_tokens, o.prices, o.horizon)
        return block, reason, turn, (), ()
    block, reason = t.kept()
    turn = t.select()
    available = set(t.state.available)
    new = tuple(i for i in turn.ranked if i not in available)
    # the top-ranked tool missing from the block is the one a search would have to find
    p_needed = 1.0 if turn.ranked and turn.ranked[0] in new else 0.0
    if new and o.prices.worth_changing(o.prefix_tokens, p_needed=p_needed, round_trip_tokens=ROUND_TRIP_TOKENS):
        return t.state.block + new, "worth_changing", turn, (), ()
    return block, reason, None, (), ()


def _deferred(t: _Turn, o: _Options) -> _Decision:
    sure = o.prefetch  # loaded whatever their size; the slots after them are the deep ones
    if o.prefetch > 0 and o.prefetch_cold > 0 and not t.state.called:  # no evidence yet: recall first
        o = replace(o, prefetch=o.prefetch + o.prefetch_cold, prefetch_max=o.prefetch_max + o.prefetch_cold)
    selection: TurnSelection | None = None
    deep = o.prefetch > 0 and (o.suite_boost > 0 or o.prefetch_max > o.prefetch)
    if t.first:  # ranked as deep as the prefetch reads: the block keeps only pins and ``hot``
        selection, block, reason = t.narrowed(RERANK_DEPTH if deep else 0)
        if selection.narrowed:  # the fixed block: pins and the ``hot`` top tools
            keep = set(selection.pinned) | set(selection.ranked[: o.hot])
            block = tuple(i for i in block if i in keep)
    else:
        block, reason = t.kept()
    prefetched: tuple[str, ...] = ()
    companions: tuple[str, ...] = ()
    if o.prefetch > 0:
        turn = selection = selection or t.select(RERANK_DEPTH if deep else 0)
        if turn.narrowed and _informative(turn):
            available = set(t.state.available) | set(block)
            ranked = _likely(turn, t, o) if deep else list(turn.ranked[: o.prefetch])
            ranked = without_long(
                ranked,
                t.by_id,
                sure=sure,
                limit=o.prefetch_tokens,
                where="prefetch",
                hooks=binding_hooks(t.shortlist, t.hooks),
            )
            have = [t.by_id[i] for i in available if i in t.by_id]
            new = without_variants([t.by_id[i] for i in ranked if i not in available], have)
            prefetched = tuple(c.id for c in distinct_tools(new))  # one slot per tool, however many variants
            if o.co_usage is not None:  # tools usually called with the likely ones, never named
                exclude = available | set(prefetched)
                companions = tuple(i for i in o.co_usage.companions(ranked, exclude=exclude) if i in t.by_id)
                prefetched += companions
    return block, reason, selection, prefetched, companions


def groups_of(ids: Sequence[str], by_id: Mapping[str, Candidate]) -> set[str]:
    """The servers or suites (:func:`~shortlist._types.candidate_group`) of the tools ``ids`` that ``by_id`` holds."""
    groups = {candidate_group(by_id[i]) for i in ids if i in by_id}
    return {g for g in groups if g is not None}


def suite_reranked(
    turn: TurnSelection, by_id: Mapping[str, Candidate], used: Sequence[str], boost: float
) -> tuple[list[str], dict[str, float]]:
    """``turn``'s ranking with ``boost`` added to the tools of a server or suite among ``used``'s.

    Returns the new order (ties keep the ranking's order) and the boosted scores. A ranking without
    scores (a selector that returns ids only) keeps its order: the boost is in score units, and on
    scores that are all missing it would put every tool of a server in use above the selector's picks.
    """
    scores = {i: turn.scores.get(i, 0.0) for i in turn.ranked}
    if boost > 0 and used and turn.scores:
        groups = groups_of(used, by_id)
        for i in scores:
            if candidate_group(by_id[i]) in groups:
                scores[i] += boost
    return sorted(turn.ranked, key=lambda i: -scores[i]), scores


#: How deep the ranking is read when the servers in use or a flat top may reorder or widen the
#: prefetch.
RERANK_DEPTH = 20


def _likely(turn: TurnSelection, t: _Turn, o: _Options) -> list[str]:
    """The turn's likely tools, ``prefetch`` of them, more while the top is flat.

    The conversation's own evidence weighs in: a tool of a server (suite, MCP server, namespace)
    whose tools the conversation already called gains ``suite_boost`` on its score, so a plain
    ``cd`` of the file system in use outranks a verbose tool of a server never touched. Then the
    top ``prefetch`` are loaded, and up to ``prefetch_max`` while a tool scores within
    ``prefetch_flat`` of the first: a flat top means the ranking cannot tell, and recall is cheaper
    than a search round trip. A ranking without scores (ids only) is read as it is: its top ``prefetch``.
    """
    order, scores = suite_reranked(turn, t.by_id, t.state.called, o.suite_boost)
    n = min(o.prefetch, len(order))
    if not turn.scores:  # no scores, no flatness to read: the selector's top ``prefetch``
        return order[:n]
    top = scores[order[0]] if order else 0.0
    while n < min(o.prefetch_max, len(order)) and scores[order[n]] >= top - o.prefetch_flat:
        n += 1
    return order[:n]


def without_variants(candidates: Sequence[Candidate], have: Sequence[Candidate]) -> tuple[Candidate, ...]:
    """``candidates`` without the variants of a tool the model already has
    (:func:`~shortlist.rankers._scale.same_tool`: the same name, versions aside, and half the description
    terms): another server's ``read_file`` adds nothing to the one it can call, and in a catalog of many
    servers its variants are what a search or a prefetch would otherwise fill its slots with."""
    if not have:
        return tuple(candidates)
    by_key: dict[tuple[str, ...], list[Candidate]] = {}
    for h in have:
        by_key.setdefault(variant_key(h.name), []).append(h)
    # one dictionary lookup for most candidates (a whole catalog per search): no name they share
    return tuple(
        c
        for c in candidates
        if (named := by_key.get(variant_key(c.name))) is None or not any(same_tool(c, h) for h in named)
    )


def distinct_tools(candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
    """``candidates`` in order, each tool once: a candidate that is a variant
    (:func:`~shortlist.rankers._scale.same_tool`) of an earlier one is left out. A ranking that does not
    collapse variants itself (BM25, the embedding ranker, an exec selector) puts three servers' copies of
    one ``read_file`` side by side; a prefetch or a search page would spend three slots on one tool."""
    kept: list[Candidate] = []
    by_key: dict[tuple[str, ...], list[Candidate]] = {}
    for c in candidates:
        named = by_key.setdefault(variant_key(c.name), [])
        if not any(same_tool(c, k) for k in named):
            named.append(c)
            kept.append(c)
    return tuple(kept)


def without_long(
    ids: Sequence[str],
    by_id: Mapping[str, Candidate],
    *,
    sure: int,
    limit: int | None,
    where: str,
    hooks: tuple[EventHook, ...] = (),
) -> list[str]:
    """``ids`` without those past the first ``sure`` whose definitions are over ``limit`` tokens
    (:func:`~shortlist._tokens.definition_tokens`, the estimate; None: ``ids`` as they are). What
    is left out is named by a :class:`DefinitionsTrimmed` event (``where``: ``prefetch`` or
    ``search``): the prefetch's deep slots and a search page's later results are where a long
    definition costs more than it is likely to save."""
    if limit is None:
        return list(ids)
    kept: list[str] = []
    skipped: dict[str, int] = {}
    for n, i in enumerate(ids):
        c = by_id.get(i)
        size = definition_tokens(c) if n >= sure and c is not None else 0
        if size > limit:
            skipped[i] = size
        else:
            kept.append(i)
    if skipped:
        emit(
            DefinitionsTrimmed(where=where, skipped=tuple(skipped), tokens=tuple(skipped.values()), limit=limit),
            hooks=hooks,
        )
    return kept


@dataclass(frozen=True, kw_only=True)
class DefinitionsTrimmed(Event):
    """Likely tools were left out of a prefetch (``where``: ``prefetch``) or a search page (``search``):
    their definitions are over the limit (``prefetch_tokens`` / ``search_tokens``) past the first
    results; a search (again) still finds them."""

    name: ClassVar[str] = "selection.definitions_trimmed"
    area: ClassVar[str] = "selection"
    level: int = logging.DEBUG
    where: str = ""
    skipped: tuple[str, ...] = ()
    tokens: tuple[int, ...] = ()
    limit: int = 0


_POLICIES: dict[str, Callable[[_Turn, _Options], _Decision]] = {
    "per_turn": _per_turn,
    "stable": _stable,
    "deferred": _deferred,
}


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
    prefetch_max: int | None = DEFAULT_PREFETCH_MAX,
    prefetch_flat: float = DEFAULT_PREFETCH_FLAT,
    suite_boost: float = DEFAULT_SUITE_BOOST,
    prefetch_cold: int = 0,
    prefetch_tokens: int | None = DEFAULT_PREFETCH_TOKENS,
    hooks: Sequence[EventHook] = (),
) -> Offer:
    """Decide this turn's offer from the conversation's ``state`` (pure: nothing is stored).

    Args:
        shortlist: the binding (catalog, selector, pins) to narrow with, under its tool policy
            (:meth:`~shortlist.Shortlist.for_tools`: ``mcp__`` tools are ranked, not pinned).
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
            (:data:`~shortlist.offer._prices.MISS_RATE` of them) cost more than carrying the whole
            catalog, ``stable`` offers the whole catalog instead of narrowing.
        prefetch_max: ``deferred``: the most tools prefetched when the top of the ranking is
            flat (None: ``prefetch``, never more).
        prefetch_flat: ``deferred``: how close to the first tool's score a tool must be to be
            prefetched beyond ``prefetch`` (up to ``prefetch_max``).
        suite_boost: ``deferred``: added to the score of a tool whose server or suite
            (:func:`~shortlist._types.candidate_group`) the conversation already called, before
            the prefetch is chosen (0: the ranking's order; scores are in the selector's units,
            the default is measured on the default hybrid).
        prefetch_cold: ``deferred``: while the conversation has called no tool (``state.called``
            is empty), the prefetch loads this many more and widens this much further (0: the
            same depth on every turn; :class:`~shortlist.offer.ToolSession` defaults to
            :data:`DEFAULT_PREFETCH_COLD`). Ignored when ``prefetch`` is 0.
        prefetch_tokens: ``deferred``: past the first ``prefetch`` tools, a tool is prefetched only
            when its definition is at most this many tokens (the estimate); a longer one is left
            to a search (a ``selection.definitions_trimmed`` event names it). None: any size.
        hooks: extra event hooks for this call.

    Raises:
        ConfigError: a negative ``prefetch_tokens``.
    """
    policy = check_policy(policy)
    if prefetch_tokens is not None and prefetch_tokens < 0:
        raise ConfigError(f"prefetch_tokens must be non-negative or None, not {prefetch_tokens}")
    shortlist = shortlist.for_tools()  # a host's mcp__ tools are offered like any tool, not pinned
    eligible = tuple(shortlist.catalog if candidates is None else candidates)
    by_id = {c.id: c for c in eligible}
    turn = _Turn(
        shortlist=shortlist,
        query=query,
        eligible=eligible,
        by_id=by_id,
        state=repaired(shortlist, state, by_id.keys(), hooks),
        previous_block=state.block,
        k=k,
        hooks=hooks,
    )
    prefetch = prefetch if policy == "deferred" else 0
    options = _Options(
        prefix_tokens,
        prices or Prices(),
        prefetch,
        co_usage,
        horizon,
        hot,
        max(prefetch, prefetch_max or 0),
        prefetch_flat,
        suite_boost,
        prefetch_cold,
        prefetch_tokens,
    )
    block, reason, selection, prefetched, companions = _POLICIES[policy](turn, options)
    state = turn.state
    loaded = tuple(i for i in (*state.loaded, *prefetched) if i in by_id and i not in block)
    changed = not turn.first and block != turn.previous_block
    new_state = replace(
        state, block=block, loaded=loaded, turns=bump(state.turns), changes=bump(state.changes, 1 if changed else 0)
    )
    if changed:
        emit(
            OfferChanged(
                policy=policy,
                reason=reason,
                added=tuple(i for i in block if i not in turn.previous_block),
                removed=tuple(i for i in turn.previous_block if i not in block),
                prefix_tokens=prefix_tokens,
            ),
            hooks=binding_hooks(shortlist, hooks),
        )
    search_tool = policy != "per_turn"
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
        companions=companions,
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
