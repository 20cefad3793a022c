"""shortlist: decide, on every turn of an LLM agent, what enters the model's context.

The names below are imported on first use (a module ``__getattr__``), so ``import shortlist``
costs almost nothing; ``from shortlist import narrow`` imports only what ``narrow`` needs.
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing would be most of this module's cost
if TYPE_CHECKING:
    from typing import Any

    from shortlist._config import RuntimeConfig, load_runtime_config
    from shortlist._events import Event, add_event_hook, event_hooks, remove_event_hook
    from shortlist._tokens import tool_tokens
    from shortlist._types import Candidate, Query, Selection
    from shortlist.adapters._catalog import load_catalog
    from shortlist.errors import ShortlistError
    from shortlist.selection._base import FunctionSelector, Selector, SelectorContext
    from shortlist.selection._facade import Shortlist
    from shortlist.selection._narrowing import NarrowingPolicy, PinPolicy, TurnSelection, anarrow, narrow

__version__ = "0.1.0"

__all__ = [
    "Candidate",
    "Event",
    "FunctionSelector",
    "NarrowingPolicy",
    "PinPolicy",
    "Query",
    "RuntimeConfig",
    "Selection",
    "Selector",
    "SelectorContext",
    "Shortlist",
    "ShortlistError",
    "TurnSelection",
    "add_event_hook",
    "anarrow",
    "event_hooks",
    "load_catalog",
    "load_runtime_config",
    "narrow",
    "remove_event_hook",
    "tool_tokens",
]

# public name -> the module that defines it (imported by __getattr__ on first use)
_LAZY: dict[str, str] = {
    "Candidate": "shortlist._types",
    "Event": "shortlist._events",
    "FunctionSelector": "shortlist.selection._base",
    "NarrowingPolicy": "shortlist.selection._narrowing",
    "PinPolicy": "shortlist.selection._narrowing",
    "Query": "shortlist._types",
    "RuntimeConfig": "shortlist._config",
    "Selection": "shortlist._types",
    "Selector": "shortlist.selection._base",
    "SelectorContext": "shortlist.selection._base",
    "Shortlist": "shortlist.selection._facade",
    "ShortlistError": "shortlist.errors",
    "TurnSelection": "shortlist.selection._narrowing",
    "add_event_hook": "shortlist._events",
    "event_hooks": "shortlist._events",
    "anarrow": "shortlist.selection._narrowing",
    "load_catalog": "shortlist.adapters._catalog",
    "load_runtime_config": "shortlist._config",
    "narrow": "shortlist.selection._narrowing",
    "remove_event_hook": "shortlist._events",
    "tool_tokens": "shortlist._tokens",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "count_tokens": ("shortlist._tokens", None),
    "CatalogError": ("shortlist.errors", "shortlist.errors"),
    "ConfigError": ("shortlist.errors", "shortlist.errors"),
    "ContextBudgetError": ("shortlist.errors", "shortlist.errors"),
    "MissingDependencyError": ("shortlist.errors", "shortlist.errors"),
    "SelectorError": ("shortlist.errors", "shortlist.errors"),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
