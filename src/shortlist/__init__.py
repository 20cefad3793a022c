"""shortlist: decide, on every turn of an LLM agent, what enters the model's context."""

from __future__ import annotations

from shortlist.errors import (
    CatalogError,
    ConfigError,
    ContextBudgetError,
    MissingDependencyError,
    SelectorError,
    ShortlistError,
)
from shortlist.events import Event, add_event_hook, event_hooks, remove_event_hook

__version__ = "0.1.0"

__all__ = [
    "CatalogError",
    "ConfigError",
    "ContextBudgetError",
    "Event",
    "MissingDependencyError",
    "SelectorError",
    "ShortlistError",
    "__version__",
    "add_event_hook",
    "event_hooks",
    "remove_event_hook",
]
