"""The ``Memory`` record, its scope rules, provenance values and consent categories.

A memory is a fact about a *subject* (a user, a workspace), stored under a **scope**: a flat
mapping of string keys to string values. A scope is an exact-match bucket: ``{user_id: a}``
and ``{user_id: a, workspace_id: y}`` are unrelated, with no hierarchy and no inheritance.
An empty scope, or one with an empty key or value, is rejected by every store operation
(:class:`~shortlist.errors.MemoryScopeError`): a shared "global" bucket is where one subject's
facts leak to another, so there is none.

Metadata must survive a round trip through every store and renderer, so it is checked when a
``Memory`` is made, before anything is stored: JSON values only (string keys, finite numbers),
at most :data:`MAX_METADATA_DEPTH` levels of nesting and :data:`MAX_METADATA_BYTES` bytes of
JSON. A write that breaks a bound is refused whole (:class:`~shortlist.errors.MemoryValueError`),
so one request can never store what a later ``list`` or ``recall`` cannot return.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from shortlist.errors import MemoryScopeError, MemoryValueError, UsageError

__all__ = [
    "CONSENT_CATEGORIES",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "PROVENANCES",
    "ConsentCategory",
    "Memory",
    "Provenance",
    "new_memory_id",
    "scope_key",
    "validate_metadata",
    "validate_scope",
]


class Provenance(StrEnum):
    """Who caused a memory to exist (metadata key ``provenance``)."""

    USER_REQUESTED = "user_requested"
    AGENT_EXTRACTED = "agent_extracted"
    SYSTEM_GENERATED = "system_generated"
    OPERATOR_CURATED = "operator_curated"


class ConsentCategory(StrEnum):
    """What kind of personal data a memory holds (metadata key ``consent_category``).

    Unknown category strings are accepted by the stores; these are the well-known ones.
    """

    IDENTITY = "memory:identity"
    PREFERENCES = "memory:preferences"
    CONTEXT = "memory:context"
    LOCATION = "memory:location"
    HEALTH = "memory:health"
    HISTORY = "memory:history"


#: The well-known provenance values.
PROVENANCES = tuple(p.value for p in Provenance)
#: The well-known consent categories.
CONSENT_CATEGORIES = tuple(c.value for c in ConsentCategory)


#: The deepest nesting of a memory's metadata (the metadata object itself is level 1).
MAX_METADATA_DEPTH = 32
#: The largest a memory's metadata may be, as compact UTF-8 JSON.
MAX_METADATA_BYTES = 64 * 1024


def validate_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Check that ``metadata`` can be stored and returned by every store; return a copy.

    The walk is iterative, so even input nested far past Python's recursion limit is refused
    cleanly rather than with a ``RecursionError``.

    Raises:
        MemoryValueError: not a mapping, nested deeper than :data:`MAX_METADATA_DEPTH`, larger
            than :data:`MAX_METADATA_BYTES`, a non-string key, or a value JSON cannot hold.
    """
    if not isinstance(metadata, Mapping):
        raise MemoryValueError(f"memory metadata must be an object, not {type(metadata).__name__}")
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
            if any(not isinstance(k, str) for k in value):
                raise MemoryValueError("memory metadata keys must be strings")
        elif isinstance(value, (list, tuple)):
            children = value
        elif value is None or isinstance(value, (str, bool, int)):
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise MemoryValueError("memory metadata numbers must be finite (no NaN or infinity)")
            continue
        else:
            raise MemoryValueError(f"memory metadata values must be JSON, not {type(value).__name__}")
        if depth > MAX_METADATA_DEPTH:
            raise MemoryValueError(f"memory metadata is nested more than {MAX_METADATA_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        raise MemoryValueError(f"memory metadata is {size} bytes of JSON; the most is {MAX_METADATA_BYTES}")
    return dict(metadata)


def validate_scope(scope: Mapping[str, str]) -> dict[str, str]:
    """Return ``scope`` as a plain dict, or raise if it cannot name a subject.

    Raises:
        MemoryScopeError: the scope is not a mapping, is empty, or has a non-string or empty
            key or value.
    """
    if not isinstance(scope, Mapping):
        raise MemoryScopeError(f"a memory scope must be a mapping of strings, not {type(scope).__name__}")
    if not scope:
        raise MemoryScopeError("a memory scope must not be empty (there is no global bucket)")
    out: dict[str, str] = {}
    for key, value in scope.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise MemoryScopeError(f"memory scope keys and values must be strings: {key!r}={value!r}")
        if not key or not value:
            raise MemoryScopeError(f"memory scope has an empty key or value: {key!r}={value!r}")
        out[key] = value
    return out


def scope_key(scope: Mapping[str, str]) -> str:
    """The canonical bucket key of a scope: the sorted pairs as compact JSON.

    JSON (not ``k=v;`` concatenation) so that no value containing ``;`` or ``=`` can make two
    different scopes collide.

    Raises:
        MemoryScopeError: the scope is invalid (see :func:`validate_scope`).
    """
    clean = validate_scope(scope)
    return json.dumps(sorted(clean.items()), separators=(",", ":"), ensure_ascii=False)


def new_memory_id() -> str:
    """A fresh, unguessable memory id: ``mem_<32 hex digits>``."""
    return f"mem_{uuid.uuid4().hex}"


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parse_time(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return _utc(value)
    return _utc(datetime.fromisoformat(str(value)))


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered fact about a subject.

    Args:
        type: free-form kind: ``"preference"``, ``"fact"``, ``"episodic"``, ``"general"``,
            ``"document"`` (grounding from a corpus) …
        content: a natural-language summary; what gets injected.
        scope: the subject bucket, e.g. ``{"user_id": "u1"}`` (exact match, see module docs).
            Documents retrieved from a corpus carry the scope they were retrieved for.
        id: assigned by the store on save when empty.
        metadata: free-form; well-known keys ``provenance`` and ``consent_category``.
        confidence: 0..1 by convention (not clamped).
        session_id: the session that produced it, if any.
        turn_range: the (first, last) turn it was drawn from.
        created_at: set by the store on first save.
        accessed_at: set by the store on save.
        expires_at: after this instant the stores no longer return it.
    """

    type: str
    content: str
    scope: Mapping[str, str] = field(default_factory=dict)
    id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    confidence: float = 1.0
    session_id: str = ""
    turn_range: tuple[int, int] = (0, 0)
    created_at: datetime | None = None
    accessed_at: datetime | None = None
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise UsageError("Memory.type must be a non-empty string")
        if not isinstance(self.content, str):
            raise TypeError("Memory.content must be a string")
        object.__setattr__(self, "scope", dict(self.scope or {}))
        object.__setattr__(self, "metadata", validate_metadata(self.metadata or {}))
        object.__setattr__(self, "confidence", float(self.confidence))
        tr = tuple(int(t) for t in self.turn_range)
        if len(tr) != 2:
            raise UsageError("Memory.turn_range must hold two integers")
        object.__setattr__(self, "turn_range", tr)
        for name in ("created_at", "accessed_at", "expires_at"):
            object.__setattr__(self, name, _utc(getattr(self, name)))

    @property
    def provenance(self) -> str:
        """The ``provenance`` metadata value, or ``""``."""
        return str(self.metadata.get("provenance", ""))

    @property
    def consent_category(self) -> str:
        """The ``consent_category`` metadata value, or ``""``."""
        return str(self.metadata.get("consent_category", ""))

    def is_expired(self, now: datetime | None = None) -> bool:
        """True when ``expires_at`` is set and not after ``now`` (default: the current time)."""
        if self.expires_at is None:
            return False
        return self.expires_at <= (now or datetime.now(UTC))

    def to_dict(self, *, include_scope: bool = True) -> dict[str, Any]:
        """The JSON form (spec names): empty metadata, session id and expiry are omitted.

        Args:
            include_scope: include ``scope`` (the memory tools leave it out: the model never
                sees the scope).
        """
        out: dict[str, Any] = {"id": self.id, "type": self.type, "content": self.content}
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        out["confidence"] = self.confidence
        if include_scope:
            out["scope"] = dict(self.scope)
        if self.session_id:
            out["session_id"] = self.session_id
        out["turn_range"] = list(self.turn_range)
        out["created_at"] = _iso(self.created_at)
        out["accessed_at"] = _iso(self.accessed_at)
        if self.expires_at is not None:
            out["expires_at"] = _iso(self.expires_at)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Memory:
        """Build a memory from its JSON form (the inverse of :meth:`to_dict`)."""
        tr = data.get("turn_range") or (0, 0)
        return cls(
            type=str(data.get("type") or "general"),
            content=str(data.get("content", "")),
            scope=dict(data.get("scope") or {}),
            id=str(data.get("id") or ""),
            metadata=dict(data.get("metadata") or {}),
            confidence=float(data.get("confidence", 1.0)),
            session_id=str(data.get("session_id") or ""),
            turn_range=(int(tr[0]), int(tr[1])),
            created_at=_parse_time(data.get("created_at")),
            accessed_at=_parse_time(data.get("accessed_at")),
            expires_at=_parse_time(data.get("expires_at")),
        )
