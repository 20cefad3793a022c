"""The reduction stage: fit a conversation to its token and character budget without touching protected content.

Measure; if within budget, return the input unchanged. Otherwise, with protected content set apart
(system and instruction fragments, the current user turn, the newest steps, pinned fragments),
apply reductions cheapest first and re-measure after each: truncate oversized tool outputs, ask
the selector, summarise with the compressor, drop the oldest steps. Model calls share one budget
per run. When even dropping every reducible step cannot fit, raise :class:`ContextBudgetError`
saying by how much (or, in best-effort mode, return the result flagged as over budget).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Literal

from shortlist import _telemetry as telemetry
from shortlist._events import EventHook
from shortlist._tokens import CachedCounter, TokenCounter, counter_for_model
from shortlist.errors import ConfigError, ContextBudgetError
from shortlist.reduction._compressor import ContextCompressor
from shortlist.reduction._contract import (
    ContextSelector,
    Diagnostics,
    ExecutionContext,
    ModelCallable,
    _reset_goal,
    _set_goal,
)
from shortlist.reduction._events import (
    ReductionBudgetExceeded,
    ReductionCompleted,
    ReductionSkipped,
    ReductionStarted,
)
from shortlist.reduction._fragments import ContextFragment
from shortlist.reduction._result import ReductionResult
from shortlist.reduction._run import Run

__all__ = ["DEFAULT_LOCAL_SELECTOR", "ReductionStage"]

#: The local step selector every surface reduces with unless told otherwise: the library, the
#: runtime, ``shortlist reduce`` and ``POST /v1/reduce`` (``relevance`` keeps the exchange the last
#: question needs; ``newest`` keeps the latest steps that fit).
DEFAULT_LOCAL_SELECTOR: Literal["newest", "relevance"] = "relevance"


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name} must be a positive integer or None, not {value!r}")


class ReductionStage:
    """Fits a conversation into ``max_tokens`` and/or ``max_chars`` (both must hold when both are set).

    Args:
        id: The stage id reported in every event.
        max_tokens: Token budget, or ``None``.
        max_chars: Character budget, or ``None``.
        counter: Token counter; defaults to the cached offline ``o200k_base`` counter.
        selector: A local or model-backed selector for the select rung (skipped when ``None``).
        compressor: A model-backed compressor for the summarise rung (skipped when ``None``).
        transports: The application's models by transport name (e.g. ``core:plain-text``,
            ``selector-json``); model reducers must find theirs here.
        max_calls: Model calls shared by all reducers of one run (default 1).
        keep_last_steps: How many of the newest steps are protected (the in-flight step).
        max_tool_output_tokens: Per-output cap for the truncate rung; ``None`` derives it from the
            budget left for reducible content (an eighth of it, at least 128 tokens).
        max_tool_output_chars: The same cap in characters (an eighth, at least 512 chars).
        excerpt_chars: Length of the candidate excerpts a selector receives.
        best_effort: Return an over-budget result flagged ``over_budget`` instead of raising.
        hooks: Extra event hooks for this stage's events.

    Raises:
        ConfigError: on a missing or non-positive budget, a bad ``max_calls``, a model-backed
            reducer with ``max_calls=0``, a reducer whose transport is not registered, or two
            reducers with the same id.
    """

    def __init__(
        self,
        id: str = "context",
        *,
        max_tokens: int | None = None,
        max_chars: int | None = None,
        counter: TokenCounter | None = None,
        selector: ContextSelector | None = None,
        compressor: ContextCompressor | None = None,
        transports: Mapping[str, ModelCallable] | None = None,
        max_calls: int = 1,
        keep_last_steps: int = 1,
        max_tool_output_tokens: int | None = None,
        max_tool_output_chars: int | None = None,
        excerpt_chars: int = 1000,
        best_effort: bool = False,
        hooks: Sequence[EventHook] = (),
    ) -> None:
        if not isinstance(id, str) or not id.strip():
            raise ConfigError("a reduction stage needs a non-empty id")
        if max_tokens is None and max_chars is None:
            raise ConfigError(f"stage {id!r}: give max_tokens, max_chars or both")
        _positive("max_tokens", max_tokens)
        _positive("max_chars", max_chars)
        _positive("max_tool_output_tokens", max_tool_output_tokens)
        _positive("max_tool_output_chars", max_tool_output_chars)
        _positive("excerpt_chars", excerpt_chars)
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 0:
            raise ConfigError(f"stage {id!r}: max_calls must be a non-negative integer, not {max_calls!r}")
        if isinstance(keep_last_steps, bool) or not isinstance(keep_last_steps, int) or keep_last_steps < 0:
            raise ConfigError(f"stage {id!r}: keep_last_steps must be a non-negative integer")
        self.transports: dict[str, ModelCallable] = dict(transports or {})
        model_reducers: list[tuple[str, str]] = []
        if selector is not None and selector.requires_model:
            model_reducers.append((selector.id, selector.transport or ""))
        if compressor is not None:
            model_reducers.append((compressor.id, compressor.transport))
        if selector is not None and compressor is not None and selector.id == compressor.id:
            raise ConfigError(f"stage {id!r}: selector and compressor share the id {selector.id!r}")
        for reducer_id, transport in model_reducers:
            if max_calls == 0:
                raise ConfigError(
                    f"stage {id!r}: reducer {reducer_id!r} needs the model but max_calls=0 permits only local reducers"
                )
            if transport not in self.transports:
                raise ConfigError(
                    f"stage {id!r}: reducer {reducer_id!r} uses transport {transport!r}, which is not "
                    f"registered (registered: {sorted(self.transports)})"
                )
        self.id = id
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.counter: TokenCounter = counter if counter is not None else counter_for_model(None)
        if not isinstance(self.counter, CachedCounter):
            self.counter = CachedCounter(self.counter)
        self.selector = selector
        self.compressor = compressor
        self.max_calls = max_calls
        self.keep_last_steps = keep_last_steps
        self.max_tool_output_tokens = max_tool_output_tokens
        self.max_tool_output_chars = max_tool_output_chars
        self.excerpt_chars = excerpt_chars
        self.best_effort = best_effort
        self.hooks: tuple[EventHook, ...] = tuple(hooks)

    @classmethod
    def local(
        cls,
        id: str,
        *,
        max_tokens: int | None = None,
        max_chars: int | None = None,
        selector: str = DEFAULT_LOCAL_SELECTOR,
        model: str | None = None,
        hooks: Sequence[EventHook] = (),
    ) -> ReductionStage:
        """A stage with local reducers only (no model call): what the CLI, the service and the runtime use.

        Args:
            id: the stage id.
            max_tokens: token budget, or ``None``.
            max_chars: character budget, or ``None``.
            selector: ``"relevance"`` (steps most relevant to the current turn) or ``"newest"``.
            model: the model whose tokenizer counts tokens (default ``o200k_base``).
            hooks: extra event hooks.

        Raises:
            ConfigError: an unknown selector, or no budget.
        """
        from shortlist.reduction._local import newest_first_selector, relevance_selector

        if selector not in ("relevance", "newest"):
            raise ConfigError(f"selector must be 'relevance' or 'newest', not {selector!r}")
        reducer = relevance_selector() if selector == "relevance" else newest_first_selector()
        return cls(
            id,
            max_tokens=max_tokens,
            max_chars=max_chars,
            counter=counter_for_model(model),
            selector=reducer,
            max_calls=0,
            hooks=hooks,
        )

    async def reduce(
        self,
        fragments: Sequence[ContextFragment],
        context: ExecutionContext | None = None,
        *,
        goal: str | None = None,
    ) -> ReductionResult:
        """Fit ``fragments`` to the budget.

        Args:
            fragments: The conversation, oldest first; ids must be unique.
            context: Logger, cancellation signal and diagnostics; a fresh one when ``None``.
            goal: The current turn for relevance; defaults to the newest user fragment's text.

        Returns:
            The reduced conversation and its sizes.

        Raises:
            ContextBudgetError: when the budget cannot be met without touching protected content
                (unless ``best_effort``); ``over_tokens``/``over_chars`` say by how much.
            ReductionCancelled: when the signal is cancelled; no partial result is returned.
            ConfigError: on duplicate fragment ids.
        """
        ctx = context if context is not None else ExecutionContext(diagnostics=Diagnostics())
        seen: set[str] = set()
        for frag in fragments:
            if frag.id in seen:
                raise ConfigError(f"duplicate fragment id {frag.id!r}")
            seen.add(frag.id)
        run = Run(self, list(fragments), ctx)
        token = _set_goal(goal if goal is not None else run.default_goal())
        try:
            budget = {"shortlist.stage": self.id, "shortlist.max_tokens": self.max_tokens or 0}
            with telemetry.span("shortlist.reduce", budget) as span:  # an OpenTelemetry span when installed
                result = await self._run(run)
                if span.is_recording():
                    span.set_attributes(
                        {
                            "shortlist.fragments": len(fragments),
                            "shortlist.tokens_before": result.tokens_before or 0,
                            "shortlist.tokens_after": result.tokens_after or 0,
                            "shortlist.skipped": result.skipped,
                            "shortlist.calls_used": result.calls_used,
                        }
                    )
                return result
        finally:
            _reset_goal(token)

    def reduce_sync(
        self,
        fragments: Sequence[ContextFragment],
        context: ExecutionContext | None = None,
        *,
        goal: str | None = None,
    ) -> ReductionResult:
        """Blocking form of :meth:`reduce` (runs its own event loop).

        Raises:
            RuntimeError: when called from a running event loop (await :meth:`reduce` there).
        """
        running = True
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            running = False
        if running:
            raise RuntimeError("reduce_sync() called inside an event loop; use 'await stage.reduce(...)'")
        return asyncio.run(self.reduce(fragments, context, goal=goal))

    async def _run(self, run: Run) -> ReductionResult:
        run.check_cancelled()
        tokens_before, chars_before = run.tokens, run.chars
        if run.fits():
            run.emit(
                ReductionSkipped(
                    stage_id=self.id,
                    tokens=tokens_before,
                    chars=chars_before,
                    max_tokens=self.max_tokens,
                    max_chars=self.max_chars,
                )
            )
            return run.result(tokens_before, chars_before, skipped=True)
        run.emit(
            ReductionStarted(
                stage_id=self.id,
                tokens=tokens_before,
                chars=chars_before,
                max_tokens=self.max_tokens,
                max_chars=self.max_chars,
                protected_tokens=run.protected_tokens,
                protected_chars=run.protected_chars,
                counter=self.counter.name,
            )
        )
        if any(run.protected_over()):
            # Fail fast, before any model call: nothing reducible can make this fit.
            if self.best_effort:
                run.drop_all_reducible()
            return self._over_budget(run, tokens_before, chars_before, "protected_exceeds_budget")
        for rung in (run.truncate, run.select, run.compress, run.drop_oldest):
            if run.fits():
                break
            run.check_cancelled()
            await rung()
        if not run.fits():
            return self._over_budget(run, tokens_before, chars_before, "unreachable")
        run.emit(
            ReductionCompleted(
                stage_id=self.id,
                tokens_before=tokens_before,
                tokens_after=run.tokens,
                chars_before=chars_before,
                chars_after=run.chars,
                calls_used=run.calls_used,
            )
        )
        return run.result(tokens_before, chars_before)

    def _over_budget(self, run: Run, tokens_before: int | None, chars_before: int, reason: str) -> ReductionResult:
        over_tokens, over_chars = run.protected_over()
        parts = []
        if over_tokens:
            parts.append(f"{over_tokens} tokens over max_tokens={self.max_tokens}")
        if over_chars:
            parts.append(f"{over_chars} chars over max_chars={self.max_chars}")
        detail = " and ".join(parts)
        run.emit(
            ReductionBudgetExceeded(
                stage_id=self.id,
                over_tokens=over_tokens,
                over_chars=over_chars,
                best_effort=self.best_effort,
                reason=reason,
                # Raised errors reach the caller anyway; only a silently returned overrun warns.
                level=logging.WARNING if self.best_effort else logging.INFO,
            )
        )
        if not self.best_effort:
            raise ContextBudgetError(
                f"context does not fit its budget without touching protected content: {detail} "
                f"(protected content alone is {run.protected_size_text()})",
                over_tokens=over_tokens,
                over_chars=over_chars,
            )
        run.emit(
            ReductionCompleted(
                stage_id=self.id,
                tokens_before=tokens_before,
                tokens_after=run.tokens,
                chars_before=chars_before,
                chars_after=run.chars,
                calls_used=run.calls_used,
                over_budget=True,
            )
        )
        return run.result(tokens_before, chars_before, over_tokens=over_tokens, over_chars=over_chars)
