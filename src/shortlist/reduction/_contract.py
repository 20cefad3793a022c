"""The selector contract of seed 001: selectors, the call they receive, the execution context.

``ContextSelector.select(call, context)`` returns the step ids to **keep** among
``call.candidates``; any id that is not a candidate rejects the whole answer. Model I/O goes only
through ``call.call_model``, which the stage binds to the shared model-call budget, the
cancellation token and the diagnostics of one run.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from shortlist._events import Event
from shortlist.errors import CallBudgetExhausted, ConfigError, ReductionCancelled
from shortlist.reduction._fragments import ContextFragment, ContextSelectionCandidate

__all__ = [
    "CallBudgetExhausted",
    "CancellationToken",
    "ContextModelCall",
    "ContextSelectionCall",
    "ContextSelector",
    "Diagnostics",
    "ExecutionContext",
    "ModelCallable",
    "ModelRequest",
    "ReductionCancelled",
    "ReductionLogger",
    "SelectFn",
    "current_goal",
]


class CancellationToken:
    """A thread-safe cancellation signal (the seed's ``AbortSignal``).

    ``cancel()`` may be called from any thread; callbacks registered with :meth:`on_cancel` run
    once, in the cancelling thread (or immediately if already cancelled).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason = ""
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._event.is_set()

    @property
    def reason(self) -> str:
        """The reason given to :meth:`cancel` (empty until cancelled)."""
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the operation and run the registered callbacks (idempotent)."""
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on cancellation; returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return remove
        callback()
        return lambda: None

    def raise_if_cancelled(self) -> None:
        """Raise :class:`ReductionCancelled` if the token is cancelled."""
        if self._event.is_set():
            raise ReductionCancelled(f"context reduction cancelled: {self._reason}")


class ReductionLogger(Protocol):
    """The explicit logger of an execution context; a :class:`logging.Logger` satisfies it."""

    def debug(self, msg: str, *args: object) -> None:
        """Log at DEBUG."""

    def info(self, msg: str, *args: object) -> None:
        """Log at INFO."""

    def warning(self, msg: str, *args: object) -> None:
        """Log at WARNING."""

    def error(self, msg: str, *args: object) -> None:
        """Log at ERROR."""


class Diagnostics:
    """An append-only record of the events of one operation; recording never raises."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def record(self, event: Event) -> None:
        """Append ``event``."""
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> tuple[Event, ...]:
        """The events recorded so far, oldest first."""
        with self._lock:
            return tuple(self._events)

    def to_list(self) -> list[dict[str, object]]:
        """The events as JSON-ready dicts."""
        return [e.to_dict() for e in self.events]

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)


