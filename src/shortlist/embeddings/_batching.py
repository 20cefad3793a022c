"""Natural batching: concurrent single-item calls coalesced into batched calls, without a timer.

A server embeds one query per request, on several threads at once. Each call of a small
model pays a fixed cost (about half of a single MiniLM query's time), so running queries
together is cheaper per query, but waiting for company would cost latency at low load.
:class:`Coalescer` does neither: a caller that finds a run slot free runs at once (alone
when the service is quiet); callers that arrive while every slot is busy queue up, and
when a slot frees, the oldest pending item's caller starts the next run with the pending
items that are ``compatible`` with its own (at most ``max_batch``). Batches grow exactly as
fast as the model falls behind, no caller ever waits for a timer, runs start in arrival
order (no item starves), and ``compatible`` keeps an item out of a batch it would slow
down (a short query padded to a long one's length).

Errors never strand a caller: when a run fails, its leader re-raises the exception and
every caller whose item was in that batch gets an :class:`~shortlist.errors.EmbeddingError`
chained to it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, cast

from shortlist.errors import EmbeddingError, UsageError

__all__ = ["Coalescer"]

T = TypeVar("T")
R = TypeVar("R")


class _Pending(Generic[T, R]):
    __slots__ = ("done", "error", "item", "result")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.result: R | None = None
        self.error: BaseException | None = None


class Coalescer(Generic[T, R]):
    """Run ``run(items) -> results`` (one result per item, same order) for items submitted one by one.

    Args:
        run: the batched function; it must treat every item independently (an item's result
            must not depend on the other items of its batch).
        max_batch: most items in one run.
        max_running: runs in flight at once; a caller that finds them all busy queues its
            item for the next run.
        compatible: ``compatible(head, other)``: may ``other`` join the batch started for
            ``head``? (default: always); incompatible items wait for a later run.
        name: names the coalescer in error messages.

    Attributes:
        runs: runs so far.
        items: items run so far (``items / runs`` is the mean batch size).
        largest: the largest batch so far.
    """

    def __init__(
        self,
        run: Callable[[Sequence[T]], Sequence[R]],
        *,
        max_batch: int = 16,
        max_running: int = 1,
        compatible: Callable[[T, T], bool] | None = None,
        name: str = "",
    ) -> None:
        if max_batch < 1 or max_running < 1:
            raise UsageError("max_batch and max_running must be >= 1")
        self._run = run
        self._compatible = compatible
        self.max_batch = max_batch
        self.max_running = max_running
        self.name = name or "coalescer"
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[_Pending[T, R]] = deque()
        self._running = 0
        self.runs = 0
        self.items = 0
        self.largest = 0

    def submit(self, item: T) -> R:
        """Compute ``item``'s result, alone or in a batch with concurrent submissions.

        Raises:
            EmbeddingError: the batch that held ``item`` failed on another caller's thread.
            Exception: whatever ``run`` raised, when it failed on this caller's thread.
        """
        me: _Pending[T, R] = _Pending(item)
        with self._cond:
            self._queue.append(me)
            while True:
                if me.done:
                    return self._outcome(me)
                if self._running < self.max_running and self._queue and self._queue[0] is me:
                    batch = self._take()
                    break
                try:
                    self._cond.wait()
                except BaseException:
                    self._abandon(me)
                    raise
        self._lead(batch)
        return self._outcome(me, leader=True)

    def _abandon(self, me: _Pending[T, R]) -> None:
        """Withdraw a caller interrupted while waiting (lock held), so it never blocks the queue."""
        if not me.done and me in self._queue:
            self._queue.remove(me)
            self._cond.notify_all()

    def _take(self) -> list[_Pending[T, R]]:
        """Claim the oldest item plus the next compatible ones (lock held)."""
        head = self._queue.popleft()
        batch = [head]
        if self._queue and self.max_batch > 1:
            rest: deque[_Pending[T, R]] = deque()
            for p in self._queue:
                if len(batch) < self.max_batch and self._joins(head.item, p.item):
                    batch.append(p)
                else:
                    rest.append(p)
            self._queue = rest
        self._running += 1
        if self._queue and self._running < self.max_running:
            self._cond.notify_all()  # the new oldest item may start a run too
        return batch

    def _joins(self, head: T, other: T) -> bool:
        if self._compatible is None:
            return True
        try:
            return bool(self._compatible(head, other))
        except Exception:  # a faulty rule only costs batching, never a caller
            return False

    def _lead(self, batch: list[_Pending[T, R]]) -> None:
        results: Sequence[R] = ()
        error: BaseException | None = None
        try:
            results = self._run([p.item for p in batch])
            if len(results) != len(batch):
                raise EmbeddingError(f"{self.name}: {len(batch)} items gave {len(results)} results")
        except BaseException as exc:
            error = exc
        finally:
            with self._cond:
                self._running -= 1
                self.runs += 1
                self.items += len(batch)
                self.largest = max(self.largest, len(batch))
                for i, p in enumerate(batch):
                    if error is None:
                        p.result = results[i]
                    else:
                        p.error = error
                    p.done = True
                self._cond.notify_all()

    def _outcome(self, me: _Pending[T, R], *, leader: bool = False) -> R:
        if me.error is not None:
            if leader:
                raise me.error
            raise EmbeddingError(f"{self.name}: the batched call failed: {me.error}") from me.error
        return cast(R, me.result)  # set with ``done`` when there is no error
