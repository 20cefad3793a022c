"""Per-turn narrowing: given a selector, a query and the eligible candidates, what surfaces.

This is the one place that implements the runtime semantics of seed 000 (and fixes the
reference's gaps, see ``docs/architecture.md``):

* the selector is asked once per turn, with only the rankable candidates (pinned ones and
  wildcard entries are never sent: they surface regardless);
* "include all eligible" when there is no selector, the query is empty, nothing is
  rankable, the selector raises or times out, answers nothing, or answers only unknown ids;
* unknown ids in a mixed answer are dropped (and reported), duplicates collapse, the
  answer is capped to ``query.k`` when ``k > 0``;
* a deliberate abstention surfaces the pins only when the policy says ``on_abstain="pins"``;
* every fallback is a :class:`~shortlist._events.SelectionFallback` event — never silent.

It holds no state between turns, so concurrent turns cannot see each other's narrowing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import time
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from shortlist import _telemetry as telemetry
from shortlist._events import EventHook, SelectionFallback, SelectionMade, SelectorRejectedIds, emit, event_hooks
from shortlist._memo import IdentityMemo
from shortlist._types import FALLBACK_REASONS, Candidate, Query, Selection, TurnSelection
from shortlist.errors import SelectorError, SelectorTimeout, UsageError
from shortlist.rankers._timeout import with_deadline
from shortlist.selection._base import Selector

__all__ = [
    "DEFAULT_PIN_NAMESPACES",
    "FALLBACK_REASONS",
    "NarrowingPolicy",
    "PinPolicy",
    "TurnSelection",
    "anarrow",
    "expand_tool_patterns",
    "is_wildcard",
    "live_tool_policy",
    "narrow",
    "rankable_part",
]

#: Namespaces (the part of a tool name before the first ``__``) that are never narrowed away.
DEFAULT_PIN_NAMESPACES: tuple[str, ...] = ("skill", "a2a", "workflow", "mcp", "memory", "image", "video")

# Reasons that are a normal part of a conversation, not a problem: logged at DEBUG.
_BENIGN = frozenset({"no_selector", "empty_query", "no_candidates"})

Order = Literal["ranking", "source"]
OnAbstain = Literal["all", "pins"]


def is_wildcard(candidate_id: str) -> bool:
    """Return True for a pattern entry such as ``mcp__server__*`` (never a rankable candidate)."""
    return "*" in candidate_id or "?" in candidate_id or "[" in candidate_id


@dataclass(frozen=True, slots=True)
class PinPolicy:
    """Which candidates surface whatever the selector says.

    Args:
        namespaces: a candidate whose id starts with ``<namespace>__`` is pinned.
        always_include: ids or glob patterns (``fnmatch``) that are always pinned.
        pin_wildcards: wildcard entries (``mcp__srv__*``) survive narrowing (default True).
    """

    namespaces: tuple[str, ...] = DEFAULT_PIN_NAMESPACES
    always_include: tuple[str, ...] = ()
    pin_wildcards: bool = True
    # ``<namespace>__`` for each namespace that can open an id: an id's namespace is its text before its
    # first ``__``, which never holds ``__`` nor ends in ``_``. One prefix test per id (a search splits a
    # new pool of the whole catalog each time), the same answer as reading the id's namespace.
    _prefixes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        opens = tuple(f"{ns}__" for ns in self.namespaces if "__" not in ns and not ns.endswith("_"))
        object.__setattr__(self, "_prefixes", opens)

    def is_pinned(self, candidate_id: str) -> bool:
        """Return True if ``candidate_id`` must surface on every turn."""
        if self.pin_wildcards and is_wildcard(candidate_id):
            return True
        if candidate_id.startswith(self._prefixes):
            return True
        return any(
            candidate_id == pattern or fnmatch.fnmatchcase(candidate_id, pattern) for pattern in self.always_include
        )


@dataclass(frozen=True, slots=True)
class NarrowingPolicy:
    """How a turn is narrowed.

    Args:
        pins: the pin policy.
        order: ``"ranking"`` keeps the selector's order (pins after it, in source order);
            ``"source"`` keeps the catalog order for everything.
        on_abstain: when the selector abstains (nothing fits), ``"all"`` surfaces every
            eligible candidate (the safe default), ``"pins"`` surfaces only the pins.
        timeout_s: a deadline on the selector (None: none), applied as a
            :class:`~shortlist.rankers._timeout.TimeoutSelector` around it
            (:func:`~shortlist.rankers._timeout.with_deadline`), which also warms a ranker
            for a new catalog outside it; an external selector's own ``timeout_ms`` still applies.
    """

    pins: PinPolicy = field(default_factory=PinPolicy)
    order: Order = "ranking"
    on_abstain: OnAbstain = "all"
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.order not in ("ranking", "source"):
            raise UsageError(f"order must be 'ranking' or 'source', got {self.order!r}")
        if self.on_abstain not in ("all", "pins"):
            raise UsageError(f"on_abstain must be 'all' or 'pins', got {self.on_abstain!r}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise UsageError("timeout_s must be positive or None")


def live_tool_policy(base: NarrowingPolicy | None = None) -> NarrowingPolicy:
    """``base`` as the policy for tools of live sources (runtime, MCP proxy, service).

    Tools of live MCP servers are narrowed like any tool, so ``mcp`` is removed from the pinned
    namespaces; only wildcard entries (``mcp__srv__*``) pin a server's tools, as a set
    (``pin_wildcards=True`` is forced).
    """
    base = base or NarrowingPolicy()
    namespaces = tuple(n for n in base.pins.namespaces if n != "mcp")
    return replace(base, pins=replace(base.pins, namespaces=namespaces, pin_wildcards=True))


def expand_tool_patterns(entries: Iterable[str], tools: Iterable[str]) -> list[str]:
    """Expand ``allowed_tools``-style ``entries`` against the concrete ``tools``.

    A wildcard entry (``mcp__git__*``) becomes every matching tool, as a set (sorted by name); a
    plain entry is kept when it is one of ``tools``. The result keeps the entries' order without
    duplicates. ``tools`` given as a set (a ``frozenset``, a dict's keys) is used as it is: a caller
    that expands against one large catalog turn after turn keeps its names in one.
    """
    known = tools if isinstance(tools, AbstractSet) else set(tools)
    out: dict[str, None] = {}
    for entry in entries:
        if is_wildcard(entry):
            for t in sorted(t for t in known if fnmatch.fnmatchcase(t, entry)):
                out[t] = None
        elif entry in known:
            out[entry] = None
    return list(out)


@dataclass(frozen=True, slots=True)
class _Split:
    eligible: tuple[Candidate, ...]
    rankable: tuple[Candidate, ...]
    pinned: tuple[Candidate, ...]
    rankable_by_id: dict[str, Candidate]


# The split of a catalog depends only on the catalog and the pins. A catalog passed as a
# tuple (what ``Shortlist`` and the server hold) is split once and reused on every turn:
# at 10,000 candidates the pin checks would otherwise cost more than the ranking.
_SPLITS: IdentityMemo[_Split] = IdentityMemo(16)


def _split(candidates: Sequence[Candidate], pins: PinPolicy) -> _Split:
    if isinstance(candidates, tuple):
        hit = _SPLITS.get(candidates, pins)
        if hit is not None:
            return hit
    seen: set[str] = set()
    eligible: list[Candidate] = []
    rankable: list[Candidate] = []
    pinned: list[Candidate] = []
    is_pinned = pins.is_pinned
    for c in candidates:
        if c.id in seen:  # the first definition of an id wins
            continue
        seen.add(c.id)
        eligible.append(c)
        (pinned if is_pinned(c.id) else rankable).append(c)
    split = _Split(tuple(eligible), tuple(rankable), tuple(pinned), {c.id: c for c in rankable})
    if isinstance(candidates, tuple):
        _SPLITS.put(candidates, split, pins)
    return split


def rankable_part(candidates: Sequence[Candidate], policy: NarrowingPolicy | None = None) -> tuple[Candidate, ...]:
    """What a turn over ``candidates`` hands its selector: the first of each id, pinned ones left out
    (a warm-up prepares exactly this, so the turn finds it prepared)."""
    return _split(candidates, (policy or NarrowingPolicy()).pins).rankable


def _precheck(selector: Selector | None, query: Query, split: _Split) -> str | None:
    if selector is None:
        return "no_selector"
    if not query.text.strip():
        return "empty_query"
    if not split.rankable:
        return "no_candidates"
    return None


def _fallback(
    query: Query,
    split: _Split,
    reason: str,
    *,
    selector: Selector | None,
    elapsed_ms: float = 0.0,
    error: BaseException | None = None,
    rejected: tuple[str, ...] = (),
    hooks: Sequence[EventHook] = (),
) -> TurnSelection:
    stderr_tail = error.stderr_tail if isinstance(error, SelectorError) else ""
    message = f"{type(error).__name__}: {error}" if error is not None else ""
    emit(
        SelectionFallback(
            reason=reason,
            selector=selector.name if selector else "",
            kind=query.kind,
            latency_ms=round(elapsed_ms, 3),
            error=message,
            stderr_tail=stderr_tail,
            level=logging.DEBUG if reason in _BENIGN else logging.WARNING,
        ),
        hooks=tuple(hooks),
    )
    return TurnSelection(
        query=query,
        surfaced=tuple(split.eligible),
        reason=message or reason,
        fallback=reason,
        selector=selector.name if selector else None,
        elapsed_ms=elapsed_ms,
        pinned=tuple(c.id for c in split.pinned),
        rejected=rejected,
    )


def _resolve(
    selector: Selector,
    query: Query,
    split: _Split,
    answer: Any,
    elapsed_ms: float,
    policy: NarrowingPolicy,
    hooks: Sequence[EventHook],
) -> TurnSelection:
    if answer is None:
        answer = Selection()
    if not isinstance(answer, Selection):
        err = TypeError(f"selector returned {type(answer).__name__}, expected Selection")
        return _fallback(query, split, "error", selector=selector, elapsed_ms=elapsed_ms, error=err, hooks=hooks)
    known = split.rankable_by_id
    ranked: list[str] = []
    scores: dict[str, float] = {}
    rejected: list[str] = []
    seen: set[str] = set()
    for pos, cid in enumerate(answer.selected):
        if cid in seen:
            continue
        seen.add(cid)
        if cid not in known:
            rejected.append(cid)
            continue
        ranked.append(cid)
        if answer.scores is not None:
            scores[cid] = answer.scores[pos]
    if rejected:
        emit(SelectorRejectedIds(selector=selector.name, kind=query.kind, ids=tuple(rejected)), hooks=tuple(hooks))
    if not ranked:
        if answer.abstained and policy.on_abstain == "pins" and not rejected:
            return _made(query, split, (), {}, answer, selector, elapsed_ms, policy, (), hooks)
        reason = "unknown_ids" if rejected else "empty"
        return _fallback(
            query, split, reason, selector=selector, elapsed_ms=elapsed_ms, rejected=tuple(rejected), hooks=hooks
        )
    if query.k > 0:
        ranked = ranked[: query.k]
    return _made(query, split, tuple(ranked), scores, answer, selector, elapsed_ms, policy, tuple(rejected), hooks)


def _made(
    query: Query,
    split: _Split,
    ranked: tuple[str, ...],
    scores: dict[str, float],
    answer: Selection,
    selector: Selector,
    elapsed_ms: float,
    policy: NarrowingPolicy,
    rejected: tuple[str, ...],
    hooks: Sequence[EventHook],
) -> TurnSelection:
    by_id = split.rankable_by_id
    chosen = set(ranked)
    pinned_ids = {c.id for c in split.pinned}
    if policy.order == "ranking":
        surfaced = [by_id[i] for i in ranked] + list(split.pinned)
    else:
        surfaced = [c for c in split.eligible if c.id in chosen or c.id in pinned_ids]
    emit(
        SelectionMade(
            selector=selector.name,
            kind=query.kind,
            candidates=len(split.rankable),
            selected=ranked,
            surfaced=len(surfaced),
            latency_ms=round(elapsed_ms, 3),
            reason=answer.reason,
        ),
        hooks=tuple(hooks),
    )
    return TurnSelection(
        query=query,
        surfaced=tuple(surfaced),
        ranked=ranked,
        scores={i: scores[i] for i in ranked if i in scores},
        reason=answer.reason or ("abstained" if answer.abstained and not ranked else ""),
        fallback=None,
        selector=selector.name,
        elapsed_ms=elapsed_ms,
        pinned=tuple(c.id for c in split.pinned),
        rejected=rejected,
        abstained=answer.abstained and not ranked,
    )


def _scoped(hooks: Sequence[EventHook]) -> contextlib.AbstractContextManager[None]:
    """``hooks`` as scoped hooks while the selector runs (nothing to do without hooks)."""
    return event_hooks(*hooks) if hooks else contextlib.nullcontext()


def narrow(
    selector: Selector | None,
    query: Query,
    candidates: Sequence[Candidate],
    policy: NarrowingPolicy | None = None,
    *,
    hooks: Sequence[EventHook] = (),
) -> TurnSelection:
    """Decide which candidates surface this turn. Never raises because of the selector.

    Args:
        selector: the bound selector, or None.
        query: the turn's query (its ``text`` is the latest user turn).
        candidates: the eligible candidates, in source order; the first of duplicate ids wins.
        policy: pins, order, abstention and timeout; defaults to :class:`NarrowingPolicy()`.
        hooks: extra event hooks for this call only.

    Returns:
        The :class:`TurnSelection` of this turn.
    """
    attributes = telemetry.selection_attributes(query.kind, query.k, selector.name if selector else None)
    with telemetry.span("shortlist.select", attributes) as span:  # an OpenTelemetry span when installed
        turn = _narrow(selector, query, candidates, policy, hooks=hooks)
        telemetry.record_selection(span, turn, candidates)
        return turn


def _narrow(
    selector: Selector | None,
    query: Query,
    candidates: Sequence[Candidate],
    policy: NarrowingPolicy | None = None,
    *,
    hooks: Sequence[EventHook] = (),
) -> TurnSelection:
    policy = policy or NarrowingPolicy()
    split = _split(candidates, policy.pins)
    pre = _precheck(selector, query, split)
    if pre is not None or selector is None:
        return _fallback(query, split, pre or "no_selector", selector=selector, hooks=hooks)
    rankable = split.rankable
    start = time.perf_counter()
    try:
        with _scoped(hooks):  # what the selector's wrappers emit (fallback hops, breaker) reaches ``hooks`` too
            # the policy's deadline is a TimeoutSelector: on the selector's own pool (a hung selector
            # can exhaust only its own threads), its start-up work for a new catalog outside it
            answer: Any = with_deadline(selector, policy.timeout_s).select(query, rankable)
    except Exception as exc:  # contained: a failing selector never breaks a turn (reported as an event)
        return _failed(selector, query, split, exc, start, hooks)
    elapsed = (time.perf_counter() - start) * 1000
    return _resolve(selector, query, split, answer, elapsed, policy, hooks)


def _failed(
    selector: Selector, query: Query, split: _Split, exc: Exception, start: float, hooks: Sequence[EventHook]
) -> TurnSelection:
    """The fallback of a turn whose selector raised ``exc`` (sync and async alike): ``timeout`` for its
    deadline or a ``TimeoutError`` it raised itself, ``error`` for anything else."""
    elapsed = (time.perf_counter() - start) * 1000
    if isinstance(exc, TimeoutError):  # the selector's own, reported as its deadline would be
        exc = SelectorTimeout(f"selector raised TimeoutError: {exc}".rstrip(": "), selector=selector.name)
    reason = "timeout" if isinstance(exc, SelectorTimeout) else "error"
    return _fallback(query, split, reason, selector=selector, elapsed_ms=elapsed, error=exc, hooks=hooks)


async def anarrow(
    selector: Selector | None,
    query: Query,
    candidates: Sequence[Candidate],
    policy: NarrowingPolicy | None = None,
    *,
    hooks: Sequence[EventHook] = (),
) -> TurnSelection:
    """Async twin of :func:`narrow`; the selector runs through :meth:`Selector.aselect`."""
    attributes = telemetry.selection_attributes(query.kind, query.k, selector.name if selector else None)
    with telemetry.span("shortlist.select", attributes) as span:
        turn = await _anarrow(selector, query, candidates, policy, hooks=hooks)
        telemetry.record_selection(span, turn, candidates)
        return turn


async def _anarrow(
    selector: Selector | None,
    query: Query,
    candidates: Sequence[Candidate],
    policy: NarrowingPolicy | None = None,
    *,
    hooks: Sequence[EventHook] = (),
) -> TurnSelection:
    policy = policy or NarrowingPolicy()
    split = _split(candidates, policy.pins)
    pre = _precheck(selector, query, split)
    if pre is not None or selector is None:
        return _fallback(query, split, pre or "no_selector", selector=selector, hooks=hooks)
    rankable = split.rankable
    start = time.perf_counter()
    try:
        with _scoped(hooks):  # what the selector's wrappers emit reaches ``hooks`` too
            answer: Any = await with_deadline(selector, policy.timeout_s).aselect(query, rankable)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # contained: reported as an event, the turn goes on
        return _failed(selector, query, split, exc, start, hooks)
    elapsed = (time.perf_counter() - start) * 1000
    return _resolve(selector, query, split, answer, elapsed, policy, hooks)
