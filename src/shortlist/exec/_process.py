"""Run one external process under a deadline: feed stdin, cap stdout, keep a stderr tail, kill the tree.

This is the one I/O engine of the exec client (the asyncio API, :mod:`shortlist.exec._aprocess`,
runs it in a thread and turns a cancellation into an :class:`Interrupt`; the persistent
worker uses its spawn and kill); it knows nothing about the wire protocol.

Every process starts in a new session (its own process group), so a timeout kills the
selector *and* whatever it spawned. After the call the group is killed too, so no
stray grandchild outlives a turn; a grandchild that keeps the pipes open after the main
process exited cannot hold the call for more than :data:`EXIT_GRACE_S`.

A descendant can leave the group (``setsid()``, ``setpgid()``): the kill goes through
:class:`~shortlist.exec._tree.ProcessTree`, which also reaches those, on Linux.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from shortlist.errors import SelectorProcessError, SelectorProtocolError, SelectorTimeout
from shortlist.exec._sandbox import Launch
from shortlist.exec._tree import ProcessTree

__all__ = [
    "EXIT_GRACE_S",
    "Interrupt",
    "ProcessTree",
    "RunInterrupted",
    "RunResult",
    "TailBuffer",
    "describe_exit",
    "run_once",
    "spawn",
    "wait_exit",
]

#: How long pipes may stay open after the main process exited (a grandchild holding them).
EXIT_GRACE_S = 0.2
_CHUNK = 65536
_POLL_S = 0.05


class TailBuffer:
    """Keep the last ``limit`` bytes written to it (a stderr tail)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._data = bytearray()

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``, dropping what falls outside the tail."""
        self._data += chunk
        if len(self._data) > 2 * self.limit:
            del self._data[: -self.limit]

    def text(self) -> str:
        """The tail as text (invalid UTF-8 replaced), at most ``limit`` bytes of it."""
        return bytes(self._data[-self.limit :]).decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished run: exit status 0, what it wrote, how long it took."""

    stdout: bytes
    stderr_tail: str
    elapsed_ms: float
    pid: int


class RunInterrupted(Exception):
    """A run stopped by its :class:`Interrupt`; its process tree was killed and the process reaped."""


class Interrupt:
    """Stop a :func:`run_once` from another thread: the run kills its process tree and raises :class:`RunInterrupted`.

    The run waits on the read end of a pipe beside the process's pipes, so the interrupt
    takes effect at once, whatever the run is waiting for. After :meth:`close` (by whoever
    owns the run, once it is over) :meth:`set` does nothing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read, self._write = os.pipe()
        self._set = False
        self._closed = False

    def fileno(self) -> int:
        """The descriptor that becomes readable once the interrupt is set."""
        return self._read

    def is_set(self) -> bool:
        """True once :meth:`set` was called (before :meth:`close`)."""
        return self._set

    def set(self) -> None:
        """Interrupt the run (idempotent; no effect once closed)."""
        with self._lock:
            if not self._set and not self._closed:
                self._set = True
                os.write(self._write, b"!")

    def close(self) -> None:
        """Release the pipe (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self._read)
                os.close(self._write)


