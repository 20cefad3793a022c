"""The fast loop's guard (``tests/slow_guard.py``): a test not marked slow that costs over the limit fails,
named with its cost; a slow test, a shared fixture, a loaded machine's waits and a full garbage collection of
the session's heap are not charged."""

from __future__ import annotations

import gc
from dataclasses import replace

import pytest

from slow_guard import _FULL_GC, Snapshot, _FullCollections, cost, snapshot

SUITE = """
import time

import pytest


@pytest.fixture(scope="module")
def shared():
    time.sleep(0.2)  # a model loaded once for the module: not the test's cost
    return 1


def test_sleeps_unmarked():
    time.sleep(0.2)


def test_spins_unmarked():
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass


@pytest.mark.slow
def test_sleeps_marked():
    time.sleep(0.2)


def test_fast(shared):
    assert shared == 1


def test_fails_slowly_unmarked():
    time.sleep(0.2)
    assert False, "its own failure"
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the installed plugins would cost more than the suite
    pytester.makeini("[pytest]\nmarkers =\n    slow: outside the fast loop\n")
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_an_unmarked_test_over_the_limit_fails_and_says_what_it_cost(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "slow_guard", "--max-unmarked-seconds=0.1")
    result.assert_outcomes(passed=4, failed=1, errors=2)
    text = result.stdout.str()
    for name in ("test_sleeps_unmarked", "test_spins_unmarked"):
        result.stdout.fnmatch_lines(
            [f"*test_suite.py::{name} is not marked slow and cost 0.* s, over the fast loop's 0.1 s*"]
        )
        assert f"ERROR test_suite.py::{name}" in text
    assert "mark it slow" in text
    for name in ("test_sleeps_marked", "test_fast", "test_fails_slowly_unmarked"):
        assert f"test_suite.py::{name} is not marked slow" not in text  # marked, shared cost, failed already
    result.stdout.fnmatch_lines(["*its own failure*"])


def test_zero_turns_the_guard_off(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "slow_guard", "--max-unmarked-seconds=0", "-k", "unmarked")
    result.assert_outcomes(passed=2, failed=1, deselected=2)


def snap(wall: float, cpu: float, threads: dict[str, tuple[float, float]]) -> Snapshot:
    return Snapshot(wall, cpu, 0.0, {tid: (int(c * 1e9), int(w * 1e9)) for tid, (c, w) in threads.items()})


def test_waiting_for_a_cpu_is_not_charged() -> None:
    """1 s of CPU that took 3 s on a loaded machine (2 s in the run queue) costs 1 s, not 3."""
    start = snap(0.0, 0.0, {"1": (0.0, 0.0)})
    end = snap(3.0, 1.0, {"1": (1.0, 2.0)})
    charged = cost(start, end, load=0.0)
    assert (charged.seconds, charged.wall, charged.cpu, charged.waited) == pytest.approx((1.0, 3.0, 1.0, 2.0))


def test_sleeping_is_charged() -> None:
    start = snap(0.0, 0.0, {"1": (0.0, 0.0)})
    end = snap(2.5, 0.1, {"1": (0.1, 0.0)})
    assert cost(start, end, load=0.0).seconds == pytest.approx(2.5)


def test_the_waits_of_threads_that_ended_are_estimated_from_the_load() -> None:
    """A thread that ran 1 s of CPU and ended is gone from /proc: its waits are the load times its CPU."""
    start = snap(0.0, 0.0, {"1": (0.0, 0.0)})
    end = snap(3.1, 1.0, {"1": (0.0, 0.0)})  # the main thread slept while a worker thread ran and ended
    assert cost(start, end, load=2.0).seconds == pytest.approx(1.1)
    assert cost(start, end, load=0.0).seconds == pytest.approx(3.1)


def test_threads_running_at_once_cost_their_wall_time_not_their_cpu_sum() -> None:
    """Two threads busy for 1.5 s cost 1.5 s, not their 2.6 s of CPU; overlapping waits that exceed the wall
    time leave the CPU time spread over the CPUs."""
    start = snap(0.0, 0.0, {"1": (0.0, 0.0), "2": (0.0, 0.0)})
    end = snap(1.5, 2.6, {"1": (1.3, 0.0), "2": (1.3, 0.0)})
    assert cost(start, end, load=0.0, cpus=2).seconds == pytest.approx(1.5)
    loaded = snap(3.0, 4.0, {"1": (2.0, 2.5), "2": (2.0, 2.5)})
    assert cost(start, loaded, load=0.0, cpus=2).seconds == pytest.approx(2.0)


def test_without_schedstat_everything_off_cpu_counts() -> None:
    assert cost(snap(0.0, 0.0, {}), snap(3.0, 1.0, {}), load=5.0).seconds == pytest.approx(3.0)


def test_a_full_collection_is_not_charged() -> None:
    """1.2 s of a 2 s busy interval spent walking the session's heap in a full collection leaves 0.8 s."""
    start = Snapshot(0.0, 0.0, 0.0, {"1": (0, 0)}, full_gc=3.0)
    end = Snapshot(2.0, 2.0, 0.0, {"1": (int(2e9), 0)}, full_gc=4.2)
    charged = cost(start, end, load=0.0, cpus=1)
    assert (charged.seconds, charged.wall, charged.cpu, charged.full_gc) == pytest.approx((0.8, 2.0, 2.0, 1.2))
    assert cost(replace(start, full_gc=0.0), replace(end, full_gc=0.0), load=0.0, cpus=1).seconds == pytest.approx(2.0)


def test_the_full_collections_are_timed_and_only_they() -> None:
    clock = _FullCollections()
    gc.callbacks.append(clock)
    try:
        gc.collect(0)
        gc.collect(1)
        assert clock.seconds == 0.0  # young generations are the test's own allocations: charged
        before = snapshot().full_gc
        gc.collect()
        assert clock.seconds > 0.0
    finally:
        gc.callbacks.remove(clock)
    assert _FULL_GC in gc.callbacks  # the plugin's own clock, installed when the guard is on
    assert snapshot().full_gc > before  # it timed the collection above too
