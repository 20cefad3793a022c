"""Values remembered for the last few objects, found by the object's identity.

A service passes the same catalog tuple on every turn; what is derived from it (the narrowing's
split, a deadline's catalog key, a feedback log's enrichment of it) is found again by identity,
without hashing or comparing 10,000 candidates. Each entry holds its object, so the object's
``id()`` cannot be reused by another while the entry is kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["IdentityMemo"]

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """A value per (object, key) for the last ``slots`` ones used, least recently used out first (thread-safe).

    Args:
        slots: how many entries to keep.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._items: OrderedDict[tuple[Hashable, ...], tuple[object, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, obj: object, *key: Hashable) -> V | None:
        """The value kept for ``obj`` itself (not an equal object) and ``key``, or None."""
        k = (id(obj), *key)
        hit = self._items.get(k)
        if hit is None or hit[0] is not obj:
            return None
        with self._lock:
            if k in self._items:
                self._items.move_to_end(k)
        return hit[1]

    def put(self, obj: object, value: V, *key: Hashable) -> None:
        """Keep ``value`` for ``obj`` and ``key`` (the least recently used entry leaves when full)."""
        k = (id(obj), *key)
        with self._lock:
            self._items[k] = (obj, value)
            self._items.move_to_end(k)
            while len(self._items) > self.slots:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
