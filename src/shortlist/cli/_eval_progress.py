"""``shortlist eval``'s progress on stderr: one redrawn status line on a terminal, else a line per phase.

The library's own reports (:mod:`shortlist._progress`: model load, embedding) fill in the phase.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from shortlist.cli._progress import ProgressLines

__all__ = ["Progress", "log", "progress_listening"]


def log(line: str) -> None:
    sys.stderr.write(f"shortlist: {line}\n")
    sys.stderr.flush()


class Progress:
    """One status line on stderr, redrawn a few times a second while work runs.

    It shows the phase (loading the model, building the index: the library's
    :mod:`shortlist._progress` reports fill it in when they come), then the queries done of
    the total with their rate. Nothing is drawn when disabled; the line is cleared on close.
    With ``lines`` (stderr is not a terminal) nothing is redrawn: each phase is a line and the
    queries a line every few percent (:class:`~shortlist.cli._progress.ProgressLines`).
    """

    def __init__(self, enabled: bool, stream: TextIO | None = None, *, lines: ProgressLines | None = None) -> None:
        self.enabled = enabled
        self.lines = lines
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()
        self._phase = ""
        self._phase_start = time.monotonic()
        self._task = ""
        self._count: tuple[int, int] | None = None
        self._count_start = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
        self._out = threading.Lock()

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="shortlist-eval-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            with self._out:
                self._write("")

    @property
    def listening(self) -> bool:
        """Whether the library's progress reports are shown (drawn or as lines)."""
        return self.enabled or self.lines is not None

    def phase(self, text: str) -> None:
        with self._lock:
            self._phase, self._phase_start, self._count, self._task = text, time.monotonic(), None, ""
        if self.lines is not None:
            self.lines.note(text)
        self._draw()

    def listener(self, task: str, done: int, total: int | None) -> None:
        """A :mod:`shortlist._progress` listener: the library's own tasks (model load, embedding)."""
        if self.lines is not None:
            self.lines.on_report(f"{self._phase}: {task}" if self._phase else task, done, total)
        with self._lock:
            ended = done < 0 or (total is not None and done >= total)
            self._task = "" if ended else (f"{task} {done:,}/{total:,}" if total else task)

    def count(self, done: int, total: int) -> None:
        with self._lock:
            if self._count is None:
                self._count_start = time.monotonic()
            self._count = (done, total)
            phase = self._phase
        if self.lines is not None:
            self.lines.on_report(f"{phase}: queries", done, total)
        if done >= total:  # the last state is shown, whatever the tick
            self._draw()

    def _line(self) -> str:
        with self._lock:
            now = time.monotonic()
            if self._count is None:
                extra = f": {self._task}" if self._task else ""
                return f"{self._phase}{extra} … {now - self._phase_start:.1f} s"
            done, total = self._count
            rate = done / max(now - self._count_start, 1e-6)
            eta = f", {(total - done) / rate:.0f} s left" if 0 < done < total and rate > 0 else ""
            return f"{self._phase}: {done:,}/{total:,} queries ({rate:,.0f}/s{eta})"

    def _write(self, line: str) -> None:
        line = line[:99]
        pad = " " * max(0, self._width - len(line))
        self.stream.write(f"\r{line}{pad}\r" if not line else f"\r{line}{pad}")
        self.stream.flush()
        self._width = len(line)

    def _draw(self) -> None:
        if self.enabled and self._thread is not None:
            with self._out:
                self._write(self._line())

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self._draw()


def progress_listening(progress: Progress) -> Any:
    """Listen to the library's progress reports while the block runs, when the module exists."""
    import contextlib

    try:
        from shortlist import _progress as lib_progress
    except ImportError:  # pragma: no cover - older trees
        return contextlib.nullcontext()
    return lib_progress.listen(progress.listener) if progress.listening else contextlib.nullcontext()