def spawn(launch: Launch, *, selector: str, started: float) -> subprocess.Popen[bytes]:
    """Start ``launch`` in a new session with all three pipes.

    Raises:
        SelectorProcessError: the program cannot be started (missing, not executable, …).
    """
    try:
        return subprocess.Popen(
            list(launch.argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=launch.env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise SelectorProcessError(
            f"cannot start {launch.argv[0]!r}: {exc.strerror or exc}",
            selector=selector,
            elapsed_ms=_ms_since(started),
        ) from None


def _has_exited(pid: int) -> bool:
    """True when ``pid`` has exited; it is not reaped, so its group id cannot be reused yet."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def wait_exit(proc: subprocess.Popen[bytes], deadline: float, interrupt: Interrupt | None = None) -> bool:
    """Wait until ``proc`` exits (without reaping it), ``deadline`` or ``interrupt``; return True if it exited."""
    if proc.returncode is not None or _has_exited(proc.pid):
        return True
    wake = [interrupt.fileno()] if interrupt is not None else []
    pidfd_open: Callable[[int], int] | None = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(proc.pid)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                remaining = max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([fd, *wake], [], [], remaining)
                return fd in ready or _has_exited(proc.pid)
            finally:
                os.close(fd)
    delay = 0.0005
    while time.monotonic() < deadline and not (interrupt is not None and interrupt.is_set()):
        if _has_exited(proc.pid):
            return True
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, _POLL_S)
    return _has_exited(proc.pid)


def describe_exit(returncode: int) -> str:
    """``exited with status 3`` or ``was killed by SIGSEGV``."""
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode).name
        except ValueError:
            sig = f"signal {-returncode}"
        return f"was killed by {sig}"
    return f"exited with status {returncode}"


def _ms_since(start: float) -> float:
    return (time.monotonic() - start) * 1000


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0.25)


def _result(
    *,
    pid: int,
    returncode: int | None,
    failure: str | None,
    out: bytes,
    tail: str,
    elapsed: float,
    timeout_s: float,
    max_output_bytes: int,
    selector: str,
    on_kill: Callable[[int, str, float, str], None] | None,
) -> RunResult:
    """Turn a finished (or killed) call into its result, or the typed error that says why it failed.

    Raises:
        SelectorTimeout: ``failure == "timeout"``.
        SelectorProtocolError: ``failure == "oversized"``.
        SelectorProcessError: the process exited non-zero (or was killed by a signal).
    """
    if failure is not None and on_kill is not None:
        on_kill(pid, failure, elapsed, tail)
    if failure == "timeout":
        raise SelectorTimeout(
            f"no answer within {timeout_s * 1000:.0f} ms; process group killed",
            selector=selector,
            elapsed_ms=elapsed,
            stderr_tail=tail,
        )
    if failure == "oversized":
        raise SelectorProtocolError(
            f"stdout exceeded {max_output_bytes} bytes; process group killed",
            selector=selector,
            elapsed_ms=elapsed,
            stderr_tail=tail,
        )
    rc = returncode if returncode is not None else -signal.SIGKILL
    if rc != 0:
        raise SelectorProcessError(
            f"selector process {describe_exit(rc)}", selector=selector, elapsed_ms=elapsed, stderr_tail=tail
        )
    return RunResult(out, tail, elapsed, pid)


def run_once(
    launch: Launch,
    payload: bytes,
    *,
    timeout_s: float,
    max_output_bytes: int,
    tail_bytes: int,
    selector: str,
    on_spawn: Callable[[int], None] | None = None,
    on_kill: Callable[[int, str, float, str], None] | None = None,
    interrupt: Interrupt | None = None,
) -> RunResult:
    """Spawn ``launch``, write ``payload`` to its stdin, and collect its stdout within ``timeout_s``.

    Args:
        launch: the argv and environment to spawn.
        payload: everything to write on stdin (then stdin is closed).
        timeout_s: the deadline; on expiry the process group is killed.
        max_output_bytes: stdout beyond this is a protocol error (the group is killed).
        tail_bytes: how much of stderr to keep (the end of it).
        selector: the selector's name, for errors.
        on_spawn: called with the pid once the process started.
        on_kill: called with ``(pid, reason, elapsed_ms, stderr_tail)`` when the group is killed
            on a timeout or an oversized output (not on an interrupt).
        interrupt: set from another thread to stop the run (the tree is killed, the process reaped).

    Returns:
        The stdout of a process that exited with status 0.

    Raises:
        SelectorProcessError: spawn failure, or a non-zero exit (even with valid stdout).
        SelectorTimeout: no exit before the deadline.
        SelectorProtocolError: stdout larger than ``max_output_bytes``.
        RunInterrupted: ``interrupt`` was set (before the spawn, or during the run).
    """
    started = time.monotonic()
    deadline = started + timeout_s
    if interrupt is not None and interrupt.is_set():
        raise RunInterrupted
    proc = spawn(launch, selector=selector, started=started)
    tree = ProcessTree(proc.pid, selector=selector)
    if on_spawn is not None:
        on_spawn(proc.pid)
    out = bytearray()
    err = TailBuffer(tail_bytes)
    failure: str | None = None
    try:
        failure = _pump(proc, payload, deadline, out, err, max_output_bytes, interrupt)
        if failure is None and not wait_exit(proc, deadline, interrupt):
            failure = "interrupted" if interrupt is not None and interrupt.is_set() else "timeout"
    finally:
        tree.kill()  # the process and its descendants on failure, stragglers of a finished one otherwise
        _close_pipes(proc)
        _reap(proc)
    if failure == "interrupted":
        raise RunInterrupted
    elapsed = _ms_since(started)
    return _result(
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


def _pump(
    proc: subprocess.Popen[bytes],
    payload: bytes,
    deadline: float,
    out: bytearray,
    err: TailBuffer,
    max_output_bytes: int,
    interrupt: Interrupt | None,
) -> str | None:
    """Shovel bytes until both output pipes close; return ``"timeout"``/``"oversized"``/``"interrupted"`` or None."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin_fd, stdout_fd, stderr_fd = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
    view = memoryview(payload)
    offset = 0
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        if payload:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        sel.register(stdout_fd, selectors.EVENT_READ)
        sel.register(stderr_fd, selectors.EVENT_READ)
        wake_fd = -1
        if interrupt is not None:
            wake_fd = interrupt.fileno()
            sel.register(wake_fd, selectors.EVENT_READ)
        open_outputs = 2
        while open_outputs:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            if exited_at is not None and now - exited_at > EXIT_GRACE_S:
                return None  # a grandchild holds the pipes; the caller kills the group
            for key, _ in sel.select(min(deadline - now, _POLL_S)):
                fd = key.fd
                if fd == wake_fd:
                    return "interrupted"
                if fd == stdin_fd:
                    try:
                        offset += os.write(fd, view[offset : offset + _CHUNK])
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, ConnectionResetError):
                        offset = len(view)  # the child stopped reading: its exit status will tell
                    if offset >= len(view):
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    sel.unregister(fd)
                    open_outputs -= 1
                elif fd == stdout_fd:
                    out += chunk
                    if len(out) > max_output_bytes:
                        return "oversized"
                else:
                    err.write(chunk)
            if exited_at is None and open_outputs and _has_exited(proc.pid):
                exited_at = time.monotonic()
    return None
