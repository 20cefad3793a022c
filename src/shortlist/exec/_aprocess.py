"""The asyncio shell of :func:`shortlist.exec._process.run_once`: the same engine, off the event loop.

The blocking engine owns every rule (a new session per process, the deadline, the stdout
cap, the stderr tail, the exit grace, killing the process group and its descendants);
this module only runs it in a thread of its own and maps a cancellation onto it:

* one thread per call, so concurrent turns run in parallel and never queue behind the
  loop's default executor (whose size would otherwise bound the concurrent selectors);
* the caller's context is copied into the thread, so events reach the caller's hooks;
* cancelling the awaiting task sets the run's :class:`~shortlist.exec._process.Interrupt`:
  the engine kills the tree and reaps the process at once, and the cancellation goes on
  once it has (so no process of a cancelled turn outlives it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from shortlist.exec._process import Interrupt, RunResult, run_once
from shortlist.exec._sandbox import Launch

__all__ = ["arun_once", "run_interruptible"]

T = TypeVar("T")


async def run_interruptible(call: Callable[[Interrupt], T], *, name: str = "shortlist-exec") -> T:
    """Run ``call(interrupt)`` in a thread of its own; a cancellation sets ``interrupt`` and waits for ``call`` to end.

    Raises:
        asyncio.CancelledError: the task was cancelled (after ``call`` has returned or raised).
        Exception: whatever ``call`` raises.
    """
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()  # only ``call`` settles it
    interrupt = Interrupt()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            future.set_result(context.run(call, interrupt))
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            future.set_exception(exc)
        finally:
            interrupt.close()

    threading.Thread(target=run, name=name).start()
    done = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        interrupt.set()
        with contextlib.suppress(BaseException):  # the call ends promptly; its outcome is dropped
            await done
        raise


async def arun_once(launch: Launch, payload: bytes, **options: Any) -> RunResult:
    """:func:`~shortlist.exec._process.run_once` (same keyword arguments, same errors) without blocking the loop.

    Cancelling the awaiting task kills the process tree and reaps the process, then re-raises.
    """
    name = f"shortlist-exec-{options.get('selector', '')}"
    return await run_interruptible(
        lambda interrupt: run_once(launch, payload, interrupt=interrupt, **options), name=name
    )
