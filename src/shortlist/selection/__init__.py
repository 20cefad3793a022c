"""Selection: the selector contract, per-turn narrowing, failure wrappers, and resolving selectors by name."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__: list[str] = []

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "BreakerSelector": ("shortlist.rankers._breaker", None),
    "DEFAULT_PIN_NAMESPACES": ("shortlist.selection._narrowing", None),
    "DEFAULT_SELECTOR": ("shortlist.rankers._registry", None),
    "FALLBACK_REASONS": ("shortlist.selection._narrowing", None),
    "FallbackSelector": ("shortlist.rankers._wrappers", "shortlist.rankers"),
    "FunctionSelector": ("shortlist.selection._base", "shortlist"),
    "NarrowingPolicy": ("shortlist.selection._narrowing", "shortlist"),
    "PinPolicy": ("shortlist.selection._narrowing", "shortlist"),
    "Selector": ("shortlist.selection._base", "shortlist"),
    "SelectorContext": ("shortlist.selection._base", "shortlist"),
    "SelectorRegistry": ("shortlist.rankers._registry", "shortlist.rankers"),
    "TimeoutSelector": ("shortlist.rankers._timeout", "shortlist.rankers"),
    "TurnSelection": ("shortlist.selection._narrowing", "shortlist"),
    "WrapperSelector": ("shortlist.rankers._wrappers", None),
    "anarrow": ("shortlist.selection._narrowing", "shortlist"),
    "create_builtin_selector": ("shortlist.rankers._registry", None),
    "narrow": ("shortlist.selection._narrowing", "shortlist"),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
