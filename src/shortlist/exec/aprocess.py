"""The asyncio twin of :func:`shortlist.exec.process.run_once`: one process per call, on the event loop.

Same rules: a new session per process, stdout capped, a stderr tail kept, the whole group
killed on timeout, on overflow, after the call, and when the awaiting task is cancelled; on
Linux, a still-running selector's descendants that left the group are killed with it
(:class:`~shortlist.exec.process.ProcessTree`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from shortlist.errors import SelectorProcessError
from shortlist.exec.process import EXIT_GRACE_S, ProcessTree, RunResult, TailBuffer, finish_run
from shortlist.exec.sandbox import Launch

__all__ = ["arun_once"]

_CHUNK = 65536
_POLL_S = 0.02


class _Overflow(Exception):
    pass


async def _feed(stdin: asyncio.StreamWriter, payload: bytes) -> None:
    try:
        stdin.write(payload)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child stopped reading: its exit status will tell
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            stdin.close()


async def _collect(stream: asyncio.StreamReader, out: bytearray, cap: int) -> None:
    while chunk := await stream.read(_CHUNK):
        out += chunk
        if len(out) > cap:
            raise _Overflow


async def _exit_seen(proc: asyncio.subprocess.Process) -> None:
    # Process.wait() also waits for the pipes to close; the return code is known as soon as it exits
    while proc.returncode is None:
        await asyncio.sleep(_POLL_S)


async def _tail(stream: asyncio.StreamReader, tail: TailBuffer) -> None:
    while chunk := await stream.read(_CHUNK):
        tail.write(chunk)


async def _release(proc: asyncio.subprocess.Process, readers: asyncio.Future[Any]) -> None:
    """Let the killed group's pipes reach EOF (bounded), then make sure the transport is closed."""
    if not readers.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({readers}, timeout=0.25)
    readers.cancel()
    with contextlib.suppress(asyncio.CancelledError, _Overflow, OSError):
        await readers
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        await asyncio.wait_for(proc.wait(), 0.25)
    for _ in range(3):  # the stream protocol closes its transport once the pipes and the process are done
        await asyncio.sleep(0)
    transport = getattr(proc, "_transport", None)  # a pipe still held (by a setsid grandchild): close it
    if transport is not None and not transport.is_closing():
        transport.close()


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
    """Spawn ``launch``, feed ``payload``, collect stdout within ``timeout_s`` (see ``run_once``).

    Raises:
        SelectorProcessError: spawn failure, or a non-zero exit (even with valid stdout).
        SelectorTimeout: no exit before the deadline.
        SelectorProtocolError: stdout larger than ``max_output_bytes``.
    """
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=launch.env,
            start_new_session=True,
        )
    except OSError as exc:
        raise SelectorProcessError(
            f"cannot start {launch.argv[0]!r}: {exc.strerror or exc}",
            selector=selector,
            elapsed_ms=(time.monotonic() - started) * 1000,
        ) from None
    tree = ProcessTree(proc.pid, selector=selector)
    if on_spawn is not None:
        on_spawn(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    err = TailBuffer(tail_bytes)
    feeder = asyncio.ensure_future(_feed(proc.stdin, payload))
    readers = asyncio.gather(_collect(proc.stdout, out, max_output_bytes), _tail(proc.stderr, err))
    exited = asyncio.ensure_future(_exit_seen(proc))
    failure: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            first: set[asyncio.Future[Any]] = {readers, exited}
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            if not readers.done():  # exited, but a grandchild may hold the pipes: a short grace
                await asyncio.wait({readers}, timeout=EXIT_GRACE_S)
            if readers.done() and isinstance(readers.exception(), _Overflow):
                failure = "oversized"
            else:
                await exited
    except TimeoutError:
        failure = "timeout"
    finally:
        tree.kill()  # the process and its descendants on failure or cancellation, stragglers otherwise
        feeder.cancel()
        exited.cancel()
        await _release(proc, readers)
    elapsed = (time.monotonic() - started) * 1000
    return finish_run(
        pid=proc.pid,
        returncode=proc.returncode,
        failure=failure,
        out=bytes(out),
        tail=err.text(),
        elapsed=elapsed,
        timeout_s=timeout_s,
        max_output_bytes=max_output_bytes,
        selector=selector,
        on_kill=on_kill,
    )
