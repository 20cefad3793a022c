"""Private: the state of one stage run and its four rungs (truncate, select, compress, drop oldest).

Fragments live in slots (``None`` once removed) so removals are O(1) and order is kept for free;
token and character totals are updated incrementally, so re-measuring after each rung is free.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shortlist._events import Event, emit
from shortlist.errors import ConfigError, SelectorProtocolError
from shortlist.reduction._calls import CallBudget
from shortlist.reduction._compressor import SummaryRejected
from shortlist.reduction._contract import (
    CallBudgetExhausted,
    ContextSelectionCall,
    ExecutionContext,
    ReductionCancelled,
)
from shortlist.reduction._events import (
    ReductionApplied,
    ReductionCancelledEvent,
    ReductionCompressionDiscarded,
    ReductionSelectionRejected,
)
from shortlist.reduction._fragments import (
    ContextFragment,
    ContextSelectionCandidate,
    Step,
    make_excerpt,
    truncate_middle,
)
from shortlist.reduction._result import ReductionResult

if TYPE_CHECKING:
    from shortlist.reduction._stage import ReductionStage

__all__ = ["Run"]

_ALWAYS_PROTECTED = frozenset({"system", "instruction"})


_EXCERPTS: dict[tuple[int, tuple[str, ...]], str] = {}


def _excerpt(texts: tuple[str, ...], limit: int) -> str:
    """A step's excerpt, cached by its texts (str hashes are cached, so a hit costs one lookup)."""
    key = (limit, texts)
    hit = _EXCERPTS.get(key)
    if hit is None:
        head = texts[0] if len(texts) == 1 else "\n\n".join(t[: limit + 1] for t in texts)
        hit = head if len(head) <= limit else make_excerpt(head, limit)
        if len(_EXCERPTS) >= 50_000:
            _EXCERPTS.clear()
        _EXCERPTS[key] = hit
    return hit


