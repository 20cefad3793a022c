"""Memory: facts about a subject, scoped per subject, read and written by the model through tools."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.memory._record import Memory
    from shortlist.memory._sqlite import SqliteMemoryStore
    from shortlist.memory._store import InMemoryStore, MemoryStore
    from shortlist.memory._tools import MemoryTools

__all__ = [
    "InMemoryStore",
    "Memory",
    "MemoryStore",
    "MemoryTools",
    "SqliteMemoryStore",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "InMemoryStore": "shortlist.memory._store",
    "Memory": "shortlist.memory._record",
    "MemoryStore": "shortlist.memory._store",
    "MemoryTools": "shortlist.memory._tools",
    "SqliteMemoryStore": "shortlist.memory._sqlite",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "CONSENT_CATEGORIES": ("shortlist.memory._record", None),
    "ConsentCategory": ("shortlist.memory._record", None),
    "DEFAULT_CONFIDENCE": ("shortlist.memory._tools", None),
    "MAX_METADATA_BYTES": ("shortlist.memory._record", None),
    "MAX_METADATA_DEPTH": ("shortlist.memory._record", None),
    "MEMORY_TOOL_NAMES": ("shortlist.memory._tools", None),
    "MemoryToolCalled": ("shortlist.memory._tools", None),
    "PROVENANCES": ("shortlist.memory._record", None),
    "Provenance": ("shortlist.memory._record", None),
    "ToolDefinition": ("shortlist.memory._tools", None),
    "scope_key": ("shortlist.memory._record", None),
    "validate_metadata": ("shortlist.memory._record", None),
    "validate_scope": ("shortlist.memory._record", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
