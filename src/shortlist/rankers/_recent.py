"""The last few indexes a ranker built for candidate lists: found without waiting for a build.

A ranker keeps what it computed for a candidate list (a BM25 index, the embedding matrices, the
scale levers' names and servers) for the last few lists it saw, most recently used first. A list
is found by identity first, then by equality (a reloaded but identical catalog). When a feedback
log changes, the candidates carry other examples: the entry of the same list but for its examples
(:func:`~shortlist.rankers._text.same_but_examples`) is handed to the build, which keeps what does
not read examples.

Lookups take no lock: the entries are a tuple that is replaced, never changed in place, so a
request whose index is there is never held up by another thread's build (a new index after a
feedback write, a catalog warmed in the background). Builds take the build lock, one at a time,
and look again first, so a list is built once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from shortlist._types import Candidate
from shortlist.rankers._text import same_but_examples

__all__ = ["RecentIndexes"]


class _Entry(Protocol):
    @property
    def candidates(self) -> tuple[Candidate, ...]: ...


E = TypeVar("E", bound=_Entry)


def _any(entry: Any) -> bool:
    return True


class RecentIndexes(Generic[E]):
    """The entries of the last ``slots`` candidate lists, most recently used first (thread-safe).

    Args:
        slots: how many lists to keep.
        lock: the lock builds hold (default: a new one); a ranker passes its own when its builds
            share state with other methods.
    """

    def __init__(self, slots: int, *, lock: threading.Lock | threading.RLock | None = None) -> None:
        self.slots = slots
        self._entries: tuple[E, ...] = ()
        self._swap = threading.Lock()  # held only to replace the tuple
        self._build = lock if lock is not None else threading.Lock()
        # the last superset answer, for the list it was asked of and the entries it read: a search hands one
        # pool to several rankers and parts (the query, the turn's message), each of which asks again
        self._last_superset: tuple[tuple[Candidate, ...], tuple[E, ...], float, Any] | None = None

    @property
    def entries(self) -> tuple[E, ...]:
        """The entries, most recently used first."""
        return self._entries

    def find(self, cands: tuple[Candidate, ...], accept: Callable[[E], bool] = _any) -> E | None:
        """The entry of ``cands`` (identity, then equality) that ``accept`` takes, or None; no lock waited for."""
        entries = self._entries
        for pos, entry in enumerate(entries):
            got = entry.candidates
            if (got is cands or (len(got) == len(cands) and got == cands)) and accept(entry):
                if pos and self._swap.acquire(blocking=False):  # move it first, unless that means waiting
                    try:
                        self._entries = (entry, *(e for e in self._entries if e is not entry))
                    finally:
                        self._swap.release()
                return entry
        return None

    def superset(self, cands: tuple[Candidate, ...], *, least: float = 0.5) -> tuple[E, npt.NDArray[np.int64]] | None:
        """An entry of a longer list that holds ``cands`` in its order, and their positions in it.

        None when ``cands`` has an entry of its own, or no entry's list holds them all, in order, as
        the same candidates (identical or equal), with ``cands`` at least ``least`` of it: a ranker
        scores such a list among the one it indexed (a ``find_tools`` search's pool is the catalog
        less what the model can call) instead of indexing it; a few candidates of a large catalog
        are cheaper to index alone. No lock is waited for.
        """
        last = self._last_superset
        entries = self._entries
        if last is not None and last[0] is cands and last[1] is entries and last[2] == least:
            answer: tuple[E, npt.NDArray[np.int64]] | None = last[3]
            return answer
        answer = self._superset(cands, entries, least)
        self._last_superset = (cands, entries, least, answer)
        return answer

    def _superset(
        self, cands: tuple[Candidate, ...], entries: tuple[E, ...], least: float
    ) -> tuple[E, npt.NDArray[np.int64]] | None:
        if not cands or self.find(cands) is not None:
            return None
        for entry in entries:
            full = entry.candidates
            if len(full) <= len(cands) or len(cands) < least * len(full):
                continue
            positions = np.empty(len(cands), dtype=np.int64)
            at = 0
            for n, c in enumerate(cands):  # both in list order: one walk
                while at < len(full) and full[at] is not c and full[at].id != c.id:
                    at += 1
                if at == len(full) or (full[at] is not c and full[at] != c):
                    break
                positions[n] = at
                at += 1
            else:
                positions.setflags(write=False)  # the answer is kept and handed out again: read-only
                return entry, positions
        return None

    def get(
        self, cands: tuple[Candidate, ...], build: Callable[[E | None], E], accept: Callable[[E], bool] = _any
    ) -> E:
        """The entry of ``cands``, built on a miss by ``build(like)``: ``like`` is the entry of the same
        list but for its examples (None: none kept)."""
        hit = self.find(cands, accept)
        if hit is not None:
            return hit
        with self._build:
            hit = self.find(cands, accept)  # built by another thread while this one waited
            if hit is not None:
                return hit
            like = next((e for e in self._entries if accept(e) and same_but_examples(e.candidates, cands)), None)
            entry = build(like)
            with self._swap:
                self._entries = (entry, *self._entries)[: self.slots]
            return entry

    def clear(self) -> None:
        """Forget every entry."""
        with self._swap:
            self._entries = ()
            self._last_superset = None
