"""A deadline as a selector that wraps a selector: the one way a selector gets a deadline.

:class:`TimeoutSelector` runs the wrapped selector on its own bounded pool
(:mod:`shortlist.rankers._isolation`), so a hung one starves only itself, and warms it for a
new catalog outside the deadline; :func:`with_deadline` builds one from a policy's ``timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence

from shortlist._memo import IdentityMemo
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorTimeout, UsageError
from shortlist.rankers._isolation import arun_isolated, run_isolated
from shortlist.rankers._wrappers import WrapperSelector
from shortlist.selection._base import Selector

__all__ = ["TimeoutSelector", "with_deadline"]

logger = logging.getLogger("shortlist.selection")


def _thread_run(selector: Selector) -> bool:
    """True when ``selector.aselect`` is the base class's (``select`` in a worker thread)."""
    return type(selector).aselect is Selector.aselect


#: How many catalogs' keys are remembered (each holds its tuple: a request's inline candidates too).
_KEYS_KEPT = 8


class _Prepared:
    """The catalogs each selector under a deadline was prepared for, outside the deadline.

    Keyed by the wrapped selector (weakly), so every :class:`TimeoutSelector` around the same
    selector (the registry's, a policy's built per turn) warms it once per catalog.
    """

    def __init__(self, slots: int = 64) -> None:
        self._slots = slots
        self._seen: weakref.WeakKeyDictionary[Selector, tuple[threading.Lock, OrderedDict[int, None]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._keys: IdentityMemo[int] = IdentityMemo(_KEYS_KEPT)

    def key(self, candidates: Sequence[Candidate]) -> int:
        """The catalog's key: its ids, descriptions and examples (the same tuple again: remembered, not
        hashed again; 3.5 ms a turn at 10,000 tools)."""
        if isinstance(candidates, tuple):
            hit = self._keys.get(candidates)
            if hit is not None:
                return hit
        key = hash(tuple((c.id, c.description, c.examples) for c in candidates))
        if isinstance(candidates, tuple):
            self._keys.put(candidates, key)
        return key

    def _entry(self, selector: Selector) -> tuple[threading.Lock, OrderedDict[int, None]] | None:
        try:
            with self._lock:
                entry = self._seen.get(selector)
                if entry is None:
                    entry = self._seen[selector] = (threading.Lock(), OrderedDict())
                return entry
        except TypeError:  # an unhashable selector (a dataclass with eq): not remembered, not warmed
            return None

    def due(self, selector: Selector, candidates: Sequence[Candidate]) -> bool:
        """Whether ``selector`` has not been prepared for ``candidates`` yet."""
        entry = self._entry(selector)
        return entry is not None and bool(candidates) and self.key(candidates) not in entry[1]

    def prepare(self, selector: Selector, candidates: Sequence[Candidate], *, once: bool) -> None:
        """Prepare ``selector`` for ``candidates`` and remember it.

        ``once``: skip a catalog already prepared, and log a failure instead of raising (the
        timed turn that follows reports it, as a fallback); it is remembered all the same.
        """
        entry = self._entry(selector)
        if entry is None or not candidates:
            if not once:
                selector.prepare(candidates)
            return
        lock, seen = entry
        key = self.key(candidates)
        if once and key in seen:  # no lock: a warm-up of another catalog under way must not hold this turn
            return
        with lock:  # concurrent first turns wait for one warm-up
            if once and key in seen:
                return
            try:
                selector.prepare(candidates)
            except Exception as exc:  # the timed turn reports it (a fallback event); warming is best effort
                if not once:
                    raise
                logger.debug("warm-up of selector %s failed: %s", selector.name, exc)
            seen[key] = None
            seen.move_to_end(key)
            while len(seen) > self._slots:
                seen.popitem(last=False)


_PREPARED = _Prepared()


class TimeoutSelector(WrapperSelector):
    """Give ``wrapped`` a deadline of ``timeout_s`` seconds: the one way a selector gets a deadline.

    A thread-run selector runs on its own bounded pool (a Python thread cannot be killed: a hung
    call keeps its thread, and only that selector's threads); a native async one is awaited
    with :func:`asyncio.wait_for` (cancelled at the deadline). Events the wrapped selector emits
    reach the caller's scoped hooks.

    Start-up work is not the turn's: the first time the wrapped selector meets a catalog, its
    :meth:`~shortlist.selection._base.Selector.prepare` runs *outside* the deadline (a ranker
    loads its model and indexes the catalog), once per catalog; the deadline bounds the turn's
    own work. The registry builds one from a selector's ``timeout_ms``, :func:`with_deadline`
    from a policy's ``timeout_s`` (:func:`~shortlist.selection._narrowing.narrow`, the service).

    Raises (from ``select``/``aselect``):
        SelectorTimeout: no answer in time, or every thread of the selector is still busy.
    """

    def __init__(self, wrapped: Selector, timeout_s: float, *, name: str | None = None) -> None:
        if not timeout_s > 0:
            raise UsageError("timeout_s must be positive")
        super().__init__(wrapped, name=name)
        self.timeout_s = timeout_s

    def _timeout(self) -> SelectorTimeout:
        return SelectorTimeout(
            f"selector {self.wrapped.name!r} did not answer within {self.timeout_s:.3f} s", selector=self.name
        )

    def prepare(self, candidates: Sequence[Candidate]) -> None:
        """Prepare the wrapped selector (no deadline) and remember it, so a turn does not again."""
        _PREPARED.prepare(self.wrapped, candidates, once=False)

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Prepare the wrapped selector once per catalog, then ask it on its pool and wait at most ``timeout_s``."""
        _PREPARED.prepare(self.wrapped, candidates, once=True)
        run = contextvars.copy_context().run  # the caller's scoped event hooks follow into the pool thread
        answer: Selection = run_isolated(
            self.wrapped, run, self.wrapped.select, query, candidates, timeout_s=self.timeout_s
        )
        return answer

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Async twin of :meth:`select` (the warm-up runs in a thread, off the event loop)."""
        if _PREPARED.due(self.wrapped, candidates):
            await asyncio.to_thread(_PREPARED.prepare, self.wrapped, candidates, once=True)
        try:
            if _thread_run(self.wrapped):
                run = contextvars.copy_context().run
                answer: Selection = await arun_isolated(
                    self.wrapped, run, self.wrapped.select, query, candidates, timeout_s=self.timeout_s
                )
                return answer
            return await asyncio.wait_for(self.wrapped.aselect(query, candidates), timeout=self.timeout_s)
        except TimeoutError:  # asyncio's deadline; a SelectorTimeout from inside passes through
            raise self._timeout() from None


def with_deadline(selector: Selector, timeout_s: float | None) -> Selector:
    """``selector`` under a deadline of ``timeout_s`` seconds (a :class:`TimeoutSelector`); itself when None.

    How a policy's ``timeout_s`` (``spec.selection.timeout_ms``) becomes a deadline in
    :func:`~shortlist.selection._narrowing.narrow` and in ``POST /v1/selectors/{name}:select``.
    """
    return selector if timeout_s is None else TimeoutSelector(selector, timeout_s)
