"""A circuit breaker around external selectors, so a broken one costs the service nothing under load.

An external selector that hangs, crashes or floods stdout on every call makes each request pay
its timeout or a process restart, one request at a time (a persistent worker answers one call
at a time). After ``threshold`` consecutive failures the breaker *opens*: calls fail at once with
a :class:`~shortlist.errors.SelectorError` (so the turn falls back, observably, in microseconds)
for ``cooldown_s`` seconds. Then the first call to arrive starts one **probe in the background**,
with that call's query and candidates, and is itself refused like the others: no request waits
on a selector known to be broken. A successful probe closes the breaker; a failed one reopens it
for another cooldown. Every open and close is a :class:`CircuitBreakerChanged` event.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from shortlist.errors import SelectorError
from shortlist.events import Event, emit
from shortlist.selection.base import Selector, SelectorContext
from shortlist.types import Candidate, Query, Selection

__all__ = ["CircuitBreakerChanged", "CircuitBreakerSelector"]

logger = logging.getLogger("shortlist.server")


@dataclass(frozen=True, kw_only=True)
class CircuitBreakerChanged(Event):
    """A selector's circuit breaker opened (calls refused for ``cooldown_s``) or closed again.

    A close after a successful probe is emitted from the probe's thread, so hooks added with
    :func:`~shortlist.events.add_event_hook` see it; a request's scoped hooks do not.
    """

    name: str = "breaker.changed"
    area: str = "server"
    level: int = logging.WARNING
    selector: str = ""
    state: str = ""  # "open" or "closed"
    failures: int = 0
    cooldown_s: float = 0.0
    error: str = ""


class CircuitBreakerSelector(Selector):
    """Wrap ``inner`` with a circuit breaker.

    Args:
        inner: the selector to protect (usually an external one).
        threshold: consecutive failures that open the breaker.
        cooldown_s: how long the breaker stays open before a background probe.
    """

    def __init__(self, inner: Selector, *, threshold: int = 3, cooldown_s: float = 5.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._failures = 0
        self._open_until = 0.0
        self._probe: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    def init(self, ctx: SelectorContext) -> None:
        """Initialise the wrapped selector."""
        self.inner.init(ctx)

    @property
    def is_open(self) -> bool:
        """True while calls are refused without reaching the selector (a probe may be running)."""
        with self._lock:
            return self._failures >= self.threshold

    @property
    def probing(self) -> bool:
        """True while a background probe call is running."""
        with self._lock:
            return self._probe is not None

    def _admit(self, query: Query, candidates: Sequence[Candidate]) -> bool:
        """True when the call may go to the selector; an expired cooldown starts the probe instead."""
        with self._lock:
            if self._failures < self.threshold:
                return True
            if self._closed or self._probe is not None or time.monotonic() < self._open_until:
                return False
            self._probe = threading.Thread(
                target=self._run_probe,
                args=(query, tuple(candidates)),
                name=f"shortlist-breaker-probe-{self.name}",
                daemon=True,
            )
            self._probe.start()
            return False

    def _run_probe(self, query: Query, candidates: tuple[Candidate, ...]) -> None:
        try:
            self.inner.select(query, candidates)
        except Exception as exc:  # the probe's failure is recorded and reported, never raised
            self._record(False, exc, probe=True)
        else:
            self._record(True, probe=True)

    def _record(self, ok: bool, error: BaseException | None = None, *, probe: bool = False) -> None:
        event: CircuitBreakerChanged | None = None
        with self._lock:
            if probe:
                self._probe = None
            if ok:
                if self._failures >= self.threshold:
                    event = CircuitBreakerChanged(selector=self.name, state="closed", level=logging.INFO)
                self._failures = 0
            else:
                was_open = self._failures >= self.threshold
                self._failures += 1
                if self._failures >= self.threshold:
                    self._open_until = time.monotonic() + self.cooldown_s
                    if not was_open:
                        event = CircuitBreakerChanged(
                            selector=self.name,
                            state="open",
                            failures=self._failures,
                            cooldown_s=self.cooldown_s,
                            error=f"{type(error).__name__}: {error}" if error is not None else "",
                        )
        if event is not None:
            emit(event)

    def _refuse(self) -> SelectorError:
        return SelectorError(
            f"circuit open after {self.threshold} consecutive failures; retrying in at most {self.cooldown_s:g} s",
            selector=self.name,
        )

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Call the wrapped selector unless the breaker is open.

        Raises:
            SelectorError: the breaker is open, or what the wrapped selector raised.
        """
        if not self._admit(query, candidates):
            raise self._refuse()
        try:
            selection = self.inner.select(query, candidates)
        except BaseException as exc:
            self._record(False, exc)
            raise
        self._record(True)
        return selection

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Async twin of :meth:`select`.

        An open breaker refuses on the event loop, without a thread hop (starting the probe when
        the cooldown is over). A closed one decides admission again when the call actually starts
        in its worker thread: calls that queued for a thread while the breaker opened are refused
        at once instead of each paying the broken selector's timeout.
        """
        if self.is_open:
            self._admit(query, candidates)  # refuses; may start the background probe
            raise self._refuse()
        return await asyncio.to_thread(self.select, query, candidates)

    def close(self) -> None:
        """Close the wrapped selector (which ends a running probe) and wait briefly for the probe."""
        with self._lock:
            self._closed = True
            probe = self._probe
        self.inner.close()
        if probe is not None:
            probe.join(timeout=5)
            if probe.is_alive():
                logger.warning("breaker probe of %s still running after close", self.name)
