"""Selection: the selector contract, per-turn narrowing, and resolving selectors by name."""

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

__all__ = [
    "DEFAULT_PIN_NAMESPACES",
    "DEFAULT_SELECTOR",
    "FALLBACK_REASONS",
    "FunctionSelector",
    "NarrowingPolicy",
    "PinPolicy",
    "Selector",
    "SelectorContext",
    "SelectorRegistry",
    "TurnSelection",
    "anarrow",
    "create_builtin_selector",
    "narrow",
]
