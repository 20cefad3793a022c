"""Memory: facts about a subject, scoped per subject, read and written by the model through tools."""

from shortlist.memory.record import (
    CONSENT_CATEGORIES,
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    PROVENANCES,
    ConsentCategory,
    Memory,
    Provenance,
    scope_key,
    validate_metadata,
    validate_scope,
)
from shortlist.memory.sqlite import SqliteMemoryStore
from shortlist.memory.store import InMemoryStore, MemoryStore
from shortlist.memory.tools import (
    DEFAULT_CONFIDENCE,
    MEMORY_TOOL_NAMES,
    MemoryToolCalled,
    MemoryTools,
    ToolDefinition,
)

__all__ = [
    "CONSENT_CATEGORIES",
    "DEFAULT_CONFIDENCE",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MEMORY_TOOL_NAMES",
    "PROVENANCES",
    "ConsentCategory",
    "InMemoryStore",
    "Memory",
    "MemoryStore",
    "MemoryToolCalled",
    "MemoryTools",
    "Provenance",
    "SqliteMemoryStore",
    "ToolDefinition",
    "scope_key",
    "validate_metadata",
    "validate_scope",
]
