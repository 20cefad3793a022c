"""Selection: the selector contract, per-turn narrowing, failure wrappers, and resolving selectors by name."""

from __future__ import annotations

from shortlist.selection.base import FunctionSelector, Selector, SelectorContext
from shortlist.selection.narrowing import (
    DEFAULT_PIN_NAMESPACES,
    FALLBACK_REASONS,
    NarrowingPolicy,
    PinPolicy,
    TurnSelection,
    anarrow,
    narrow,
)
from shortlist.selection.registry import DEFAULT_SELECTOR, SelectorRegistry, create_builtin_selector
from shortlist.selection.wrappers import BreakerSelector, FallbackSelector, TimeoutSelector, WrapperSelector

__all__ = [
    "DEFAULT_PIN_NAMESPACES",
    "DEFAULT_SELECTOR",
    "FALLBACK_REASONS",
    "BreakerSelector",
    "FallbackSelector",
    "FunctionSelector",
    "NarrowingPolicy",
    "PinPolicy",
    "Selector",
    "SelectorContext",
    "SelectorRegistry",
    "TimeoutSelector",
    "TurnSelection",
    "WrapperSelector",
    "anarrow",
    "create_builtin_selector",
    "narrow",
]
