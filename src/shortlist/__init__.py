"""shortlist: decide, on every turn of an LLM agent, what enters the model's context."""

from __future__ import annotations

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
