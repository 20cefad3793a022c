"""The model's view of a conversation, kept under the provider's cached prefix.

Providers cache a request by prefix, in the order tools → system → messages: one byte that
changes re-bills everything after it at the cache-write price (``docs/architecture.md``, "A
turn of the runtime"). So the runtime keeps the tools array and the system prompt the same on
every request of a conversation, and the messages append-only:

* **Context enters the history with its turn** (:class:`HistoryWindow`). The turn's grounding
  passages, ambient memories and newly surfaced skills go, as one text part, before the user's
  own text in that turn's user message, and stay there. Passages and memories are delimited
  and escaped by :func:`shortlist.retrieval._inject.render_blocks` (untrusted data that cannot
  close its block). A passage, memory or skill already in the history is not injected again,
  until a reduction removes the part that carried it.
* **Reduction in rare large steps** (:meth:`HistoryWindow.reduce`). Nothing happens while the
  history fits its budget; once it passes the budget it is reduced to a low-water mark
  (``low_water`` × the budget), so the next turns append to a stable prefix again. First old
  tool results and old injected context are cleared, oldest first, until the low-water mark
  holds (a cleared result keeps its call id, so pairs stay valid); then, if that is not enough,
  the :class:`~shortlist.reduction.ReductionStage` drops whole steps (relevance to the current
  turn), keeping the user's own messages while they fit. A ``find_tools`` exchange that loaded
  a tool the session still counts as loaded is never cleared or dropped. What the cleared and
  dropped messages stated is not all lost: the sentences that carry facts (numbers, ids, names:
  :mod:`shortlist.reduction._facts`) are kept on one fact sheet at the start of the history,
  carried through every later reduction.
* **Every request is compared with the previous one** (:class:`PrefixTracker`, in ``_prefix``):
  did the cached prefix survive, and if not, which part broke it and why.

This module holds :class:`HistoryWindow`; its parts live beside it: the prefix check
(``_prefix``), the fact sheet of what reductions removed (``_history_facts``), and the values
the window takes and reports (``_history_types``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from shortlist._events import Event, emit
from shortlist.errors import ConfigError, ContextBudgetError
from shortlist.runtime._history_facts import CLEARED_TOOL_RESULT, keep_facts, text_parts
from shortlist.runtime._history_types import (
    GROUNDING_PLACEMENTS,
    GroundingPlacement,
    InjectedContext,
    Reduction,
)
from shortlist.runtime._prefix import PrefixBroken, PrefixCheck, PrefixTracker

if TYPE_CHECKING:
    from shortlist.reduction import ContextFragment, ReductionStage
    from shortlist.reduction._facts import FactSheet

__all__ = [
    "CLEARED_TOOL_RESULT",
    "DEFAULT_LOW_WATER",
    "FACT_SHEET_SHARE",
    "GROUNDING_PLACEMENTS",
    "USER_SHARE",
    "GroundingPlacement",
    "HistoryReduced",
    "HistoryWindow",
    "InjectedContext",
    "PrefixBroken",
    "PrefixCheck",
    "PrefixTracker",
    "Reduction",
]

#: The share of the history budget a reduction brings the history down to.
DEFAULT_LOW_WATER = 0.5
#: The most of the low-water mark the fact sheet of removed messages may take.
FACT_SHEET_SHARE = 0.25
#: The most of the low-water mark the user's own messages (with what must stay anyway) may take and
#: all be kept verbatim, with a fact sheet; beyond it the oldest may go like any step (the fact sheet
#: keeps what they stated). Without a fact sheet they are kept while they fit the whole mark. Kept
#: without a bound, a long session's user turns fill the mark and the reductions come ever more
#: often (measured in docs/reduction.md, "Long sessions").
USER_SHARE = 0.5


@dataclass(frozen=True, kw_only=True)
class HistoryReduced(Event):
    """The history passed its budget and was reduced to the low-water mark (one prefix break)."""

    name: ClassVar[str] = "runtime.history_reduced"
    area: ClassVar[str] = "runtime"
    level: int = logging.INFO
    tokens_before: int | None = None
    tokens_after: int | None = None
    chars_before: int = 0
    chars_after: int = 0
    target_tokens: int | None = None
    target_chars: int | None = None
    cleared_tool_results: int = 0
    cleared_context: int = 0
    dropped_messages: int = 0
    kept_searches: int = 0
    kept_facts: int = 0


@dataclass
class _Sizes:
    tokens: list[int] = field(default_factory=list)
    chars: list[int] = field(default_factory=list)


class HistoryWindow:
    """The messages the model sees, append-only between rare reductions.

    Messages are OpenAI-style (the runtime's own form); a turn's injected context is the first
    text part of its user message.

    Args:
        max_tokens / max_chars: the history budget (None, None: never reduced).
        low_water: the share of the budget a reduction brings the history down to, in (0, 1].
        reduction: ``"relevance"`` or ``"newest"``: how the stage picks the steps it keeps.
        keep_facts: keep the facts that cleared and dropped messages stated on a fact sheet at
            the start of the history (:class:`~shortlist.reduction._facts.FactSheet`, at most
            :data:`FACT_SHEET_SHARE` of the low-water mark, oldest facts out first).

    Raises:
        ConfigError: ``low_water`` outside (0, 1], a non-positive budget or an unknown reducer.
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_chars: int | None = None,
        low_water: float = DEFAULT_LOW_WATER,
        reduction: str = "relevance",
        keep_facts: bool = True,
    ) -> None:
        if isinstance(low_water, bool) or not isinstance(low_water, int | float) or not 0 < low_water <= 1:
            raise ConfigError(f"low_water must be a share of the budget in (0, 1], not {low_water!r}")
        if reduction not in ("relevance", "newest"):
            raise ConfigError(f"reduction must be 'relevance' or 'newest', not {reduction!r}")
        for name, value in (("max_tokens", max_tokens), ("max_chars", max_chars)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be a positive integer or None, not {value!r}")
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.low_water = float(low_water)
        self.target_tokens = max(1, math.floor(max_tokens * low_water)) if max_tokens is not None else None
        self.target_chars = max(1, math.floor(max_chars * low_water)) if max_chars is not None else None
        # with a fact sheet, the messages go down to the mark less the sheet's share: both fit under it
        share = FACT_SHEET_SHARE if keep_facts else 0.0
        self._clear_tokens = max(1, math.floor(self.target_tokens * (1 - share))) if self.target_tokens else None
        self._clear_chars = max(1, math.floor(self.target_chars * (1 - share))) if self.target_chars else None
        self.stage: ReductionStage | None = None
        #: the same stage at the budget itself: the fallback when the turn alone passes the mark
        self.budget_stage: ReductionStage | None = None
        if max_tokens is not None or max_chars is not None:
            from shortlist.reduction import ReductionStage

            self.stage = ReductionStage.local(
                "history", max_tokens=self._clear_tokens, max_chars=self._clear_chars, selector=reduction
            )
            self.budget_stage = ReductionStage.local(
                "history", max_tokens=max_tokens, max_chars=max_chars, selector=reduction
            )
        self.facts: FactSheet | None = None
        if keep_facts and self.stage is not None:
            from shortlist.reduction._facts import FactSheet

            by_tokens = self.target_tokens is not None
            target = self.target_tokens if by_tokens else self.target_chars
            assert target is not None
            self.facts = FactSheet(
                self.stage.counter.count if by_tokens else len, max(1, math.floor(target * FACT_SHEET_SHARE))
            )
        self.messages: list[dict[str, Any]] = []
        #: reductions applied so far
        self.reductions = 0
        #: times the host replaced the history
        self.replacements = 0
        #: bumped whenever ``messages`` is changed other than by an append
        self.generation = 0
        self._injected: list[InjectedContext] = []

    # -- building ---------------------------------------------------------------------------------
    def replace(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Start over from ``messages`` (a host replaced the history): no injected part, no kept fact, is known."""
        self.messages = [dict(m) for m in messages]
        self._injected = []
        if self.facts is not None:  # what the old history stated is not this one's
            self.facts.clear()
        self.replacements += 1
        self.generation += 1

    def append(self, message: dict[str, Any]) -> None:
        """Append one message (an answer, a tool call, a result)."""
        self.messages.append(message)

    def append_user(self, message: Mapping[str, Any], context: InjectedContext | None = None) -> dict[str, Any]:
        """Append the turn's user message, with ``context`` as its first text part; return what was appended."""
        msg = dict(message)
        if context is not None and context.text:
            content = msg.get("content")
            parts: list[Any] = [{"type": "text", "text": context.text}]
            if isinstance(content, list):
                parts.extend(content)
            elif content:
                parts.append({"type": "text", "text": str(content)})
            msg["content"] = parts
            self._injected.append(context)
        self.messages.append(msg)
        return msg

    def present(self) -> InjectedContext:
        """Every passage, memory and skill the history still carries (the union of its injected parts)."""
        docs: set[str] = set()
        mems: set[str] = set()
        skills: set[str] = set()
        for part in self._injected:
            docs |= part.documents
            mems |= part.memories
            skills |= part.skills
        return InjectedContext("", frozenset(docs), frozenset(mems), frozenset(skills))

    # -- measuring --------------------------------------------------------------------------------
    def _fragments(self, messages: Sequence[Mapping[str, Any]]) -> list[ContextFragment]:
        from shortlist.reduction import openai_to_fragments

        return openai_to_fragments(messages)

    def _sizes(self, fragments: Sequence[ContextFragment]) -> _Sizes:
        assert self.stage is not None
        count = self.stage.counter.count
        tokens = [count(f.text) for f in fragments] if self.max_tokens is not None else [0] * len(fragments)
        return _Sizes(tokens, [len(f.text) for f in fragments])

    @staticmethod
    def _fits(tokens: int, chars: int, max_tokens: int | None, max_chars: int | None) -> bool:
        return (max_tokens is None or tokens <= max_tokens) and (max_chars is None or chars <= max_chars)

    # -- reducing ---------------------------------------------------------------------------------
    async def reduce(self, *, goal: str, keep_calls: Collection[str] = ()) -> Reduction | None:
        """Check the history against its budget; when over it, reduce it to the low-water mark.

        Args:
            goal: the current turn's text (what the stage's relevance is measured against).
            keep_calls: tool-call ids never cleared or dropped (the ``find_tools`` calls, real or
                prefetched, whose tools the session still counts as loaded).

        Returns:
            What was done, or None when no budget applies.

        Raises:
            ContextBudgetError: what must stay (the current turn, the loaded searches) does not
                fit the budget itself (it passing only the low-water mark reduces to the budget).
        """
        if self.stage is None:
            return None
        fragments = self._fragments(self.messages)
        sizes = self._sizes(fragments)
        tokens_before, chars_before = sum(sizes.tokens), sum(sizes.chars)
        count_tokens = self.max_tokens is not None
        if self._fits(tokens_before, chars_before, self.max_tokens, self.max_chars):
            return Reduction(
                False,
                tokens_before if count_tokens else None,
                tokens_before if count_tokens else None,
                chars_before,
                chars_before,
                self.target_tokens,
                self.target_chars,
            )
        keep = set(keep_calls)
        kept_searches = sum(1 for m in self.messages if m.get("role") == "tool" and str(m.get("tool_call_id")) in keep)
        snapshot = list(self.messages)
        injected = {part.text for part in self._injected}
        cleared_tools, cleared_context = self._clear(sizes, keep)
        tokens, chars = sum(sizes.tokens), sum(sizes.chars)
        dropped = 0
        over = False
        if not self._fits(tokens, chars, self._clear_tokens, self._clear_chars):
            before = len(self.messages)
            tokens, chars, over = await self._drop_steps(goal, keep)
            dropped = before - len(self.messages)
        self._forget_removed_context()
        kept_facts = 0
        if self.facts is not None:
            kept_facts = self._keep_facts(snapshot, injected)
            after = self._sizes(self._fragments(self.messages))
            tokens, chars = sum(after.tokens), sum(after.chars)
        self.reductions += 1
        self.generation += 1
        outcome = Reduction(
            True,
            tokens_before if count_tokens else None,
            tokens if count_tokens else None,
            chars_before,
            chars,
            self.target_tokens,
            self.target_chars,
            cleared_tools,
            cleared_context,
            dropped,
            kept_searches,
            over,
            kept_facts,
        )
        emit(
            HistoryReduced(
                tokens_before=outcome.tokens_before,
                tokens_after=outcome.tokens_after,
                chars_before=chars_before,
                chars_after=chars,
                target_tokens=self.target_tokens,
                target_chars=self.target_chars,
                cleared_tool_results=cleared_tools,
                cleared_context=cleared_context,
                dropped_messages=dropped,
                kept_searches=kept_searches,
                kept_facts=kept_facts,
            )
        )
        return outcome

    def _keep_facts(self, before: Sequence[Mapping[str, Any]], injected: Collection[str]) -> int:
        """Put what the removed messages stated on the fact sheet, at the history's start; return its facts."""
        assert self.facts is not None
        self.messages = keep_facts(self.facts, before, self.messages, injected, self._sheet_room)
        return len(self.facts.facts)

    def _sheet_room(self, messages: list[dict[str, Any]]) -> int:
        """The fact sheet's room beside ``messages``: under the low-water mark with them (else under the budget)."""
        sizes = self._sizes(self._fragments(messages))
        by_tokens = self.max_tokens is not None
        mark = self.target_tokens if by_tokens else self.target_chars
        budget = self.max_tokens if by_tokens else self.max_chars
        used = sum(sizes.tokens) if by_tokens else sum(sizes.chars)
        assert mark is not None and budget is not None
        return (mark if used <= mark else budget) - used

    def _clear(self, sizes: _Sizes, keep: set[str]) -> tuple[int, int]:
        """Clear old tool results and old injected context, oldest first, until the low-water mark holds."""
        last_user = max((i for i, m in enumerate(self.messages) if m.get("role") == "user"), default=0)
        injected = {part.text for part in self._injected}
        cleared_tools = cleared_context = 0
        for i in range(last_user):  # never the current turn: its user message and what follows
            if self._fits(sum(sizes.tokens), sum(sizes.chars), self._clear_tokens, self._clear_chars):
                break
            message = self.messages[i]
            role = message.get("role")
            new: dict[str, Any] | None = None
            if role == "tool" and str(message.get("tool_call_id")) not in keep:
                if message.get("content") != CLEARED_TOOL_RESULT:
                    new = {**message, "content": CLEARED_TOOL_RESULT}
                    cleared_tools += 1
            elif role == "user" and isinstance(message.get("content"), list):
                content = message["content"]
                rest = [
                    p
                    for p in content
                    if not (isinstance(p, Mapping) and p.get("type") == "text" and p.get("text") in injected)
                ]
                if rest and len(rest) < len(content):  # a message that is only context stays whole
                    own = text_parts(rest)
                    new = {**message, "content": own[0] if len(rest) == 1 and len(own) == 1 else rest}
                    cleared_context += 1
            if new is not None:
                self.messages[i] = new
                (frag,) = self._fragments([new])
                one = self._sizes([frag])
                sizes.tokens[i], sizes.chars[i] = one.tokens[0], one.chars[0]
        return cleared_tools, cleared_context

    async def _drop_steps(self, goal: str, keep: set[str]) -> tuple[int, int, bool]:
        """Let the reduction stage drop whole steps down to the low-water mark; keep user messages if they fit."""
        from shortlist.reduction import openai_from_fragments

        assert self.stage is not None
        fragments = self._fragments(self.messages)
        sizes = self._sizes(fragments)
        kept_steps = {
            f.step
            for f in fragments
            if f.kind == "tool_call"
            and any(
                isinstance(c, Mapping) and str(c.get("id")) in keep
                for c in (f.meta.get("message") or {}).get("tool_calls") or ()
            )
        }
        last_step = fragments[-1].step if fragments else ""
        # the user's own messages are the last to go (Claude Code's compaction keeps every user
        # message too): protect them all when, with what must stay anyway, they fit USER_SHARE of
        # the mark (the whole mark without a fact sheet); past it they compete like any step,
        # their facts on the fact sheet
        user_share = USER_SHARE if self.facts is not None else 1.0
        must = [i for i, f in enumerate(fragments) if f.kind == "user" or f.step in kept_steps or f.step == last_step]
        users_fit = self._fits(
            sum(sizes.tokens[i] for i in must),
            sum(sizes.chars[i] for i in must),
            None if self.target_tokens is None else math.floor(self.target_tokens * user_share),
            None if self.target_chars is None else math.floor(self.target_chars * user_share),
        )
        marked = [
            f.replace(protected=True) if f.step in kept_steps or (users_fit and f.kind == "user") else f
            for f in fragments
        ]
        try:
            result = await self.stage.reduce(marked, goal=goal)
        except ContextBudgetError:
            # what must stay (the current turn, loaded searches) passes the low-water mark but
            # may fit the budget itself: reduce to the budget rather than not at all
            assert self.budget_stage is not None
            result = await self.budget_stage.reduce(marked, goal=goal)
        self.messages = openai_from_fragments(result.fragments)
        after = self._sizes(self._fragments(self.messages))
        return sum(after.tokens), sum(after.chars), result.over_budget

    def _forget_removed_context(self) -> None:
        """Keep only the injected parts still in the history (what a reduction removed may come back)."""
        texts = {t for m in self.messages if m.get("role") == "user" for t in text_parts(m.get("content"))}
        self._injected = [part for part in self._injected if part.text in texts]
