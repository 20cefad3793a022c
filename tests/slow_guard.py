"""The fast loop's guard (a pytest plugin, loaded by ``tests/conftest.py``): a test not marked ``slow`` that
costs more than ``--max-unmarked-seconds`` (2 s) fails, naming itself and what it cost.

The cost is the wall time the test would take on an idle machine, not its wall time on a loaded one: its
wall time less the time its threads waited in the run queue for a CPU (``/proc/self/task/*/schedstat``,
Linux), and at least its CPU time (this process's threads and the child processes it reaped) spread over the
machine's CPUs. The waits of threads that ended during the test and of child processes cannot be read: they
are estimated from the waits per CPU second of the threads that could. Sleeps, timeouts and I/O count in
full. Where ``/proc`` has no schedstat, nothing is taken out of the wall time. Nor is a full garbage
collection (generation 2) charged: it walks every object the whole session keeps alive, so late in a full run
it takes 0.5 s and more in whichever test's allocations happen to trigger it (timed by ``gc.callbacks``).

Fixtures of a wider scope than the function (a model loaded once for the session) are set up once for many
tests: their setup is not charged to the test that happened to run first. Checked in every run (the full run
of ``.ci/run`` too); ``--max-unmarked-seconds=0`` turns it off.
"""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

DEFAULT_LIMIT_S = 2.0
_TASKS = "/proc/self/task"
_STASH = pytest.StashKey["_Ledger"]()
_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class _FullCollections:
    """The seconds this process has spent in full (generation 2) garbage collections, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self._started = None


_FULL_GC = _FullCollections()


@dataclass(frozen=True)
class Snapshot:
    """The clocks at one instant: wall, this process's CPU, its reaped children's CPU, per thread
    ``(cpu_ns, run_queue_wait_ns)``, and the seconds spent in full garbage collections so far."""

    wall: float
    cpu: float
    children: float
    threads: dict[str, tuple[int, int]]
    full_gc: float = 0.0


def _threads() -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"{_TASKS}/{tid}/schedstat", encoding="ascii") as f:
                on_cpu, waited, _ = f.read().split()
        except (OSError, ValueError):  # the thread ended meanwhile, or no schedstat
            continue
        found[tid] = (int(on_cpu), int(waited))
    return found


def snapshot() -> Snapshot:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Snapshot(
        time.perf_counter(), time.process_time(), kids.ru_utime + kids.ru_stime, _threads(), _FULL_GC.seconds
    )


@dataclass
class Cost:
    """What an interval cost: ``seconds`` (the idle-machine estimate) and its parts, for the report."""

    seconds: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    waited: float = 0.0
    full_gc: float = 0.0

    def add(self, other: Cost, sign: float = 1.0) -> None:
        self.seconds += sign * other.seconds
        self.wall += sign * other.wall
        self.cpu += sign * other.cpu
        self.waited += sign * other.waited
        self.full_gc += sign * other.full_gc


def cost(start: Snapshot, end: Snapshot, load: float, cpus: int = _CPUS) -> Cost:
    """The idle-machine cost of the interval ``start``..``end``; ``load`` is the run-queue wait per CPU
    second to assume for the CPU time of threads and children whose waits cannot be read. The interval's full
    garbage collections are left out (the session's heap, not the test)."""
    full_gc = end.full_gc - start.full_gc
    wall = end.wall - start.wall
    cpu = (end.cpu - start.cpu) + (end.children - start.children)
    seen_cpu = seen_wait = 0
    for tid, (on_cpu_ns, waited_ns) in end.threads.items():
        before = start.threads.get(tid, (0, 0))
        seen_cpu += on_cpu_ns - before[0]
        seen_wait += waited_ns - before[1]
    if end.threads:
        unseen_cpu = max(0.0, cpu - seen_cpu / 1e9)
        waited = seen_wait / 1e9 + load * unseen_cpu
    else:  # no schedstat: the wall time is all there is
        waited = 0.0
    # Threads that waited at once overlap: the CPU time over the CPUs is the floor of the estimate.
    return Cost(max(wall - waited - full_gc, (cpu - full_gc) / cpus, 0.0), wall, cpu, waited, full_gc)


@dataclass
class _Ledger:
    """The run's state: the limit, the session's start (for the load estimate), the current test's cost."""

    limit: float
    session_start: Snapshot
    phase_start: Snapshot | None = None
    test: Cost = field(default_factory=Cost)
    shared: Cost = field(default_factory=Cost)
    fixture_depth: int = 0
    failed: bool = False

    def load(self, now: Snapshot) -> float:
        """Run-queue wait per CPU second of this process's threads since the session began (0..20)."""
        on_cpu = waited = 0
        for tid, (c, w) in now.threads.items():
            before = self.session_start.threads.get(tid, (0, 0))
            on_cpu += c - before[0]
            waited += w - before[1]
        return min(20.0, waited / on_cpu) if on_cpu > 0 else 0.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--max-unmarked-seconds",
        type=float,
        default=DEFAULT_LIMIT_S,
        help="fail a test not marked slow that costs more than this (CPU plus off-CPU time, the run-queue "
        f"waits of a loaded machine taken out; default {DEFAULT_LIMIT_S}; 0 turns the check off)",
    )


