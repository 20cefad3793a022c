"""The circuit breaker around external selectors: admission at call start, probes in the background."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from shortlist._events import Event, add_event_hook, event_hooks, remove_event_hook
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorError
from shortlist.selection._base import Selector
from shortlist.server._breaker import CircuitBreakerChanged, CircuitBreakerSelector

CANDS = [Candidate("a"), Candidate("b")]


class SlowFailing(Selector):
    """Fails after a short wait, like a hanging selector hitting its timeout; counts its calls."""

    name = "slow"

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        with self._lock:
            self.calls += 1
        time.sleep(0.05)
        raise SelectorError("timed out", selector=self.name)


async def test_calls_queued_while_the_breaker_opens_never_reach_the_selector() -> None:
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
    inner = SlowFailing()
    breaker = CircuitBreakerSelector(inner, threshold=2, cooldown_s=60)
    results = await asyncio.gather(*(breaker.aselect(Query("q"), CANDS) for _ in range(10)), return_exceptions=True)
    assert all(isinstance(r, SelectorError) for r in results)
    # Two threads: the calls that start before the second failure run (two, or three when one
    # thread frees up first); once the breaker opens, the rest, still queued, are refused. Decided
    # at request time instead, all ten would have reached the selector and paid its timeout.
    assert 2 <= inner.calls <= 3
    assert breaker.is_open
    refused = [r for r in results if "circuit open" in str(r)]
    assert len(refused) == 10 - inner.calls


class Flaky(Selector):
    """Fails while ``fail`` is set; each call takes ``delay`` seconds; counts its calls."""

    name = "flaky"

    def __init__(self, delay: float = 0.0) -> None:
        self.fail = True
        self.delay = delay
        self.calls = 0

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.calls += 1
        time.sleep(self.delay)
        if self.fail:
            raise SelectorError("down", selector=self.name)
        return Selection(("a",))


def _wait_for_probe(breaker: CircuitBreakerSelector) -> None:
    deadline = time.monotonic() + 5
    while breaker.probing and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not breaker.probing


def test_after_the_cooldown_a_background_probe_closes_the_breaker_and_no_call_waits_for_it() -> None:
    inner = Flaky(delay=0.3)
    changes: list[CircuitBreakerChanged] = []
    breaker = CircuitBreakerSelector(inner, threshold=1, cooldown_s=0.05)
    hook = lambda e: changes.append(e) if isinstance(e, CircuitBreakerChanged) else None  # noqa: E731
    add_event_hook(hook)  # the probe reports from its own thread: a global hook sees it
    try:
        with pytest.raises(SelectorError, match="down"):
            breaker.select(Query("q"), CANDS)
        assert [(c.state, c.failures) for c in changes] == [("open", 1)]
        with pytest.raises(SelectorError, match="circuit open"):
            breaker.select(Query("q"), CANDS)
        time.sleep(0.06)
        inner.fail = False
        started = time.monotonic()
        for _ in range(5):  # the first starts the probe; none of them waits for it
            with pytest.raises(SelectorError, match="circuit open"):
                breaker.select(Query("q"), CANDS)
        assert time.monotonic() - started < 0.1
        assert breaker.probing
        _wait_for_probe(breaker)
    finally:
        remove_event_hook(hook)
    assert inner.calls == 2  # the first failure and one probe, not one per refused call
    assert not breaker.is_open
    assert [c.state for c in changes] == ["open", "closed"]
    assert breaker.select(Query("q"), CANDS).selected == ("a",)


async def test_an_open_breaker_refuses_on_the_event_loop_and_probes_once() -> None:
    inner = Flaky(delay=0.2)
    breaker = CircuitBreakerSelector(inner, threshold=1, cooldown_s=0.01)
    with pytest.raises(SelectorError, match="down"):
        await breaker.aselect(Query("q"), CANDS)
    await asyncio.sleep(0.02)
    started = time.monotonic()
    results = await asyncio.gather(*(breaker.aselect(Query("q"), CANDS) for _ in range(20)), return_exceptions=True)
    assert time.monotonic() - started < 0.1
    assert all("circuit open" in str(r) for r in results)
    _wait_for_probe(breaker)
    assert inner.calls == 2
    assert breaker.is_open  # the probe failed: open again for another cooldown


def test_a_failed_probe_reopens_without_a_second_open_event() -> None:
    inner = Flaky()
    changes: list[Event] = []
    breaker = CircuitBreakerSelector(inner, threshold=2, cooldown_s=0.01)
    with event_hooks(changes.append):
        for _ in range(2):
            with pytest.raises(SelectorError, match="down"):
                breaker.select(Query("q"), CANDS)
        for _ in range(3):  # three cooldowns, three failed probes
            time.sleep(0.02)
            with pytest.raises(SelectorError, match="circuit open"):
                breaker.select(Query("q"), CANDS)
            _wait_for_probe(breaker)
    assert inner.calls == 5
    opened = [e for e in changes if isinstance(e, CircuitBreakerChanged)]
    assert [(e.state, e.failures, "down" in e.error) for e in opened] == [("open", 2, True)]
    assert breaker.is_open


def test_close_ends_a_running_probe() -> None:
    class Hanging(Selector):
        name = "hanging"

        def __init__(self) -> None:
            self.stop = threading.Event()
            self.calls = 0

        def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
            self.calls += 1
            if self.calls == 1:
                raise SelectorError("down", selector=self.name)
            self.stop.wait(10)
            raise SelectorError("stopped", selector=self.name)

        def close(self) -> None:
            self.stop.set()

    inner = Hanging()
    breaker = CircuitBreakerSelector(inner, threshold=1, cooldown_s=0.01)
    with pytest.raises(SelectorError):
        breaker.select(Query("q"), CANDS)
    time.sleep(0.02)
    with pytest.raises(SelectorError, match="circuit open"):
        breaker.select(Query("q"), CANDS)
    assert breaker.probing
    started = time.monotonic()
    breaker.close()
    assert time.monotonic() - started < 2
    assert not breaker.probing
    time.sleep(0.02)
    with pytest.raises(SelectorError, match="circuit open"):  # no probe after close
        breaker.select(Query("q"), CANDS)
    assert inner.calls == 2
