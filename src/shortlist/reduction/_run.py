"""Private: the four rungs of one stage run (truncate, select, compress, drop oldest).

Each rung changes the run's slots (:class:`~shortlist.reduction._run_state.RunState`, which
measures them) and reports what it saved as a :class:`~shortlist.reduction._events.ReductionApplied`
event, or why it gave up.
"""

from __future__ import annotations

from shortlist.errors import ConfigError, SelectorProtocolError
from shortlist.reduction._compressor import SummaryRejected
from shortlist.reduction._contract import CallBudgetExhausted, ContextSelectionCall, ReductionCancelled
from shortlist.reduction._events import ReductionCompressionDiscarded, ReductionSelectionRejected
from shortlist.reduction._fragments import (
    ContextFragment,
    ContextSelectionCandidate,
    Step,
    make_excerpt,
    truncate_middle,
)
from shortlist.reduction._run_state import RunState

__all__ = ["Run"]


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


class Run(RunState):
    """One stage run: its state (:class:`RunState`) and the rungs that reduce it."""

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
