"""The ``MemoryStore`` contract and ``InMemoryStore``, the store for tests and short-lived hosts.

Every operation takes the scope it acts in; nothing crosses scopes. ``retrieve`` is the recall
path the ``memory__recall`` tool uses: **OR semantics** over the query's content terms (a memory
matching any term is a hit, more matching terms rank higher), because AND semantics is too strict
for recall (selection spec §8.6). An empty query returns everything, newest last, up to ``limit``.
Expired memories are never returned.
"""

from __future__ import annotations

import builtins
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from shortlist._text import analyser
from shortlist.errors import UsageError
from shortlist.memory._record import Memory, new_memory_id, scope_key, validate_scope

__all__ = ["InMemoryStore", "MemoryStore"]


def _check_limit(limit: int, offset: int = 0) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise UsageError(f"limit must be an integer >= 0, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise UsageError(f"offset must be an integer >= 0, got {offset!r}")


class MemoryStore(ABC):
    """Where memories live. Implementations must be safe for concurrent use.

    Scope rules (see :mod:`shortlist.memory._record`): exact-match buckets; an empty scope or an
    empty key/value raises :class:`~shortlist.errors.MemoryScopeError` on every operation.
    """

    @abstractmethod
    def save(self, memory: Memory) -> Memory:
        """Insert or replace ``memory`` in its own scope and return the stored copy.

        The store assigns ``id`` when empty, ``created_at`` on first save and ``accessed_at``
        on every save. Saving an id that exists in *another* scope creates a separate memory:
        ids are only unique within a scope.

        Raises:
            MemoryScopeError: ``memory.scope`` is invalid.
        """

    @abstractmethod
    def retrieve(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        types: Sequence[str] | None = None,
        limit: int = 10,
        min_confidence: float = 0.0,
    ) -> builtins.list[Memory]:
        """Recall memories of ``scope`` matching any content term of ``query``, best first.

        Args:
            scope: the subject bucket.
            query: free text; empty returns everything (insertion order) up to ``limit``.
            types: keep only these types (None or empty: all).
            limit: the most memories returned.
            min_confidence: keep only memories with at least this confidence (when > 0).
        """

    @abstractmethod
    def list(
        self,
        scope: Mapping[str, str],
        *,
        types: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[Memory]:
        """List memories of ``scope`` in insertion order: type filter, then offset, then limit."""

    @abstractmethod
    def delete(self, scope: Mapping[str, str], memory_id: str) -> bool:
        """Delete one memory of ``scope``; return whether it existed (a missing id is no error)."""

    @abstractmethod
    def delete_all(self, scope: Mapping[str, str]) -> int:
        """Delete every memory of ``scope``; return how many were deleted."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (connections, files). The default does nothing."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stamp(memory: Memory, existing: Memory | None, now: datetime) -> Memory:
    """The copy of ``memory`` a store saves: scope validated, id and timestamps filled in."""
    validate_scope(memory.scope)
    return replace(
        memory,
        id=memory.id or new_memory_id(),
        created_at=existing.created_at if existing is not None else (memory.created_at or now),
        accessed_at=now,
    )


class InMemoryStore(MemoryStore):
    """A process-local store: a dict of scope buckets behind a lock. Nothing persists.

    Recall ranks by the number of distinct query terms (stemmed, stopwords dropped) found in
    the content; ties keep insertion order. Each memory's terms are computed once, when it is
    saved, so a recall costs a set intersection per memory, not a tokenisation.
    """

    def __init__(self) -> None:
        # scope key -> memory id -> (memory, the stemmed terms of its content)
        self._buckets: dict[str, dict[str, tuple[Memory, frozenset[str]]]] = {}
        self._lock = threading.Lock()

    def save(self, memory: Memory) -> Memory:
        """See :meth:`MemoryStore.save`."""
        key = scope_key(memory.scope)
        now = datetime.now(UTC)
        vocabulary = frozenset(analyser("corpus").tokens(memory.content, keep_stopwords=True))
        with self._lock:
            bucket = self._buckets.setdefault(key, {})
            existing = bucket.get(memory.id) if memory.id else None
            stored = stamp(memory, existing[0] if existing else None, now)
            bucket.pop(stored.id, None)  # re-insert: a replaced memory moves to the end
            bucket[stored.id] = (stored, vocabulary)
        return stored

    def _live(
        self, scope: Mapping[str, str], types: Sequence[str] | None
    ) -> builtins.list[tuple[Memory, frozenset[str]]]:
        key = scope_key(scope)
        now = datetime.now(UTC)
        wanted = set(types or ())
        with self._lock:
            items = builtins.list(self._buckets.get(key, {}).values())
        return [(m, v) for m, v in items if not m.is_expired(now) and (not wanted or m.type in wanted)]

    def retrieve(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        types: Sequence[str] | None = None,
        limit: int = 10,
        min_confidence: float = 0.0,
    ) -> builtins.list[Memory]:
        """See :meth:`MemoryStore.retrieve`."""
        _check_limit(limit)
        items = [(m, v) for m, v in self._live(scope, types) if min_confidence <= 0 or m.confidence >= min_confidence]
        wanted = set(analyser("corpus").terms(query)) if query.strip() else set()
        if not wanted:
            return [m for m, _ in items[:limit]]
        scored = []
        for pos, (m, vocabulary) in enumerate(items):
            hits = len(wanted.intersection(vocabulary))
            if hits:
                scored.append((-hits, pos, m))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [m for _, _, m in scored[:limit]]

    def list(
        self,
        scope: Mapping[str, str],
        *,
        types: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[Memory]:
        """See :meth:`MemoryStore.list`."""
        _check_limit(limit, offset)
        return [m for m, _ in self._live(scope, types)[offset : offset + limit]]

    def delete(self, scope: Mapping[str, str], memory_id: str) -> bool:
        """See :meth:`MemoryStore.delete`."""
        key = scope_key(scope)
        with self._lock:
            return self._buckets.get(key, {}).pop(memory_id, None) is not None

    def delete_all(self, scope: Mapping[str, str]) -> int:
        """See :meth:`MemoryStore.delete_all`."""
        key = scope_key(scope)
        with self._lock:
            return len(self._buckets.pop(key, {}))
