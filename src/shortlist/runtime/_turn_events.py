"""The events of a runtime turn that went on without a step: a failed step, a refused ``call_tool``,
tools prefetched. Re-exported by :mod:`shortlist.runtime._conversation`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event

__all__ = ["BridgeCallRefused", "RuntimeStepFailed", "ToolsPrefetched"]


@dataclass(frozen=True, kw_only=True)
class RuntimeStepFailed(Event):
    """A step of the turn failed and the turn went on without it."""

    name: ClassVar[str] = "runtime.step_failed"
    area: ClassVar[str] = "runtime"
    level: int = 30
    step: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class BridgeCallRefused(Event):
    """A ``call_tool`` call was not run: the tool was not found yet, or its arguments were refused.

    The model got the reason as the call's tool error and the turn went on.
    """

    name: ClassVar[str] = "runtime.bridge_call_refused"
    area: ClassVar[str] = "runtime"
    level: int = logging.WARNING
    tool: str = ""
    reason: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolsPrefetched(Event):
    """Deferred tools were loaded into the history before the model call (no model call spent).

    ``companions`` names those of ``tools`` loaded because they are usually called with the others.
    """

    name: ClassVar[str] = "runtime.tools_prefetched"
    area: ClassVar[str] = "runtime"
    level: int = logging.INFO
    tools: tuple[str, ...] = ()
    companions: tuple[str, ...] = ()