def pytest_configure(config: pytest.Config) -> None:
    limit = float(config.getoption("--max-unmarked-seconds"))
    if limit > 0:
        if _FULL_GC not in gc.callbacks:
            gc.callbacks.append(_FULL_GC)
        config.stash[_STASH] = _Ledger(limit, snapshot())


def _ledger(item: pytest.Item) -> _Ledger | None:
    if item.get_closest_marker("slow") is not None:
        return None
    return item.config.stash.get(_STASH, None)


def _measure(item: pytest.Item) -> Generator[None, None, None]:
    ledger = _ledger(item)
    if ledger is None:
        yield
        return
    start = snapshot()
    ledger.phase_start = start
    try:
        yield
    finally:
        end = snapshot()
        ledger.test.add(cost(start, end, ledger.load(end)))
        ledger.phase_start = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    ledger = _ledger(item)
    if ledger is not None:
        ledger.test = Cost()
        ledger.shared = Cost()
        ledger.failed = False
    yield from _measure(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _measure(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield from _measure(item)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    """A fixture of a wider scope than the function is shared by many tests: not charged to this one."""
    ledger = request.config.stash.get(_STASH, None)
    if ledger is None or ledger.phase_start is None or fixturedef.scope == "function" or ledger.fixture_depth:
        return (yield)
    start = snapshot()
    ledger.fixture_depth += 1
    try:
        return (yield)
    finally:
        ledger.fixture_depth -= 1
        end = snapshot()
        ledger.shared.add(cost(start, end, ledger.load(end)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    ledger = _ledger(item)
    if ledger is None:
        return report
    if report.failed:  # the test failed already: that is the report to read
        ledger.failed = True
    if call.when != "teardown" or ledger.failed:
        return report
    charged = Cost()
    charged.add(ledger.test)
    charged.add(ledger.shared, -1.0)
    if charged.seconds > ledger.limit:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} is not marked slow and cost {charged.seconds:.1f} s, over the fast loop's "
            f"{ledger.limit:g} s (CPU {charged.cpu:.1f} s, wall {charged.wall:.1f} s, of which "
            f"{charged.waited:.1f} s waiting for a CPU and {charged.full_gc:.1f} s in full garbage collections, "
            "not charged). Make it faster (call the CLI or the app in-process), or "
            "mark it slow: use a fixture that starts the server or process (they mark their tests slow, "
            "tests/conftest.py), or @pytest.mark.slow with the reason (CONTRIBUTING.md, the fast loop)."
        )
    return report
