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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    error: str = ""


@dataclass
class _Served:
    enriched: tuple[Candidate, ...]
    pending: bool = False
    stale: int = 0


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
        while the new one is being prepared)."""
        now = tuple(fresh)
        with self._lock:
            served = self._served.get(source, kind)
            if served is None:
                self._served.put(source, _Served(now), kind)
                return now
            if served.enriched == now:  # element identity first: C speed while the log is unchanged
                return served.enriched
            if self.mode == "sync":
                served.enriched = now
                return now
            served.stale += 1
            if served.pending:
                return served.enriched
            served.pending = True
            thread = threading.Thread(
                target=self._refresh, args=(served, now, kind), name="shortlist-examples-refresh", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return served.enriched

    def _refresh(self, served: _Served, now: tuple[Candidate, ...], kind: str) -> None:
        start = time.perf_counter()
        error = ""
        try:
            self._prepare(now, kind)
        except Exception as exc:  # the next turn builds the index itself; its failure is that turn's fallback
            error = f"{type(exc).__name__}: {exc}"
        finally:
            with self._lock:
                served.enriched, served.pending = now, False
                stale, served.stale = served.stale, 0
        event = ExamplesRefreshed(
            kind=kind,
            candidates=len(now),
            seconds=round(time.perf_counter() - start, 4),
            stale_turns=stale,
            error=error,
        )
        emit(event, hooks=self._hooks)

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Wait for the refreshes under way (tests, shutdown); True when none is left."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)
