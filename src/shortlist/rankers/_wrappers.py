"""Failure behaviour as selectors that wrap selectors: a deadline, a circuit breaker, a fallback.

Each wrapper is a :class:`~shortlist.selection._base.Selector` around another one, so they
compose in any order and work wherever a selector does (library, CLI, service, runtime)::

    FallbackSelector(BreakerSelector(TimeoutSelector(rerank, 2.0)), bm25)

* :class:`TimeoutSelector` gives the wrapped selector a deadline, on that selector's own
  bounded pool (:mod:`shortlist.rankers._isolation`), so a hung one starves only itself; it
  is the only deadline on a selector (:func:`with_deadline` builds one from a policy), and it
  warms the selector for a new catalog outside the deadline;
* :class:`BreakerSelector` stops calling a selector that keeps failing: after ``failures``
  consecutive failures it refuses at once for ``cooldown_s``, then probes it in the background;
* :class:`FallbackSelector` asks ``fallback`` when ``primary`` raises, times out or gives no
  usable answer, so a broken reranker costs a cheaper ranking, not the whole catalog.

:func:`~shortlist.selection._narrowing.narrow` keeps only the last resort: when the whole chain
fails, every eligible candidate surfaces. ``runtime.yaml`` builds these wrappers per selector
(``timeout_ms``, ``breaker:``, ``fallback:``; see :mod:`shortlist.rankers._registry`). Every
fallback hop is a :class:`SelectorFellBack` event, every breaker change a
:class:`CircuitBreakerChanged` event.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event, emit
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorError, SelectorTimeout
from shortlist.rankers._isolation import arun_isolated, run_isolated
from shortlist.selection._base import Selector, SelectorContext

__all__ = [
    "BreakerSelector",
    "CircuitBreakerChanged",
    "FallbackSelector",
    "SelectorFellBack",
    "TimeoutSelector",
    "WrapperSelector",
    "with_deadline",
]

logger = logging.getLogger("shortlist.selection")


def _thread_run(selector: Selector) -> bool:
    """True when ``selector.aselect`` is the base class's (``select`` in a worker thread)."""
    return type(selector).aselect is Selector.aselect


class WrapperSelector(Selector):
    """A selector that delegates everything to ``wrapped``; subclass it and override what changes.

    Args:
        wrapped: the selector to delegate to.
        name: the name to report under (default: the wrapped selector's, so a wrapped
            config entry keeps its name in events and turn reports).
    """

    def __init__(self, wrapped: Selector, *, name: str | None = None) -> None:
        if not isinstance(wrapped, Selector):
            raise TypeError(f"can only wrap a Selector, not {type(wrapped).__name__}")
        self.wrapped = wrapped
        self.name = name or wrapped.name

    def init(self, ctx: SelectorContext) -> None:
        """Initialise the wrapped selector."""
        self.wrapped.init(ctx)

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Ask the wrapped selector."""
        return self.wrapped.select(query, candidates)

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Ask the wrapped selector (its own async path)."""
        return await self.wrapped.aselect(query, candidates)

    def prepare(self, candidates: Sequence[Candidate]) -> None:
        """Prepare the wrapped selector (no deadline, breaker or fallback applies to a warm-up)."""
        self.wrapped.prepare(candidates)

    def close(self) -> None:
        """Close the wrapped selector."""
        self.wrapped.close()

    async def aclose(self) -> None:
        """Close the wrapped selector (its own async path)."""
        await self.wrapped.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"


# --- timeout ---------------------------------------------------------------------------


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

    @staticmethod
    def key(candidates: Sequence[Candidate]) -> int:
        return hash(tuple((c.id, c.description, c.examples) for c in candidates))

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
            raise ValueError("timeout_s must be positive")
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


# --- circuit breaker -------------------------------------------------------------------


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
            raise ValueError("failures must be >= 1 and cooldown_s > 0")
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


