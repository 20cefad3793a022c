"""Per-selector thread pools: a selector that hangs can only exhaust its own threads.

An in-process selector with a deadline runs in a worker thread, so the turn can go on when
it overruns. A Python thread cannot be killed, so a hung call keeps its thread. With one
shared pool, a few hung calls took every thread and a healthy, instant selector then timed
out as well. Each selector now has its own pool (:data:`THREADS_PER_SELECTOR` threads, made
as needed, so concurrent turns of a healthy selector still run side by side).
When all of a selector's threads are still busy with earlier calls, a new call is refused at
once (:class:`~shortlist.errors.SelectorTimeout`, so the turn falls back as on any timeout)
and counted as a :class:`SelectorSaturated` event; other selectors are not affected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from shortlist._events import Event, EventHook, emit
from shortlist.errors import SelectorTimeout
from shortlist.selection._base import Selector

__all__ = ["THREADS_PER_SELECTOR", "SelectorSaturated", "arun_isolated", "pool_for", "run_isolated"]

#: Worker threads each in-process selector with a deadline may occupy at once (the service's
#: default ``--threads`` too, so a busy but healthy selector is never refused).
THREADS_PER_SELECTOR = 32

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class SelectorSaturated(Event):
    """Every thread of a selector is still busy with earlier calls (hung?); this call was refused."""

    name: ClassVar[str] = "selection.selector_saturated"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    selector: str = ""
    threads: int = 0
    refused: int = 0


class _Pool:
    """A bounded pool for one selector, with a count of the calls it is still running."""

    def __init__(self, name: str, threads: int) -> None:
        self.name = name
        self.threads = threads
        self.executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix=f"shortlist-select-{name}")
        self.busy = 0
        self.refused = 0
        self._lock = threading.Lock()

    def _admit(self) -> bool:
        with self._lock:
            if self.busy >= self.threads:
                self.refused += 1
                return False
            self.busy += 1
            return True

    def _done(self, _: object = None) -> None:
        with self._lock:
            self.busy -= 1

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T] | None:
        """Run ``fn(*args)`` on a free thread, or return None when every thread is busy."""
        if not self._admit():
            return None
        future = self.executor.submit(fn, *args)
        future.add_done_callback(self._done)
        return future


_pools: weakref.WeakKeyDictionary[Selector, _Pool] = weakref.WeakKeyDictionary()
# selectors that cannot be weakly referenced or hashed (slots, dataclass equality), by identity
_pinned: dict[int, tuple[Selector, _Pool]] = {}
_pools_lock = threading.Lock()


def pool_for(selector: Selector) -> _Pool:
    """The pool of ``selector`` (made on first use; dropped with the selector where it can be)."""
    with _pools_lock:
        try:
            pool = _pools.get(selector)
            if pool is None:
                pool = _pools[selector] = _Pool(selector.name, THREADS_PER_SELECTOR)
            return pool
        except TypeError:
            held = _pinned.get(id(selector))
            if held is None or held[0] is not selector:
                held = _pinned[id(selector)] = (selector, _Pool(selector.name, THREADS_PER_SELECTOR))
            return held[1]


def _refuse(selector: Selector, pool: _Pool, hooks: tuple[EventHook, ...]) -> SelectorTimeout:
    emit(SelectorSaturated(selector=selector.name, threads=pool.threads, refused=pool.refused), hooks=hooks)
    return SelectorTimeout(
        f"all {pool.threads} threads of selector {selector.name!r} are still busy with earlier calls",
        selector=selector.name,
    )


def run_isolated(
    selector: Selector, fn: Callable[..., T], *args: Any, timeout_s: float, hooks: tuple[EventHook, ...] = ()
) -> T:
    """Run ``fn(*args)`` on ``selector``'s pool and wait at most ``timeout_s``.

    Raises:
        SelectorTimeout: the call overran, or every thread of the selector was busy.
    """
    pool = pool_for(selector)
    future = pool.submit(fn, *args)
    if future is None:
        raise _refuse(selector, pool, hooks)
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise SelectorTimeout(
            f"in-process selector did not answer within {timeout_s:.3f} s", selector=selector.name
        ) from None


async def arun_isolated(
    selector: Selector, fn: Callable[..., T], *args: Any, timeout_s: float | None, hooks: tuple[EventHook, ...] = ()
) -> T:
    """Async twin of :func:`run_isolated` (``timeout_s`` None: no deadline)."""
    pool = pool_for(selector)
    future = pool.submit(fn, *args)
    if future is None:
        raise _refuse(selector, pool, hooks)
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout=timeout_s)
