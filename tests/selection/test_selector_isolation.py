"""A hung in-process selector cannot starve the others (issue 12, runtime concurrency)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence

import pytest

from shortlist._events import Event
from shortlist._types import Candidate, Query
from shortlist.rankers._isolation import THREADS_PER_SELECTOR, SelectorSaturated
from shortlist.selection._base import FunctionSelector
from shortlist.selection._narrowing import NarrowingPolicy, anarrow, narrow

CANDS = (Candidate("a", description="alpha"), Candidate("b", description="beta"))
POLICY = NarrowingPolicy(timeout_s=0.05)
Q = Query("alpha", "tool", 1)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    gate = threading.Event()
    yield gate
    gate.set()  # let the hung threads finish


def hung(gate: threading.Event) -> FunctionSelector:
    def wait(q: Query, c: Sequence[Candidate]) -> list[str]:
        gate.wait(30)
        return ["a"]

    return FunctionSelector(wait, name="hung")


def instant() -> FunctionSelector:
    return FunctionSelector(lambda q, c: ["a"], name="instant")


def test_a_healthy_selector_still_answers_after_many_hung_calls(release: threading.Event) -> None:
    bad = hung(release)
    for _ in range(THREADS_PER_SELECTOR + 4):  # more hung calls than the old shared pool had threads
        assert narrow(bad, Q, CANDS, POLICY).fallback == "timeout"
    good = narrow(instant(), Q, CANDS, POLICY)
    assert good.fallback is None and good.ids == ("a",)


def test_a_saturated_selector_is_refused_at_once_and_counted(release: threading.Event) -> None:
    bad = hung(release)
    events: list[Event] = []
    for _ in range(THREADS_PER_SELECTOR):
        narrow(bad, Q, CANDS, POLICY)
    turn = narrow(bad, Q, CANDS, POLICY, hooks=[events.append])
    assert turn.fallback == "timeout" and "still busy" in turn.reason
    saturated = [e for e in events if isinstance(e, SelectorSaturated)]
    assert saturated and saturated[0].selector == "hung" and saturated[0].threads == THREADS_PER_SELECTOR


async def test_the_async_path_is_isolated_too(release: threading.Event) -> None:
    bad = hung(release)
    turns = await asyncio.gather(*(anarrow(bad, Q, CANDS, POLICY) for _ in range(THREADS_PER_SELECTOR + 2)))
    assert {t.fallback for t in turns} == {"timeout"}
    good = await anarrow(instant(), Q, CANDS, POLICY)
    assert good.fallback is None and good.ids == ("a",)


def test_without_a_deadline_nothing_changes() -> None:
    turn = narrow(instant(), Q, CANDS, NarrowingPolicy())
    assert turn.fallback is None and turn.ids == ("a",)
