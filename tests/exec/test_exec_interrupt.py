"""The engine's interrupt, which the async API sets when a turn is cancelled: wherever the run waits, it stops."""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Callable

import pytest
from exec_helpers import PYTHON, process_gone

from shortlist._events import Event
from shortlist.exec._aprocess import arun_once
from shortlist.exec._events import ExecKilled, ExecSpawned
from shortlist.exec._process import Interrupt, RunInterrupted, run_once
from shortlist.exec._sandbox import Launch

# closes both output pipes, then runs on: the engine is past the pump, waiting for the exit
SILENT = Launch((PYTHON, "-c", "import os, time; os.close(1); os.close(2); time.sleep(30)"), {})
SLEEPER = Launch((PYTHON, "-c", "import time; time.sleep(30)"), {})


def settle(launch: Launch, pid: int) -> None:
    """For ``SILENT``: wait until the child closed its outputs and give the engine time to see both EOFs."""
    if launch is not SILENT:
        return
    for _ in range(500):
        if not any(os.path.exists(f"/proc/{pid}/fd/{fd}") for fd in (1, 2)):
            break
        time.sleep(0.01)
    time.sleep(0.1)


def run(launch: Launch, interrupt: Interrupt, on_spawn: Callable[[int], None] | None = None) -> None:
    run_once(
        launch, b"", timeout_s=30, max_output_bytes=1000, tail_bytes=500, selector="s",
        on_spawn=on_spawn, interrupt=interrupt,
    )  # fmt: skip


@pytest.mark.parametrize("launch", [SLEEPER, SILENT], ids=["pumping", "waiting_for_exit"])
def test_interrupt_kills_the_process_wherever_the_run_waits(launch: Launch, events: list[Event]) -> None:
    interrupt = Interrupt()
    spawned: queue.Queue[int] = queue.Queue()
    raised: list[BaseException] = []

    def target() -> None:
        try:
            run(launch, interrupt, spawned.put)
        except RunInterrupted as exc:
            raised.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    pid = spawned.get(timeout=10)
    settle(launch, pid)
    interrupt.set()
    thread.join(10)
    interrupt.close()
    assert not thread.is_alive()
    assert len(raised) == 1
    assert process_gone(pid, within_s=0.5)
    assert not [e for e in events if isinstance(e, ExecKilled)]  # an interrupt is the caller's, not a failure


def test_an_interrupt_set_before_the_run_spawns_nothing(events: list[Event]) -> None:
    interrupt = Interrupt()
    interrupt.set()
    with pytest.raises(RunInterrupted):
        run(SLEEPER, interrupt)
    interrupt.close()
    interrupt.set()  # no effect once closed
    assert not [e for e in events if isinstance(e, ExecSpawned)]


async def test_cancelling_a_silent_process_kills_it() -> None:
    pids: list[int] = []
    task = asyncio.create_task(
        arun_once(SILENT, b"", timeout_s=30, max_output_bytes=1000, tail_bytes=500, selector="s", on_spawn=pids.append)
    )
    for _ in range(500):
        await asyncio.sleep(0.01)
        if pids:
            break
    settle(SILENT, pids[0])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert process_gone(pids[0], within_s=0.5)
