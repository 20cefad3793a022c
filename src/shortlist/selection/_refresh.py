"""A catalog with its feedback log's examples, the same object from turn to turn, refreshed in the background.

The facade attaches a bound log's examples to the catalog on every turn
(:meth:`~shortlist.feedback.FeedbackStore.enrich`). :class:`EnrichedCatalogs` keeps, per catalog
and kind, the enriched tuple last handed out, and hands out that same tuple while the log's
examples for it are unchanged: the narrowing's split and every ranker's index are then found by
identity, as for a catalog without a log.

When the log has changed (a recorded turn), the new enrichment needs a new index. ``"sync"``
hands it out at once: the turn builds the index (what an evaluation replays, turn by turn).
``"background"`` (the service) keeps handing out the previous tuple, whose index is built, while
a thread prepares the selector for the new one; the turns after that get it. A write then never
costs a request the index build (0.1 s at 10,000 tools, 0.5 s with a 100,000-turn log), and the
log's new examples reach the ranking one build later. Each refresh is a
``selection.examples_refreshed`` event: its seconds, and the turns answered meanwhile with the
previous examples.

A process that writes to the log itself (the runtime's conversation, after each turn it records)
need not wait for a turn to find the change: :meth:`EnrichedCatalogs.refresh` prepares the new
enrichment on a thread at once, in either mode, so the next turn, seconds later, finds its index
built. A ``"sync"`` turn that arrives before it is done waits for it rather than build the same
index twice.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from shortlist._events import Event, EventHook, emit
from shortlist._memo import IdentityMemo
from shortlist._types import Candidate
from shortlist.errors import UsageError

__all__ = ["EnrichedCatalogs", "ExamplesRefresh", "ExamplesRefreshed"]

#: ``"sync"``: a turn after a log change builds the new index; ``"background"``: a thread does.
ExamplesRefresh = Literal["sync", "background"]

logger = logging.getLogger("shortlist.selection")


@dataclass(frozen=True, kw_only=True)
class ExamplesRefreshed(Event):
    """A catalog's new usage examples (its feedback log changed) were indexed in the background.

    ``reason``: ``turn`` (a turn found the log changed) or ``write`` (this process wrote to the log
    and asked for the refresh at once: :meth:`~shortlist.Shortlist.refresh_examples`).
    ``stale_turns`` turns were answered meanwhile with the previous examples; ``error`` is the
    preparation's failure, if any (the new examples are used all the same, and the turn that
    needs the index builds it).
    """

    name: ClassVar[str] = "selection.examples_refreshed"
    area: ClassVar[str] = "selection"
    level: int = logging.DEBUG
    kind: str = ""
    candidates: int = 0
    seconds: float = 0.0
    stale_turns: int = 0
    reason: str = "turn"
    error: str = ""


@dataclass
class _Served:
    enriched: tuple[Candidate, ...]
    pending: bool = False  # a refresh thread is under way
    stale: int = 0
    target: tuple[Candidate, ...] | None = None  # what it prepares
    queued: tuple[Candidate, ...] | None = None  # a newer enrichment seen meanwhile: prepared next
    done: threading.Event = field(default_factory=threading.Event)  # set while no refresh is under way

    def __post_init__(self) -> None:
        self.done.set()


#: How long a turn in ``"sync"`` mode waits for a refresh under way that prepares exactly what it
#: ranks before it builds the index itself (a refresh runs under the selector's deadline anyway).
SYNC_WAIT_S = 60.0


class EnrichedCatalogs:
    """The enriched tuple handed out per (kind, catalog), refreshed ``mode``-wise (thread-safe).

    Args:
        prepare: ``prepare(candidates, kind)`` readies the kind's selector for an enriched catalog
            (the facade's warm-up); called on the refresh thread.
        mode: ``"sync"`` or ``"background"``.
        hooks: where the refresh events go.
        slots: how many catalogs to remember (inline candidates are new objects every request).
    """

    def __init__(
        self,
        prepare: Callable[[tuple[Candidate, ...], str], None],
        *,
        mode: ExamplesRefresh = "sync",
        hooks: Sequence[EventHook] = (),
        slots: int = 16,
    ) -> None:
        if mode not in ("sync", "background"):
            raise UsageError(f"examples_refresh must be 'sync' or 'background', got {mode!r}")
        self.mode: ExamplesRefresh = mode
        self._prepare = prepare
        self._hooks = tuple(hooks)
        self._served: IdentityMemo[_Served] = IdentityMemo(slots)  # per (source catalog, kind)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def serve(self, kind: str, source: Sequence[Candidate], fresh: Sequence[Candidate]) -> tuple[Candidate, ...]:
        """What the turn ranks: ``fresh`` (``source`` with the log's examples now), or the tuple handed
        out before for ``source`` (the same object while nothing changed; in the background mode, also
        while the new one is being prepared).

        A refresh under way that prepares exactly ``fresh`` (:meth:`refresh`, after a write) is not
        done twice: a ``"sync"`` turn waits for it and ranks what it prepared.
        """
        now = tuple(fresh)
        wait: tuple[tuple[Candidate, ...], threading.Event] | None = None
        with self._lock:
            served = self._served.get(source, kind)
            if served is None:
                self._served.put(source, _Served(now), kind)
                return now
            if served.pending and served.target == now:  # a refresh already prepares exactly this
                if self.mode == "background":
                    served.stale += 1
                    return served.enriched
                wait = (served.target, served.done)
            elif served.enriched == now:  # element identity first: C speed while the log is unchanged
                return served.enriched
            elif self.mode == "sync":
                served.enriched = now
                return now
            else:
                served.stale += 1
                if served.pending:
                    served.queued = now  # prepared once the refresh under way is done
                    return served.enriched
                thread = self._start(served, now, kind, "turn")
                handed = served.enriched
        if wait is not None:  # waited for outside the lock: the refresh swaps its tuple in under it
            target, done = wait
            return target if done.wait(SYNC_WAIT_S) else now
        thread.start()
        return handed

    def serves(self, kind: str, source: Sequence[Candidate]) -> bool:
        """Whether turns over ``source`` were handed an enrichment here (one is kept for them)."""
        with self._lock:
            return self._served.get(source, kind) is not None

    def refresh(self, kind: str, source: Sequence[Candidate], fresh: Sequence[Candidate]) -> bool:
        """Prepare ``fresh`` (``source`` with the log's examples now) on a thread, whatever the mode:
        the log was just written to, so the turn that needs the new index should find it built.

        Until it is done, a ``"background"`` turn ranks the previous examples and a ``"sync"`` turn
        waits for it (it would build the same index). Returns whether a refresh was started (False
        when ``fresh`` is what is handed out or being prepared already; a newer one seen while a
        refresh is under way is prepared after it).
        """
        now = tuple(fresh)
        with self._lock:
            served = self._served.get(source, kind)
            if served is None:  # nothing older to hand out: turns get it at once
                served = _Served(now)
                self._served.put(source, served, kind)
            elif served.pending:
                if served.target != now:
                    served.queued = now
                return False
            elif served.enriched == now:  # handed out already: a turn built its index
                return False
            thread = self._start(served, now, kind, "write")
        thread.start()
        return True

    def _start(self, served: _Served, now: tuple[Candidate, ...], kind: str, reason: str) -> threading.Thread:
        """Mark ``served`` as refreshing towards ``now`` and make its thread (started by the caller,
        outside the lock). Holds the lock."""
        served.pending, served.target = True, now
        served.done.clear()
        # in the caller's context: its scoped event hooks (a conversation's ``on_event``) hear the refresh
        context = contextvars.copy_context()
        thread = threading.Thread(
            target=context.run,
            args=(self._refresh, served, now, kind, reason, served.enriched),
            name="shortlist-examples-refresh",
            daemon=True,
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        return thread

    def _refresh(
        self, served: _Served, now: tuple[Candidate, ...], kind: str, reason: str, base: tuple[Candidate, ...]
    ) -> None:
        while True:
            start = time.perf_counter()
            error = ""
            try:
                self._prepare(now, kind)
            except Exception as exc:  # the next turn builds the index itself; its failure is that turn's fallback
                error = f"{type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    if served.enriched is base:  # a sync turn may have handed out a newer one meanwhile
                        served.enriched = now
                    stale, served.stale = served.stale, 0
                    follow, served.queued = served.queued, None
                    if follow is None or follow == now:
                        follow = None
                        served.pending, served.target = False, None
                        served.done.set()
                    else:
                        served.target, base = follow, served.enriched
            event = ExamplesRefreshed(
                kind=kind,
                candidates=len(now),
                seconds=round(time.perf_counter() - start, 4),
                stale_turns=stale,
                reason=reason,
                error=error,
            )
            emit(event, hooks=self._hooks)
            if follow is None:
                return
            now, reason = follow, "turn"

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Wait for the refreshes under way (tests, shutdown); True when none is left."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)
