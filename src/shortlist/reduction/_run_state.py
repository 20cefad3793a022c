"""Private: the state of one stage run: its slots, sizes and protected steps, measured against the budgets.

Fragments live in slots (``None`` once removed) so removals are O(1) and order is kept for free;
token and character totals are updated incrementally, so re-measuring after each rung is free.
The run's events, its cancellation and its result are kept here too; the rungs that change
the slots are :class:`~shortlist.reduction._run.Run`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shortlist._events import Event, emit
from shortlist.reduction._calls import CallBudget
from shortlist.reduction._contract import ExecutionContext
from shortlist.reduction._events import ReductionApplied, ReductionCancelledEvent
from shortlist.reduction._fragments import ContextFragment
from shortlist.reduction._result import ReductionResult

if TYPE_CHECKING:
    from shortlist.reduction._stage import ReductionStage

__all__ = ["RunState"]

_ALWAYS_PROTECTED = frozenset({"system", "instruction"})


class RunState:
    """One stage run's state: slots, sizes, protected steps, the shared model-call budget, the events."""

    def __init__(self, stage: ReductionStage, fragments: list[ContextFragment], ctx: ExecutionContext) -> None:
        self.stage = stage
        self.ctx = ctx
        self.events: list[Event] = []
        self.calls = CallBudget(
            stage_id=stage.id,
            max_calls=stage.max_calls,
            transports=stage.transports,
            signal=ctx.signal,
            emit=self.emit,
            on_cancel=self._record_cancel,
        )
        self._cancel_recorded = False
        self.count_tokens = stage.max_tokens is not None
        count = stage.counter.count
        self.slots: list[ContextFragment | None] = list(fragments)
        self.chs = [len(f.text) for f in fragments]
        if self.count_tokens:
            self.toks = [f.tokens if f.tokens is not None else count(f.text) for f in fragments]
        else:
            self.toks = [0] * len(fragments)
        self.tok_total = sum(self.toks)
        self.chars = sum(self.chs)
        self.steps: dict[str, list[int]] = {}
        for index, frag in enumerate(fragments):
            self.steps.setdefault(frag.step, []).append(index)
        self.protected_steps = self._protected(fragments)
        self.protected_tokens_total = 0
        self.protected_chars = 0
        for sid in self.protected_steps:
            for i in self.steps[sid]:
                self.protected_tokens_total += self.toks[i]
                self.protected_chars += self.chs[i]

    def _protected(self, fragments: list[ContextFragment]) -> set[str]:
        last_user = None
        prot: set[str] = set()
        for frag in fragments:
            if frag.protected or frag.kind in _ALWAYS_PROTECTED:
                prot.add(frag.step)
            if frag.kind == "user":
                last_user = frag
        if last_user is not None:
            prot.add(last_user.step)
        keep = self.stage.keep_last_steps
        if keep:
            prot.update(list(self.steps)[-keep:])
        return prot

    # ---- measuring -------------------------------------------------------------------------

    @property
    def calls_used(self) -> int:
        """Model calls made so far in this run."""
        return self.calls.used

    @property
    def tokens(self) -> int | None:
        """Current tokens, or ``None`` when no token budget applies."""
        return self.tok_total if self.count_tokens else None

    @property
    def protected_tokens(self) -> int | None:
        """Tokens of the protected steps, or ``None`` when no token budget applies."""
        return self.protected_tokens_total if self.count_tokens else None

    def over(self) -> tuple[int, int]:
        """How far the current conversation is over each budget (0 when within)."""
        mt, mc = self.stage.max_tokens, self.stage.max_chars
        return (
            max(0, self.tok_total - mt) if mt is not None else 0,
            max(0, self.chars - mc) if mc is not None else 0,
        )

    def protected_over(self) -> tuple[int, int]:
        """How far protected content alone is over each budget."""
        mt, mc = self.stage.max_tokens, self.stage.max_chars
        return (
            max(0, self.protected_tokens_total - mt) if mt is not None else 0,
            max(0, self.protected_chars - mc) if mc is not None else 0,
        )

    def protected_size_text(self) -> str:
        """Human-readable size of the protected content."""
        if self.count_tokens:
            return f"{self.protected_tokens_total} tokens, {self.protected_chars} chars"
        return f"{self.protected_chars} chars"

    def fits(self) -> bool:
        """True when every budget holds."""
        return self.over() == (0, 0)

    def default_goal(self) -> str:
        """Text of the newest user fragment (empty if none)."""
        for frag in reversed(self.slots):
            if frag is not None and frag.kind == "user":
                return frag.text
        return ""

    # ---- bookkeeping -----------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Emit ``event`` to the hooks, record it in the diagnostics and the explicit logger."""
        emit(event, hooks=self.stage.hooks)
        self.events.append(event)
        if self.ctx.diagnostics is not None:
            self.ctx.diagnostics.record(event)
        log = self.ctx.logger
        if log is not None:
            method = (
                log.error
                if event.level >= logging.ERROR
                else log.warning
                if event.level >= logging.WARNING
                else log.info
                if event.level >= logging.INFO
                else log.debug
            )
            method("%s %s", event.name, event.to_dict())

    def check_cancelled(self) -> None:
        """Raise :class:`ReductionCancelled` (recording it once) if the signal is cancelled."""
        if self.ctx.signal.cancelled:
            self._record_cancel()
            self.ctx.signal.raise_if_cancelled()

    def _record_cancel(self) -> None:
        if not self._cancel_recorded:
            self._cancel_recorded = True
            self.emit(ReductionCancelledEvent(stage_id=self.stage.id, reason=self.ctx.signal.reason))

    def reducible_steps(self) -> list[tuple[str, list[int]]]:
        """Surviving unprotected steps, oldest first, with their live slot indices."""
        out = []
        for sid, idxs in self.steps.items():
            if sid in self.protected_steps:
                continue
            live = [i for i in idxs if self.slots[i] is not None]
            if live:
                out.append((sid, live))
        out.sort(key=lambda item: item[1][0])
        return out

    def _is_summary(self, index: int) -> bool:
        frag = self.slots[index]
        return frag is not None and frag.kind == "summary"

    def _remove(self, sid: str) -> None:
        for i in self.steps.pop(sid, ()):
            if self.slots[i] is not None:
                self.slots[i] = None
                self.tok_total -= self.toks[i]
                self.chars -= self.chs[i]

    def _put(self, index: int, frag: ContextFragment) -> None:
        if self.slots[index] is not None:
            self.tok_total -= self.toks[index]
            self.chars -= self.chs[index]
        self.slots[index] = frag
        self.chs[index] = len(frag.text)
        self.toks[index] = self.stage.counter.count(frag.text) if self.count_tokens else 0
        self.tok_total += self.toks[index]
        self.chars += self.chs[index]

    def _applied(self, kind: str, reducer: str, step_ids: list[str], before: tuple[int, int]) -> None:
        if step_ids:
            self.emit(
                ReductionApplied(
                    stage_id=self.stage.id,
                    kind=kind,
                    reducer=reducer,
                    step_ids=tuple(step_ids),
                    saved_tokens=(before[0] - self.tok_total) if self.count_tokens else None,
                    saved_chars=before[1] - self.chars,
                )
            )

    def result(
        self,
        tokens_before: int | None,
        chars_before: int,
        *,
        skipped: bool = False,
        over_tokens: int = 0,
        over_chars: int = 0,
    ) -> ReductionResult:
        """Freeze the run into a :class:`ReductionResult`."""
        return ReductionResult(
            fragments=tuple(f for f in self.slots if f is not None),
            tokens_before=tokens_before,
            tokens_after=self.tokens,
            chars_before=chars_before,
            chars_after=self.chars,
            over_tokens=over_tokens,
            over_chars=over_chars,
            skipped=skipped,
            calls_used=self.calls.used,
            counter=self.stage.counter.name if self.count_tokens else "chars",
            diagnostics=tuple(self.events),
        )
