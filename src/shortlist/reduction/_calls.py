"""Private: the model-call budget of one stage run and the ``call_model`` it hands to reducers.

Each call is checked against the cancellation token and the shared budget *before* it is made,
routed to the transport the application registered, cancelled in flight when the token fires
(even from another thread), timed, and recorded as a ``reduction.model_call`` event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from shortlist._events import Event
from shortlist.errors import ConfigError
from shortlist.reduction._contract import (
    CallBudgetExhausted,
    CancellationToken,
    ContextModelCall,
    ModelCallable,
    ModelRequest,
    ReductionCancelled,
)
from shortlist.reduction._events import ReductionModelCall

__all__ = ["CallBudget"]


class CallBudget:
    """Counts model calls per run (``max_calls`` shared by every reducer, plus per-reducer caps)."""

    def __init__(
        self,
        *,
        stage_id: str,
        max_calls: int,
        transports: Mapping[str, ModelCallable],
        signal: CancellationToken,
        emit: Callable[[Event], None],
        on_cancel: Callable[[], None],
    ) -> None:
        self.stage_id = stage_id
        self.max_calls = max_calls
        self.transports = transports
        self.signal = signal
        self.emit = emit
        self.on_cancel = on_cancel
        self.used = 0
        self.by_reducer: dict[str, int] = {}

    def remaining(self, reducer: str, cap: int | None) -> int:
        """Model calls ``reducer`` may still make (stage budget, and its own cap if any)."""
        left = self.max_calls - self.used
        if cap is not None:
            left = min(left, cap - self.by_reducer.get(reducer, 0))
        return max(0, left)

    def _check_cancelled(self) -> None:
        if self.signal.cancelled:
            self.on_cancel()
            self.signal.raise_if_cancelled()

    def bind(self, reducer: str, cap: int | None) -> ContextModelCall:
        """The budgeted, cancellable, recorded ``call_model`` for ``reducer``."""

        async def call_model(*, instruction: str, input: str, transport: str, max_output_tokens: int) -> object:
            self._check_cancelled()
            if self.remaining(reducer, cap) < 1:
                raise CallBudgetExhausted(
                    f"{reducer!r} asked for a model call with none left "
                    f"(stage max_calls={self.max_calls}, used {self.used})"
                )
            model = self.transports.get(transport)
            if model is None:
                raise ConfigError(f"{reducer!r} called transport {transport!r}, which is not registered")
            self.used += 1
            self.by_reducer[reducer] = self.by_reducer.get(reducer, 0) + 1
            request = ModelRequest(
                purpose=reducer,
                instruction=instruction,
                input=input,
                transport=transport,
                max_output_tokens=max_output_tokens,
                signal=self.signal,
            )
            loop = asyncio.get_running_loop()
            start = time.perf_counter()
            try:
                task: asyncio.Future[object] = asyncio.ensure_future(model(request))
            except Exception as exc:  # not awaitable, or raised before returning a coroutine
                self._event(reducer, transport, max_output_tokens, start, f"{type(exc).__name__}: {exc}")
                raise

            def cancel_task() -> None:
                loop.call_soon_threadsafe(task.cancel)

            unregister = self.signal.on_cancel(cancel_task)
            error = ""
            try:
                return await task
            except asyncio.CancelledError:
                if not self.signal.cancelled:
                    raise  # the caller's own task was cancelled: not ours to translate
                error = "cancelled"
                raise ReductionCancelled(f"context reduction cancelled: {self.signal.reason}") from None
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                unregister()
                self._event(reducer, transport, max_output_tokens, start, error)
                if error == "cancelled":
                    self.on_cancel()

        return call_model

    def _event(self, reducer: str, transport: str, max_out: int, start: float, error: str) -> None:
        self.emit(
            ReductionModelCall(
                stage_id=self.stage_id,
                reducer=reducer,
                transport=transport,
                max_output_tokens=max_out,
                ok=not error,
                ms=round((time.perf_counter() - start) * 1000, 3),
                error=error,
                level=logging.INFO if not error else logging.WARNING,
            )
        )
