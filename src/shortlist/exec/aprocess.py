"""The asyncio shell of :func:`shortlist.exec.process.run_once`: the same engine, off the event loop.

The blocking engine owns every rule (a new session per process, the deadline, the stdout
cap, the stderr tail, the exit grace, killing the process group and its descendants);
this module only runs it in a thread of its own and maps a cancellation onto it:

* one thread per call, so concurrent turns run in parallel and never queue behind the
  loop's default executor (whose size would otherwise bound the concurrent selectors);
* the caller's context is copied into the thread, so events reach the caller's hooks;
* cancelling the awaiting task sets the run's :class:`~shortlist.exec.process.Interrupt`:
  the engine kills the tree and reaps the process at once, and the cancellation goes on
  once it has (so no process of a cancelled turn outlives it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable

from shortlist.exec.process import Interrupt, RunResult, run_once
from shortlist.exec.sandbox import Launch

__all__ = ["arun_once"]


def _settle(done: asyncio.Future[RunResult], result: RunResult | None, error: BaseException | None) -> None:
    if done.cancelled():
        return
    if error is not None:
        done.set_exception(error)
    else:
        assert result is not None
        done.set_result(result)


async def arun_once(
    launch: Launch,
    payload: bytes,
    *,
    timeout_s: float,
    max_output_bytes: int,
    tail_bytes: int,
    selector: str,
    on_spawn: Callable[[int], None] | None = None,
    on_kill: Callable[[int, str, float, str], None] | None = None,
) -> RunResult:
    """Run :func:`~shortlist.exec.process.run_once` without blocking the loop (same arguments, same errors).

    Raises:
        SelectorProcessError: spawn failure, or a non-zero exit (even with valid stdout).
        SelectorTimeout: no exit before the deadline.
        SelectorProtocolError: stdout larger than ``max_output_bytes``.
        asyncio.CancelledError: the task was cancelled (the process tree is killed first).
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[RunResult] = loop.create_future()
    interrupt = Interrupt()
    context = contextvars.copy_context()

    def run() -> None:
        result: RunResult | None = None
        error: BaseException | None = None
        try:
            result = context.run(
                run_once,
                launch,
                payload,
                timeout_s=timeout_s,
                max_output_bytes=max_output_bytes,
                tail_bytes=tail_bytes,
                selector=selector,
                on_spawn=on_spawn,
                on_kill=on_kill,
                interrupt=interrupt,
            )
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            error = exc
        finally:
            interrupt.close()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits the answer
            loop.call_soon_threadsafe(_settle, done, result, error)

    threading.Thread(target=run, name=f"shortlist-exec-{selector}").start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        interrupt.set()
        await asyncio.wait({done})  # the engine kills the tree and reaps the process (shield retrieves its error)
        raise
