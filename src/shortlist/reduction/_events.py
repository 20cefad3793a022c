"""Events of context reduction: one frozen dataclass per kind of decision the stage takes.

Each is emitted through :func:`shortlist._events.emit` (logger ``shortlist.reduction``) and recorded
in the run's :class:`~shortlist.reduction._contract.Diagnostics`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event

__all__ = [
    "ReductionApplied",
    "ReductionBudgetExceeded",
    "ReductionCancelledEvent",
    "ReductionCompleted",
    "ReductionCompressionDiscarded",
    "ReductionEvent",
    "ReductionModelCall",
    "ReductionSelectionRejected",
    "ReductionSkipped",
    "ReductionStarted",
]


@dataclass(frozen=True, kw_only=True)
class ReductionEvent(Event):
    """Base of reduction events; ``stage_id`` names the stage run that took the decision."""

    name: ClassVar[str] = "reduction.event"
    area: ClassVar[str] = "reduction"
    stage_id: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionSkipped(ReductionEvent):
    """The conversation already fits its budget: the stage did nothing and made no model call."""

    name: ClassVar[str] = "reduction.skipped"
    level: int = logging.DEBUG
    tokens: int | None = None
    chars: int = 0
    max_tokens: int | None = None
    max_chars: int | None = None


@dataclass(frozen=True, kw_only=True)
class ReductionStarted(ReductionEvent):
    """The conversation is over budget and the stage starts reducing it."""

    name: ClassVar[str] = "reduction.started"
    level: int = logging.DEBUG
    tokens: int | None = None
    chars: int = 0
    max_tokens: int | None = None
    max_chars: int | None = None
    protected_tokens: int | None = None
    protected_chars: int = 0
    counter: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionApplied(ReductionEvent):
    """One rung of the ladder changed the conversation.

    ``kind`` is ``truncate``, ``select``, ``compress`` or ``drop``; ``saved_tokens`` is ``None``
    when no token budget applies.
    """

    name: ClassVar[str] = "reduction.applied"
    level: int = logging.INFO
    kind: str = ""
    reducer: str = ""
    step_ids: tuple[str, ...] = ()
    saved_tokens: int | None = None
    saved_chars: int = 0


@dataclass(frozen=True, kw_only=True)
class ReductionModelCall(ReductionEvent):
    """A reducer called the model through ``call_model``; ``ok`` and ``error`` give the outcome."""

    name: ClassVar[str] = "reduction.model_call"
    level: int = logging.INFO
    reducer: str = ""
    transport: str = ""
    max_output_tokens: int = 0
    ok: bool = False
    ms: float = 0.0
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionSelectionRejected(ReductionEvent):
    """A selector's answer was rejected as a whole; the stage fell back to the next rung.

    ``reason`` is ``unknown_ids``, ``invalid_answer``, ``error`` or ``call_budget_exhausted``.
    """

    name: ClassVar[str] = "reduction.selection_rejected"
    level: int = logging.WARNING
    selector: str = ""
    reason: str = ""
    unknown_ids: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionCompressionDiscarded(ReductionEvent):
    """A compressor's summary was discarded (or not attempted) and the stage fell back.

    ``reason`` is ``parse_error``, ``empty``, ``no_gain``, ``too_long``, ``error`` or
    ``call_budget_exhausted``.
    """

    name: ClassVar[str] = "reduction.compression_discarded"
    level: int = logging.WARNING
    compressor: str = ""
    reason: str = ""
    step_ids: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionBudgetExceeded(ReductionEvent):
    """The budget cannot be met without touching protected content.

    ``best_effort`` tells whether the over-budget result was returned (True) or an error raised.
    """

    name: ClassVar[str] = "reduction.budget_exceeded"
    level: int = logging.WARNING
    over_tokens: int = 0
    over_chars: int = 0
    best_effort: bool = False
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionCancelledEvent(ReductionEvent):
    """The run was cancelled through its signal; no partial result was returned."""

    name: ClassVar[str] = "reduction.cancelled"
    level: int = logging.WARNING
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class ReductionCompleted(ReductionEvent):
    """The stage finished reducing: the sizes before and after and the model calls used."""

    name: ClassVar[str] = "reduction.completed"
    level: int = logging.INFO
    tokens_before: int | None = None
    tokens_after: int | None = None
    chars_before: int = 0
    chars_after: int = 0
    calls_used: int = 0
    over_budget: bool = False
