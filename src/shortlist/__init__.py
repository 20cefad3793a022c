"""shortlist: decide, on every turn of an LLM agent, what enters the model's context.

The names below are imported on first use (a module ``__getattr__``), so ``import shortlist``
costs almost nothing; ``from shortlist import narrow`` imports only what ``narrow`` needs.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing would be most of this module's cost
if TYPE_CHECKING:
    from typing import Any

    from shortlist.adapters.catalog import load_catalog
    from shortlist.config import RuntimeConfig, load_runtime_config
    from shortlist.errors import (
        CatalogError,
        ConfigError,
        ContextBudgetError,
        MissingDependencyError,
        SelectorError,
        ShortlistError,
    )
    from shortlist.events import Event, add_event_hook, event_hooks, remove_event_hook
    from shortlist.selection.base import FunctionSelector, Selector, SelectorContext
    from shortlist.selection.facade import Shortlist
    from shortlist.selection.narrowing import NarrowingPolicy, PinPolicy, TurnSelection, anarrow, narrow
    from shortlist.types import Candidate, Query, Selection

__version__ = "0.1.0"

__all__ = [
    "Candidate",
    "CatalogError",
    "ConfigError",
    "ContextBudgetError",
    "Event",
    "FunctionSelector",
    "MissingDependencyError",
    "NarrowingPolicy",
    "PinPolicy",
    "Query",
    "RuntimeConfig",
    "Selection",
    "Selector",
    "SelectorContext",
    "SelectorError",
    "Shortlist",
    "ShortlistError",
    "TurnSelection",
    "__version__",
    "add_event_hook",
    "anarrow",
    "event_hooks",
    "load_catalog",
    "load_runtime_config",
    "narrow",
    "remove_event_hook",
]

# public name -> the module that defines it (imported by __getattr__ on first use)
_LAZY = {
    "load_catalog": "shortlist.adapters.catalog",
    "RuntimeConfig": "shortlist.config",
    "load_runtime_config": "shortlist.config",
    **dict.fromkeys(
        (
            "CatalogError",
            "ConfigError",
            "ContextBudgetError",
            "MissingDependencyError",
            "SelectorError",
            "ShortlistError",
        ),
        "shortlist.errors",
    ),
    **dict.fromkeys(("Event", "add_event_hook", "event_hooks", "remove_event_hook"), "shortlist.events"),
    **dict.fromkeys(("FunctionSelector", "Selector", "SelectorContext"), "shortlist.selection.base"),
    "Shortlist": "shortlist.selection.facade",
    **dict.fromkeys(
        ("NarrowingPolicy", "PinPolicy", "TurnSelection", "anarrow", "narrow"), "shortlist.selection.narrowing"
    ),
    **dict.fromkeys(("Candidate", "Query", "Selection"), "shortlist.types"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shortlist' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