@dataclass(frozen=True)
class ExecutionContext:
    """Logger, cancellation signal and diagnostics of one operation (seed 001).

    Attributes:
        signal: The cancellation token; never absent once execution has started.
        logger: Explicit optional recorder; never inferred from ``diagnostics``.
        diagnostics: Diagnostic scope of the enclosing call, when recording is enabled.
    """

    signal: CancellationToken = field(default_factory=CancellationToken)
    logger: ReductionLogger | None = None
    diagnostics: Diagnostics | None = None


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One request a reducer sends to the application's model for a transport.

    Attributes:
        purpose: The reducer id (for routing, logging and billing).
        instruction: The system prompt of the reducer.
        input: The text to work on.
        transport: How the output is interpreted (``core:plain-text`` → a string,
            ``selector-json`` → an already parsed ``{"step_ids": [...]}`` object).
        max_output_tokens: Cap on the output.
        signal: The run's cancellation token; long calls should honour it.
    """

    purpose: str
    instruction: str
    input: str
    transport: str
    max_output_tokens: int
    signal: CancellationToken


ModelCallable = Callable[[ModelRequest], Awaitable[object]]
"""The application's model for one transport: takes a request, returns the transport's value."""


class ContextModelCall(Protocol):
    """The ``call_model`` a stage hands to a selector: counted, cancellable, recorded."""

    async def __call__(self, *, instruction: str, input: str, transport: str, max_output_tokens: int) -> object:
        """Call the model registered for ``transport`` and return its value.

        Raises:
            CallBudgetExhausted: when no model call is left for this reducer.
            ReductionCancelled: when the run is cancelled before or during the call.
        """
        ...


class ContextSelectionCall:
    """The input of :meth:`ContextSelector.select` (exactly the seed's fields, snake_case).

    ``remaining_calls`` is live: it decreases as ``call_model`` is used.
    """

    __slots__ = (
        "_remaining",
        "call_model",
        "candidates",
        "current_chars",
        "current_tokens",
        "fragments",
        "required_reduction_chars",
        "required_reduction_tokens",
        "stage_id",
    )

    def __init__(
        self,
        *,
        stage_id: str,
        candidates: Sequence[ContextSelectionCandidate],
        fragments: Sequence[ContextFragment],
        current_tokens: int | None,
        required_reduction_tokens: int | None,
        current_chars: int,
        required_reduction_chars: int,
        remaining_calls: Callable[[], int],
        call_model: ContextModelCall,
    ) -> None:
        self.stage_id = stage_id
        self.candidates: tuple[ContextSelectionCandidate, ...] = tuple(candidates)
        self.fragments: tuple[ContextFragment, ...] = tuple(fragments)
        self.current_tokens = current_tokens
        self.required_reduction_tokens = required_reduction_tokens
        self.current_chars = current_chars
        self.required_reduction_chars = required_reduction_chars
        self._remaining = remaining_calls
        self.call_model = call_model

    @property
    def remaining_calls(self) -> int:
        """Model calls this selector may still spend through ``call_model``."""
        return self._remaining()

    def __repr__(self) -> str:
        return (
            f"ContextSelectionCall(stage_id={self.stage_id!r}, candidates={len(self.candidates)}, "
            f"current_tokens={self.current_tokens}, required_reduction_tokens={self.required_reduction_tokens}, "
            f"current_chars={self.current_chars}, required_reduction_chars={self.required_reduction_chars}, "
            f"remaining_calls={self.remaining_calls})"
        )


SelectFn = Callable[[ContextSelectionCall, ExecutionContext], Awaitable[Sequence[str]]]
"""``async (call, context) -> step ids to keep``."""


@dataclass(frozen=True, kw_only=True)
class ContextSelector:
    """A model or local selector choosing which reducible steps survive.

    Attributes:
        id: The reducer id (unique within a stage).
        select: ``async (call, context) -> step ids to keep``; an unknown id rejects the answer.
        max_calls: Most model calls the selector may make through ``call_model``; ``0`` permits
            only a local selector.
        transport: The transport a model-backed selector uses (``None`` for a local selector).

    Raises:
        ConfigError: on an empty id, a negative or non-integer ``max_calls``, or a model-backed
            selector (``transport`` set) with ``max_calls=0``.
    """

    id: str
    select: SelectFn
    max_calls: int = 1
    transport: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ConfigError("a context selector needs a non-empty id")
        if isinstance(self.max_calls, bool) or not isinstance(self.max_calls, int) or self.max_calls < 0:
            raise ConfigError(f"selector {self.id!r}: max_calls must be a non-negative integer")
        if self.transport is not None and self.max_calls == 0:
            raise ConfigError(
                f"selector {self.id!r} calls a model (transport {self.transport!r}) but max_calls=0 "
                "permits only a local selector; set max_calls >= 1 or use a local selector"
            )
        if not callable(self.select):
            raise ConfigError(f"selector {self.id!r}: select must be callable")

    @property
    def requires_model(self) -> bool:
        """True for a model-backed selector."""
        return self.transport is not None


_goal: contextvars.ContextVar[str] = contextvars.ContextVar("shortlist_reduction_goal", default="")


def current_goal() -> str:
    """The current turn's text (the goal relevance is judged against) inside a stage run.

    The stage sets it from its ``goal`` argument or, by default, the newest user fragment; it is
    empty outside a run.
    """
    return _goal.get()


def _set_goal(goal: str) -> contextvars.Token[str]:
    return _goal.set(goal)


def _reset_goal(token: contextvars.Token[str]) -> None:
    _goal.reset(token)