# --- fallback --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SelectorFellBack(Event):
    """``selector`` gave no usable answer, so ``fallback`` was asked instead (one event per hop).

    ``reason`` is ``error``, ``timeout``, ``empty`` (no ids, not an abstention) or
    ``unknown_ids`` (only ids that are not candidates). When the fallback answers, no further
    event follows; when it fails too, the next hop's event or the turn's
    :class:`~shortlist._events.SelectionFallback` does.
    """

    name: ClassVar[str] = "selection.selector_fell_back"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    selector: str = ""
    fallback: str = ""
    kind: str = ""
    reason: str = ""
    latency_ms: float = 0.0
    error: str = ""


class FallbackSelector(WrapperSelector):
    """Ask ``primary``; when it raises, times out or gives no usable answer, ask ``fallback``.

    A usable answer names at least one of the candidates, or abstains (a deliberate "nothing
    fits" is an answer, not a failure). The fallback's answer (or its exception) is returned as
    is; chain several by nesting (``FallbackSelector(a, FallbackSelector(b, c))``). It reports
    under ``primary``'s name; each hop is a :class:`SelectorFellBack` event.

    Args:
        primary: the selector asked first.
        fallback: the selector asked when ``primary`` gives no usable answer.
    """

    def __init__(self, primary: Selector, fallback: Selector, *, name: str | None = None) -> None:
        if not isinstance(fallback, Selector):
            raise TypeError(f"the fallback must be a Selector, not {type(fallback).__name__}")
        super().__init__(primary, name=name)
        self.fallback = fallback

    @property
    def primary(self) -> Selector:
        """The selector asked first."""
        return self.wrapped

    def init(self, ctx: SelectorContext) -> None:
        """Initialise both selectors."""
        self.wrapped.init(ctx)
        self.fallback.init(ctx)

    @staticmethod
    def _unusable(answer: object, candidates: Sequence[Candidate]) -> str | None:
        """Why ``answer`` cannot be used (``empty``, ``unknown_ids``), or None when it can."""
        if not isinstance(answer, Selection):
            return "empty" if answer is None else "error"
        if answer.abstained:
            return None
        if not answer.selected:
            return "empty"
        ids = {c.id for c in candidates}
        return None if any(i in ids for i in answer.selected) else "unknown_ids"

    def _hop(self, query: Query, reason: str, started: float, error: BaseException | None = None) -> None:
        emit(
            SelectorFellBack(
                selector=self.wrapped.name,
                fallback=self.fallback.name,
                kind=query.kind,
                reason=reason,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                error=f"{type(error).__name__}: {error}" if error is not None else "",
            )
        )

    @staticmethod
    def _reason(exc: BaseException) -> str:
        return "timeout" if isinstance(exc, (SelectorTimeout, TimeoutError)) else "error"

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Ask ``primary``, then ``fallback`` if needed."""
        started = time.perf_counter()
        try:
            answer = self.wrapped.select(query, candidates)
        except Exception as exc:  # contained: the fallback answers; the hop is an event
            self._hop(query, self._reason(exc), started, exc)
        else:
            unusable = self._unusable(answer, candidates)
            if unusable is None:
                return answer
            self._hop(query, unusable, started)
        return self.fallback.select(query, candidates)

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Async twin of :meth:`select`."""
        started = time.perf_counter()
        try:
            answer = await self.wrapped.aselect(query, candidates)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # contained: the fallback answers; the hop is an event
            self._hop(query, self._reason(exc), started, exc)
        else:
            unusable = self._unusable(answer, candidates)
            if unusable is None:
                return answer
            self._hop(query, unusable, started)
        return await self.fallback.aselect(query, candidates)

    def close(self) -> None:
        """Close both selectors (the fallback even when the primary's close raises)."""
        try:
            self.wrapped.close()
        finally:
            self.fallback.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        try:
            await self.wrapped.aclose()
        finally:
            await self.fallback.aclose()

    def __repr__(self) -> str:
        return f"FallbackSelector({self.wrapped!r}, {self.fallback!r})"
