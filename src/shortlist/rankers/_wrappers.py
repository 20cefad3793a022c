"""Failure behaviour as selectors that wrap selectors: a deadline, a circuit breaker, a fallback.

Each wrapper is a :class:`~shortlist.selection._base.Selector` around another one, so they
compose in any order and work wherever a selector does (library, CLI, service, runtime)::

    FallbackSelector(BreakerSelector(TimeoutSelector(rerank, 2.0)), bm25)

* :class:`~shortlist.rankers._timeout.TimeoutSelector` gives the wrapped selector a deadline,
  on that selector's own bounded pool (:mod:`shortlist.rankers._isolation`), so a hung one
  starves only itself; it is the only deadline on a selector
  (:func:`~shortlist.rankers._timeout.with_deadline` builds one from a policy), and it warms
  the selector for a new catalog outside the deadline;
* :class:`~shortlist.rankers._breaker.BreakerSelector` stops calling a selector that keeps
  failing: after ``failures`` consecutive failures it refuses at once for ``cooldown_s``, then
  probes it in the background;
* :class:`FallbackSelector` asks ``fallback`` when ``primary`` raises, times out or gives no
  usable answer, so a broken reranker costs a cheaper ranking, not the whole catalog.

:func:`~shortlist.selection._narrowing.narrow` keeps only the last resort: when the whole chain
fails, every eligible candidate surfaces. ``runtime.yaml`` builds these wrappers per selector
(``timeout_ms``, ``breaker:``, ``fallback:``; see :mod:`shortlist.rankers._registry`). Every
fallback hop is a :class:`SelectorFellBack` event, every breaker change a
:class:`~shortlist.rankers._breaker.CircuitBreakerChanged` event.

This module holds the base every wrapper shares and the fallback; the deadline is
:mod:`shortlist.rankers._timeout`, the circuit breaker :mod:`shortlist.rankers._breaker`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event, emit
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorTimeout
from shortlist.selection._base import Selector, SelectorContext

__all__ = ["FallbackSelector", "SelectorFellBack", "WrapperSelector"]


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
