"""The circuit breaker around external selectors: admission is decided when a call starts."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from shortlist.errors import SelectorError
from shortlist.selection.base import Selector
from shortlist.server.breaker import CircuitBreakerSelector
from shortlist.types import Candidate, Query, Selection

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


def test_a_success_closes_the_breaker_after_the_cooldown() -> None:
    class Flaky(Selector):
        name = "flaky"
        fail = True

        def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
            if self.fail:
                raise SelectorError("down", selector=self.name)
            return Selection(("a",))

    inner = Flaky()
    breaker = CircuitBreakerSelector(inner, threshold=1, cooldown_s=0.05)
    with pytest.raises(SelectorError, match="down"):
        breaker.select(Query("q"), CANDS)
    with pytest.raises(SelectorError, match="circuit open"):
        breaker.select(Query("q"), CANDS)
    time.sleep(0.06)
    inner.fail = False
    assert breaker.select(Query("q"), CANDS).selected == ("a",)  # the probe succeeds
    assert not breaker.is_open
