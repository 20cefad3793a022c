"""A circuit breaker as a selector that wraps a selector: stop calling one that keeps failing.

:class:`BreakerSelector` refuses at once while open, probes the selector in the background
after its cooldown, and reports every open and close as a :class:`CircuitBreakerChanged` event.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event, emit
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorError, UsageError
from shortlist.rankers._wrappers import WrapperSelector
from shortlist.selection._base import Selector

__all__ = ["BreakerSelector", "CircuitBreakerChanged"]

logger = logging.getLogger("shortlist.selection")


@dataclass(frozen=True, kw_only=True)
class CircuitBreakerChanged(Event):
    """A selector's circuit breaker opened (calls refused for ``cooldown_s``) or closed again.

    A close after a successful probe is emitted from the probe's thread, so hooks added with
    :func:`~shortlist._events.add_event_hook` see it; a request's scoped hooks do not.
    """

    name: ClassVar[str] = "breaker.changed"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    selector: str = ""
    state: str = ""  # "open" or "closed"
    failures: int = 0
    cooldown_s: float = 0.0
    error: str = ""


class BreakerSelector(WrapperSelector):
    """Wrap ``wrapped`` with a circuit breaker (closed → open → half-open → closed).

    Closed, every call goes through. After ``failures`` consecutive failures the breaker *opens*:
    calls fail at once with a :class:`~shortlist.errors.SelectorError` ("circuit open", so a
    fallback answers or the turn falls back, in microseconds) for ``cooldown_s`` seconds. Then
    the first call to arrive starts one **probe in the background** (half-open), with that
    call's query and candidates, and is itself refused like the others: no call waits on a
    selector known to be broken. A successful probe closes the breaker; a failed one reopens it
    for another cooldown. Every open and close is a :class:`CircuitBreakerChanged` event.

    Args:
        wrapped: the selector to protect.
        failures: consecutive failures that open the breaker.
        cooldown_s: how long the breaker stays open before a background probe.
    """

    def __init__(
        self, wrapped: Selector, *, failures: int = 3, cooldown_s: float = 5.0, name: str | None = None
    ) -> None:
        if failures < 1 or not cooldown_s > 0:
            raise UsageError("failures must be >= 1 and cooldown_s > 0")
        super().__init__(wrapped, name=name)
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._failed = 0
        self._open_until = 0.0
        self._probe: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        """True while calls are refused without reaching the selector (a probe may be running)."""
        with self._lock:
            return self._failed >= self.failures

    @property
    def probing(self) -> bool:
        """True while a background probe call is running."""
        with self._lock:
            return self._probe is not None

    def _admit(self, query: Query, candidates: Sequence[Candidate]) -> bool:
        """True when the call may go to the selector; an expired cooldown starts the probe instead."""
        with self._lock:
            if self._failed < self.failures:
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
            self.wrapped.select(query, candidates)
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
                if self._failed >= self.failures:
                    event = CircuitBreakerChanged(selector=self.name, state="closed", level=logging.INFO)
                self._failed = 0
            else:
                was_open = self._failed >= self.failures
                self._failed += 1
                if self._failed >= self.failures:
                    self._open_until = time.monotonic() + self.cooldown_s
                    if not was_open:
                        event = CircuitBreakerChanged(
                            selector=self.name,
                            state="open",
                            failures=self._failed,
                            cooldown_s=self.cooldown_s,
                            error=f"{type(error).__name__}: {error}" if error is not None else "",
                        )
        if event is not None:
            emit(event)

    def _refuse(self) -> SelectorError:
        return SelectorError(
            f"circuit open after {self.failures} consecutive failures; retrying in at most {self.cooldown_s:g} s",
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
            selection = self.wrapped.select(query, candidates)
        except BaseException as exc:
            self._record(False, exc)
            raise
        self._record(True)
        return selection

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Async twin of :meth:`select`.

        An open breaker refuses on the event loop, without a thread hop (starting the probe when
        the cooldown is over). A closed one runs :meth:`select` in a worker thread, which decides
        admission again when the call actually starts: calls that queued for a thread while the
        breaker opened are refused at once instead of each paying the broken selector's timeout.
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
        self.wrapped.close()
        if probe is not None:
            probe.join(timeout=5)
            if probe.is_alive():
                logger.warning("breaker probe of %s still running after close", self.name)

    async def aclose(self) -> None:
        """Async twin of :meth:`close` (the probe is joined in a thread)."""
        await asyncio.to_thread(self.close)
