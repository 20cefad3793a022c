"""The model's tool search, in one place: the tool's name and schema, and what a search returns.

Every surface that lets a model ask for a tool it was not offered calls :func:`search_tools`:
the runtime's and the integrations' ``find_tools``, ``POST /v1/offer/search`` and the MCP proxy.
The bound selector ranks the catalog minus what the conversation can already call, so a search
never returns a tool the model has and a repeated search pages on through the rest; a failing
selector falls back to a dependency-free lexical ranking (never to the whole catalog, which would
flood the history; when no tool shares a word with the query either, the search finds nothing).
Each search is a :class:`ToolSearched` event, so hosts can record it in the feedback log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from shortlist._events import Event, EventHook, emit
from shortlist._types import Candidate, Query, TurnSelection, candidate_group
from shortlist.errors import ConfigError
from shortlist.offer._policies import (
    RERANK_DEPTH,
    OfferPolicy,
    check_policy,
    distinct_tools,
    groups_of,
    suite_reranked,
    without_long,
    without_variants,
)
from shortlist.offer._prices import Prices, widened
from shortlist.offer._state import OfferChanged, OfferState, binding_hooks, bump, repaired
from shortlist.selection._cousage import CoUsage
from shortlist.selection._narrowing import narrow

if TYPE_CHECKING:
    from shortlist.selection._facade import Shortlist

__all__ = [
    "CONTEXT_PENALTY",
    "DEFAULT_SEARCH_TOKENS",
    "DEFAULT_SUITE_SLOTS",
    "SEARCH_TOOL_DEFINITION",
    "SEARCH_TOOL_DESCRIPTION",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "ToolSearch",
    "ToolSearched",
    "search_tools",
]

#: The name of the tool-search tool every surface offers (runtime, service, integrations, MCP proxy).
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
#: The search tool as offered to the model (its definition is part of the tools block).
SEARCH_TOOL_DEFINITION: dict[str, Any] = {
    "name": SEARCH_TOOL_NAME,
    "description": SEARCH_TOOL_DESCRIPTION,
    "parameters": SEARCH_TOOL_PARAMETERS,
}

#: Of a search's ``k`` results, how many are kept for the best-ranked tools of the servers or suites
#: the conversation already called (when the ranking has any): measured on the development large
#: catalog (1,004 tools) and the 128-tool set (docs/evaluation.md, "At scale"), both complete more
#: turns for less.
DEFAULT_SUITE_SLOTS = 2
#: How deep a search's ranking is read for those slots: a vague query ("May I have a look at")
#: ranks the plain ``cat`` of the server in use far down among 1,004 tools (20 measured worse than
#: 50, and 200 better: docs/evaluation.md, "At scale").
SUITE_SLOTS_DEPTH = 200
#: Of a search's results, those after the first carry only definitions of at most this many tokens
#: (:func:`~shortlist._tokens.definition_tokens`, the estimate); the first is always the ranking's
#: own, whatever its size, and a longer one is found by the next search. Looser than the prefetch's
#: :data:`~shortlist.offer._policies.DEFAULT_PREFETCH_TOKENS`: the model asked for these. Measured
#: on the development large catalog (1,004 tools) and the 128-tool set (docs/evaluation.md, "Big
#: definitions in the deep slots and a search's later results"): the same complete turns for 1.8% /
#: 0.2% less at 1,004 tools (no history / 20k of it; 3.7% less with the less obliging model), nothing
#: changed at 128; 250 lost a turn there and 200 one at 1,004.
DEFAULT_SEARCH_TOKENS = 300
#: A search reads its ranking this many pages deep, so that a page of ``k`` distinct tools is left when the
#: variants of one tool (:func:`~shortlist.offer._policies.distinct_tools`) take a single place.
VARIANT_PAGES = 3
#: What a tool's score from a search's ``context`` (the turn's user message) gives up against its
#: score from the model's query, in the default hybrid's units (docs/evaluation.md, "At scale").
CONTEXT_PENALTY = 0.05


@dataclass(frozen=True, kw_only=True)
class ToolSearched(Event):
    """The model searched for tools it was not offered (the in-turn escape hatch).

    ``found`` is the page, then the tools usually called with it; ``companions`` names those.
    """

    name: ClassVar[str] = "selection.tool_searched"
    area: ClassVar[str] = "selection"
    level: int = logging.INFO
    query: str = ""
    found: tuple[str, ...] = ()
    fallback: str | None = None
    companions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolSearch:
    """What one search found and the state after it.

    Attributes:
        found: the tools found, best first (now available to the model), co-used ones after.
        state: the conversation's state with them loaded (``deferred``) or in the block.
        fallback: why the bound selector was not used (a lexical ranking was), or None.
        selector: the selector that ranked (None when the lexical fallback did).
        scores: the ranking's score per found id, when it gave scores.
    """

    found: tuple[Candidate, ...]
    state: OfferState
    fallback: str | None = None
    selector: str | None = None
    scores: dict[str, float] | None = None


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
    suite_boost: float = 0.0,
    suite_slots: int = DEFAULT_SUITE_SLOTS,
    context: str | None = None,
    context_penalty: float = CONTEXT_PENALTY,
    search_tokens: int | None = DEFAULT_SEARCH_TOKENS,
    hooks: Sequence[EventHook] = (),
) -> ToolSearch:
    """Rank the tools the model cannot call yet for ``query``; return them and the new state.

    It narrows under ``shortlist``'s tool policy (:meth:`~shortlist.Shortlist.for_tools`: ``mcp__``
    tools are ranked, not pinned). Under ``deferred`` the found tools are *loaded* (their
    definitions enter the history); under ``stable`` and ``per_turn`` they join the tools block of
    the next request (a change that re-writes ``prefix_tokens``; when carrying the whole catalog for ``horizon`` calls
    costs less than the changes still expected, the whole catalog joins instead). With
    ``co_usage``, the tools usually called with the found ones come along. ``suite_boost``: the
    tools of the servers or suites the conversation called or loaded gain it before the top ``k``
    are taken (the ranking is read deeper for it). Off by default: a search is usually for what the
    servers in use lack, and with it on the 128-tool set completed 0.963 of turns instead of 0.976.
    ``suite_slots``: of the ``k`` results, the last ``suite_slots`` (at most ``k - 1``) go to the best-ranked tools
    (read :data:`SUITE_SLOTS_DEPTH` deep) of the servers or suites the conversation *called* not
    already among the first ones (the rest of the ranking fills them when it has none): in a large
    catalog a plain ``cat`` of the file system in use ranks 30th for "what's inside the report?",
    behind a page of verbose document tools, and the model that searched needs it (0: off).
    ``context``: the turn's user message, a second query: each tool scores the better of its
    score for ``query`` and its score for ``context`` less ``context_penalty``, so a short or vague
    query ("Let's delve into the report. How") still finds what the message asks for, and a
    precise one still wins (a tool it names ranks first). Ignored when it is ``query`` itself, and
    when either ranking has no scores.
    ``search_tokens``: the results after the first carry only definitions of at most this many
    tokens (the estimate; :data:`DEFAULT_SEARCH_TOKENS`); a longer one is left for the next search,
    which pages on to it (a ``selection.definitions_trimmed`` event names it). None: any size.

    Raises:
        ConfigError: a negative ``search_tokens``.
    """
    policy = check_policy(policy)
    if search_tokens is not None and search_tokens < 0:
        raise ConfigError(f"search_tokens must be non-negative or None, not {search_tokens}")
    shortlist = shortlist.for_tools()  # a host's mcp__ tools are offered like any tool, not pinned
    catalog = tuple(shortlist.catalog if candidates is None else candidates)
    by_id = {c.id: c for c in catalog}
    state = repaired(shortlist, state, by_id.keys(), hooks)
    available = set(state.available)
    # what the model cannot call yet, less the variants of what it can (another server's read_file)
    have = [by_id[i] for i in available if i in by_id]
    pool = without_variants([c for c in catalog if c.id not in available], have)
    if not pool or not query.strip() or k <= 0:
        emit(ToolSearched(query=query, found=(), fallback=None), hooks=binding_hooks(shortlist, hooks))
        return ToolSearch((), state)
    depth = max(k * VARIANT_PAGES, RERANK_DEPTH) if suite_boost > 0 else k * VARIANT_PAGES
    used = groups_of(state.called, by_id) if suite_slots > 0 else set()  # the servers the conversation called
    if used:
        depth = max(depth, SUITE_SLOTS_DEPTH)
    turn = shortlist.select(Query(query, "tool", depth), pool, k=depth, hooks=hooks)
    if context is not None and context.strip() and context.strip() != query.strip() and turn.narrowed:
        also = shortlist.select(Query(context, "tool", depth), pool, k=depth, hooks=hooks)
        turn = _with_context(turn, also, context_penalty)
    fallback, selector = turn.fallback, turn.selector
    if turn.narrowed and suite_boost > 0:
        # the servers of what the conversation called or can call (looked up in the whole catalog:
        # the pool holds none of them)
        order, scores = suite_reranked(turn, by_id, (*state.called, *state.available), suite_boost)
        pinned = [c for c in turn.surfaced if c.id not in scores]
        ranked = distinct_tools((*(by_id[i] for i in order), *pinned))
        found = _with_suite_slots(ranked, used, suite_slots, k)
    elif turn.narrowed:  # a page of distinct tools: three servers' read_file take one place
        found = _with_suite_slots(distinct_tools(turn.surfaced), used, suite_slots, k)
        scores = turn.scores
    else:  # never flood the history with the whole catalog: a cheap lexical ranking instead
        from shortlist.rankers._lexical import LexicalSelector

        lexical = narrow(  # the binding's pins (live MCP tools are rankable there, as for the selector)
            LexicalSelector(top_k=k),
            Query(query, "tool", k),
            pool,
            shortlist.policy,
            hooks=binding_hooks(shortlist, hooks),
        )
        # nothing shares a word with the query either: say so rather than return arbitrary tools
        found, scores = (lexical.surfaced[:k], lexical.scores) if lexical.narrowed else ((), {})
    if search_tokens is not None and found:
        small = set(
            without_long(
                [c.id for c in found],
                by_id,
                sure=1,
                limit=search_tokens,
                where="search",
                hooks=binding_hooks(shortlist, hooks),
            )
        )
        found = tuple(c for c in found if c.id in small)
    companions: tuple[str, ...] = ()
    if co_usage is not None and found:
        seen = {c.id for c in found}
        companions = tuple(
            i for i in co_usage.companions([c.id for c in found], exclude=available | seen) if i in by_id
        )
        found = (*found, *(by_id[i] for i in companions))
    ids = tuple(c.id for c in found)
    if policy == "deferred":
        state = replace(state, loaded=state.loaded + ids)
    elif ids:  # the found tools must join the tools block: a change, so make it the last one if cheaper
        block, reason = widened(state.block + ids, pool, "search", prefix_tokens, prices or Prices(), horizon)
        added = tuple(i for i in block if i not in state.block)
        state = replace(state, block=block, changes=bump(state.changes))
        emit(
            OfferChanged(policy=policy, reason=reason, added=added, prefix_tokens=prefix_tokens),
            hooks=binding_hooks(shortlist, hooks),
        )
    emit(
        ToolSearched(query=query, found=ids, fallback=fallback, companions=companions),
        hooks=binding_hooks(shortlist, hooks),
    )
    kept = {i: scores[i] for i in ids if i in scores}
    return ToolSearch(tuple(found), state, fallback, None if fallback else selector, kept or None)


def _with_suite_slots(ranked: Sequence[Candidate], used: set[str], slots: int, k: int) -> tuple[Candidate, ...]:
    """The first ``k`` of ``ranked``, the last ``slots`` of them taken by the best of the ``used``
    servers' tools not among the first ``k - slots`` (the first result is always the ranking's)."""
    slots = min(slots, k - 1)
    if not used or slots <= 0:
        return tuple(ranked[:k])
    head = list(ranked[: k - slots])
    taken = {c.id for c in head}
    rest = [c for c in ranked if c.id not in taken]
    suite = [c for c in rest if candidate_group(c) in used][:slots]
    chosen = {c.id for c in suite}
    fill = [c for c in rest if c.id not in chosen]
    return tuple((head + suite + fill)[:k])


def _with_context(turn: TurnSelection, also: TurnSelection, penalty: float) -> TurnSelection:
    """``turn`` re-ranked by each tool's better score: its own, or ``also``'s less ``penalty``
    (``turn`` itself when ``also`` did not rank or either has no scores)."""
    if not also.narrowed or not turn.scores or not also.scores:
        return turn
    scores = dict(turn.scores)
    for i, score in also.scores.items():
        scores[i] = max(scores.get(i, float("-inf")), score - penalty)
    by_id = {c.id: c for c in (*turn.surfaced, *also.surfaced)}
    ranked = tuple(sorted((i for i in scores if i in by_id), key=lambda i: -scores[i]))  # stable: the query's first
    pinned = tuple(c for c in turn.surfaced if c.id not in scores)
    return replace(turn, ranked=ranked, scores=scores, surfaced=(*(by_id[i] for i in ranked), *pinned))