class Run:
    """One stage run: slots, sizes, protected steps, the shared model-call budget, the events."""

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

    # ---- the rungs -------------------------------------------------------------------------

    async def truncate(self) -> None:
        """Rung 1: clip oversized reducible tool outputs, oldest first, keeping head and tail."""
        stage = self.stage
        cap_tokens = cap_chars = None
        if stage.max_tokens is not None:
            room = max(0, stage.max_tokens - self.protected_tokens_total)
            cap_tokens = stage.max_tool_output_tokens or max(128, room // 8)
        if stage.max_chars is not None:
            room = max(0, stage.max_chars - self.protected_chars)
            cap_chars = stage.max_tool_output_chars or max(512, room // 8)
        before = (self.tok_total, self.chars)
        changed: list[str] = []
        protected, toks, chs = self.protected_steps, self.toks, self.chs
        oversized = [
            i
            for i, frag in enumerate(self.slots)
            if frag is not None
            and frag.kind == "tool_result"
            and frag.step not in protected
            and ((cap_tokens is not None and toks[i] > cap_tokens) or (cap_chars is not None and chs[i] > cap_chars))
        ]
        for i in oversized:  # oldest first
            if self.fits():
                break
            frag = self.slots[i]
            assert frag is not None
            size_c, size_t = chs[i], toks[i]
            target = size_c
            if cap_tokens is not None and size_t > cap_tokens:
                target = min(target, size_c * cap_tokens // size_t)
            if cap_chars is not None and size_c > cap_chars:
                target = min(target, cap_chars)
            text = truncate_middle(frag.text, target)
            if len(text) >= size_c:
                continue
            self._put(i, frag.replace(text=text, meta={**frag.meta, "truncated_from_chars": size_c}))
            if not changed or changed[-1] != frag.step:
                changed.append(frag.step)
        self._applied("truncate", "truncate", changed, before)

    def _candidates(self, steps: list[tuple[str, list[int]]]) -> list[ContextSelectionCandidate]:
        limit = self.stage.excerpt_chars
        slots, toks, chs = self.slots, self.toks, self.chs
        count_tokens = self.count_tokens
        out = []
        for position, (sid, idxs) in enumerate(steps):
            first = slots[idxs[0]]
            assert first is not None
            if len(idxs) == 1:
                tokens, chars = toks[idxs[0]], chs[idxs[0]]
                texts: tuple[str, ...] = (first.text,)
            else:
                texts = tuple(f.text for f in (slots[i] for i in idxs) if f is not None)
                tokens = sum([toks[i] for i in idxs])
                chars = sum([chs[i] for i in idxs])
            out.append(
                ContextSelectionCandidate(
                    step_id=sid,
                    excerpt=_excerpt(texts, limit),
                    tokens=tokens if count_tokens else None,
                    chars=chars,
                    kind=first.kind,
                    position=position,
                )
            )
        return out

    def _reject(self, selector: str, reason: str, unknown: tuple[str, ...] = (), error: str = "") -> None:
        self.emit(
            ReductionSelectionRejected(
                stage_id=self.stage.id, selector=selector, reason=reason, unknown_ids=unknown, error=error
            )
        )

    async def select(self) -> None:
        """Rung 2: ask the selector which reducible steps to keep; drop the others."""
        selector = self.stage.selector
        steps = self.reducible_steps()
        if selector is None or not steps:
            return
        over_t, over_c = self.over()
        call = ContextSelectionCall(
            stage_id=self.stage.id,
            candidates=self._candidates(steps),
            fragments=[f for _, idxs in steps for f in (self.slots[i] for i in idxs) if f is not None],
            current_tokens=self.tokens,
            required_reduction_tokens=over_t if self.count_tokens else None,
            current_chars=self.chars,
            required_reduction_chars=over_c,
            remaining_calls=lambda: self.calls.remaining(selector.id, selector.max_calls),
            call_model=self.calls.bind(selector.id, selector.max_calls),
        )
        try:
            answer = await selector.select(call, self.ctx)
        except (ReductionCancelled, ConfigError):
            raise
        except CallBudgetExhausted as exc:
            return self._reject(selector.id, "call_budget_exhausted", error=str(exc))
        except SelectorProtocolError as exc:
            return self._reject(selector.id, "invalid_answer", error=str(exc))
        except Exception as exc:
            return self._reject(selector.id, "error", error=f"{type(exc).__name__}: {exc}")
        if isinstance(answer, str) or not all(isinstance(i, str) for i in answer):
            return self._reject(selector.id, "invalid_answer", error="select() must return a list of step ids")
        known = {sid for sid, _ in steps}
        unknown = tuple(dict.fromkeys(i for i in answer if i not in known))
        if unknown:  # fail closed: an invented (or protected) id means the whole answer is untrusted
            return self._reject(selector.id, "unknown_ids", unknown=unknown)
        keep = set(answer)
        before = (self.tok_total, self.chars)
        dropped = [sid for sid, _ in steps if sid not in keep]
        for sid in dropped:
            self._remove(sid)
        self._applied("select", selector.id, dropped, before)

    def _discard(self, compressor: str, reason: str, step_ids: list[str], error: str = "") -> None:
        self.emit(
            ReductionCompressionDiscarded(
                stage_id=self.stage.id, compressor=compressor, reason=reason, step_ids=tuple(step_ids), error=error
            )
        )

    async def compress(self) -> None:
        """Rung 3: replace the oldest reducible steps with one summary, if it is a net gain."""
        compressor = self.stage.compressor
        if compressor is None:
            return
        steps = [(sid, idxs) for sid, idxs in self.reducible_steps() if not self._is_summary(idxs[0])]
        if not steps:
            return
        over_t, over_c = self.over()
        need_t, need_c = over_t + compressor.max_output_tokens, over_c + 4 * compressor.max_output_tokens
        chosen: list[tuple[str, list[int]]] = []
        got_t = got_c = 0
        for sid, idxs in steps:
            chosen.append((sid, idxs))
            got_t += sum(self.toks[i] for i in idxs)
            got_c += sum(self.chs[i] for i in idxs)
            if (not over_t or got_t >= need_t) and (not over_c or got_c >= need_c):
                break
        ids = [sid for sid, _ in chosen]
        if self.calls.remaining(compressor.id, None) < 1:
            return self._discard(compressor.id, "call_budget_exhausted", ids)
        step_objs = [
            Step(
                step_id=sid,
                fragments=tuple(f for f in (self.slots[i] for i in idxs) if f is not None),
                position=idxs[0],
                protected=False,
            )
            for sid, idxs in chosen
        ]
        try:
            summary = await compressor.compress(step_objs, self.calls.bind(compressor.id, None))
        except (ReductionCancelled, ConfigError):
            raise
        except SummaryRejected as exc:
            return self._discard(compressor.id, "parse_error", ids, str(exc))
        except CallBudgetExhausted as exc:
            return self._discard(compressor.id, "call_budget_exhausted", ids, str(exc))
        except Exception as exc:
            return self._discard(compressor.id, "error", ids, f"{type(exc).__name__}: {exc}")
        if not isinstance(summary, str) or not summary.strip():
            return self._discard(compressor.id, "empty", ids)
        summary_tokens = self.stage.counter.count(summary)
        if summary_tokens > compressor.max_output_tokens:
            return self._discard(
                compressor.id, "too_long", ids, f"{summary_tokens} > {compressor.max_output_tokens} tokens"
            )
        if (self.count_tokens and summary_tokens >= got_t) or (
            self.stage.max_chars is not None and len(summary) >= got_c
        ):
            return self._discard(compressor.id, "no_gain", ids)
        before = (self.tok_total, self.chars)
        first = chosen[0][1][0]
        for sid in ids:
            self._remove(sid)
        sid = f"{compressor.id}:{ids[0]}"
        frag = ContextFragment(
            id=sid,
            step_id=sid,
            kind="summary",
            text=summary,
            meta={"replaces": tuple(ids), "compressor": compressor.id},
        )
        self.steps[sid] = [first]
        self._put(first, frag)
        self._applied("compress", compressor.id, ids, before)

    async def drop_oldest(self) -> None:
        """Rung 4: drop whole reducible steps, oldest first (summaries last), until the budget fits."""
        steps = self.reducible_steps()
        order = [s for s in steps if not self._is_summary(s[1][0])]
        order += [s for s in steps if self._is_summary(s[1][0])]
        before = (self.tok_total, self.chars)
        dropped: list[str] = []
        for sid, _ in order:
            if self.fits():
                break
            self._remove(sid)
            dropped.append(sid)
        self._applied("drop", "drop-oldest", dropped, before)

    def drop_all_reducible(self) -> None:
        """Best-effort fallback: drop every reducible step."""
        before = (self.tok_total, self.chars)
        dropped = [sid for sid, _ in self.reducible_steps()]
        for sid in dropped:
            self._remove(sid)
        self._applied("drop", "drop-oldest", dropped, before)
