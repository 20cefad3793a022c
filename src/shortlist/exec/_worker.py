"""One persistent selector process speaking newline-delimited JSON: started lazily, restarted when it dies.

Framing: each request is one line of JSON on the worker's stdin (with an ``"id"``), each
response one line on its stdout (echoing the ``"id"``; the client checks it). Calls are
serialised with a lock: a worker handles one request at a time. A worker that crashed,
timed out, or broke the framing is killed (its whole process group) and started again on
the next call; each restart is an :class:`~shortlist.exec._events.ExecWorkerRestarted` event.
Its descendants that left the group are killed with it (:class:`~shortlist.exec._tree.ProcessTree`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import threading
import time
import weakref

from shortlist.errors import SelectorProcessError, SelectorProtocolError, SelectorTimeout
from shortlist.exec._process import TailBuffer, describe_exit, spawn
from shortlist.exec._sandbox import Launch
from shortlist.exec._tree import ProcessTree

__all__ = ["WorkerProcess"]

_CHUNK = 65536


def _drain(stream: object, tail: TailBuffer, lock: threading.Lock) -> None:
    read = getattr(stream, "read1", None) or getattr(stream, "read")  # noqa: B009
    with contextlib.suppress(OSError, ValueError):
        while chunk := read(_CHUNK):
            with lock:
                tail.write(chunk)


def _finalize(tree: ProcessTree) -> None:
    tree.kill()


class WorkerProcess:
    """A live worker process and the pipes to talk to it (used under the owner's lock).

    Args:
        launch: what to spawn.
        selector: the selector's name, for errors.
        tail_bytes: how much of stderr to keep.
        started: ``time.monotonic()`` of the call that needs it (for elapsed times).
    """

    def __init__(self, launch: Launch, *, selector: str, tail_bytes: int, started: float) -> None:
        self.selector = selector
        self.proc = spawn(launch, selector=selector, started=started)
        self.pid = self.proc.pid
        self._tree = ProcessTree(self.pid, selector=selector, worker=True)
        self._tail = TailBuffer(tail_bytes)
        self._tail_lock = threading.Lock()
        self._buf = bytearray()
        #: Lines this worker has answered; 0 at a timeout means it may not speak the line protocol.
        self.lines_answered = 0
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._out_fd = self.proc.stdout.fileno()
        self._in_fd = self.proc.stdin.fileno()
        os.set_blocking(self._out_fd, False)
        os.set_blocking(self._in_fd, False)
        self._drainer = threading.Thread(
            target=_drain,
            args=(self.proc.stderr, self._tail, self._tail_lock),
            name=f"shortlist-exec-stderr-{self.pid}",
            daemon=True,
        )
        self._drainer.start()
        self._finalizer = weakref.finalize(self, _finalize, self._tree)

    def stderr_tail(self) -> str:
        """The last bytes the worker wrote on stderr."""
        with self._tail_lock:
            return self._tail.text()

    def alive(self) -> bool:
        """True while the process has not exited."""
        return self.proc.poll() is None

    def exchange(self, line: bytes, *, deadline: float, max_bytes: int, started: float) -> bytes:
        """Send one request line and return the next response line (without its newline).

        Raises:
            SelectorTimeout: no full line before ``deadline``.
            SelectorProcessError: the worker exited (or closed its pipes) mid-request.
            SelectorProtocolError: the response line is longer than ``max_bytes``.
        """
        with selectors.DefaultSelector() as sel:
            self._write(sel, line + b"\n", deadline, started)
            return self._read_line(sel, deadline, max_bytes, started)

    def _write(self, sel: selectors.BaseSelector, data: bytes, deadline: float, started: float) -> None:
        view = memoryview(data)
        offset = 0
        sel.register(self._in_fd, selectors.EVENT_WRITE)
        try:
            while offset < len(view):
                try:
                    offset += os.write(self._in_fd, view[offset : offset + _CHUNK])
                    continue
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    raise self._died("stopped reading its stdin", started) from None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(started)
                sel.select(remaining)
        finally:
            sel.unregister(self._in_fd)

    def _read_line(self, sel: selectors.BaseSelector, deadline: float, max_bytes: int, started: float) -> bytes:
        sel.register(self._out_fd, selectors.EVENT_READ)
        try:
            while True:
                nl = self._buf.find(b"\n")
                if nl >= 0:
                    line = bytes(self._buf[:nl])
                    del self._buf[: nl + 1]
                    self.lines_answered += 1
                    return line
                if len(self._buf) > max_bytes:
                    raise SelectorProtocolError(
                        f"response line exceeded {max_bytes} bytes",
                        selector=self.selector,
                        elapsed_ms=(time.monotonic() - started) * 1000,
                        stderr_tail=self.stderr_tail(),
                    )
                try:
                    chunk = os.read(self._out_fd, _CHUNK)
                except BlockingIOError:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise self._timeout(started) from None
                    sel.select(remaining)
                    continue
                if not chunk:
                    raise self._died("closed its stdout", started)
                self._buf += chunk
        finally:
            sel.unregister(self._out_fd)

    def never_answered(self) -> bool:
        """True when this worker has not written a single byte on stdout since it started."""
        return self.lines_answered == 0 and not self._buf

    def _timeout(self, started: float) -> SelectorTimeout:
        elapsed = (time.monotonic() - started) * 1000
        message = f"worker did not answer within {elapsed:.0f} ms"
        if self.never_answered():
            message = (
                f"worker did not answer a line within {elapsed:.0f} ms, nor any line since it started: the program "
                "may not be a line-protocol worker (one that reads stdin to its end, like a spawn-per-call selector, "
                "waits for an EOF a worker never gets); drop `worker: true`, or answer each request line as it comes"
            )
        return SelectorTimeout(
            message,
            selector=self.selector,
            elapsed_ms=elapsed,
            stderr_tail=self.stderr_tail(),
        )

    def _died(self, what: str, started: float) -> SelectorProcessError:
        try:
            rc: int | None = self.proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            rc = None
        self._drainer.join(timeout=0.2)
        status = describe_exit(rc) if rc is not None else "is still running"
        return SelectorProcessError(
            f"worker {what} ({status})",
            selector=self.selector,
            elapsed_ms=(time.monotonic() - started) * 1000,
            stderr_tail=self.stderr_tail(),
        )

    def kill(self) -> None:
        """Kill the worker's process group and descendants, and release its pipes."""
        self._tree.kill()
        self._release(0.25)

    def stop(self, grace_s: float = 1.0) -> None:
        """Close stdin (the worker should exit on EOF), wait up to ``grace_s``, then kill the group.

        The worker's descendants are noted first, so one that left the group is killed too even
        when the worker exits on EOF (which re-parents its children away from it).
        """
        self._tree.snapshot()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace_s)
        self._tree.kill()
        self._release(0.25)

    def _release(self, wait_s: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=wait_s)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._drainer.join(timeout=0.25)
        if self.proc.stderr is not None and not self._drainer.is_alive():
            with contextlib.suppress(OSError):
                self.proc.stderr.close()
        self._finalizer.detach()
