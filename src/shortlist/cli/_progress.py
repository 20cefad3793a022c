"""The CLI's progress on stderr: what runs now (model load, embedding, indexing) and how far it is.

:func:`progress_line` listens to :mod:`shortlist._progress` while a command works and redraws one
line of stderr ten times a second, so it moves even while one long call (loading the model)
runs. It is off when stderr is not a terminal or with ``--no-progress``; the line is erased
when the command is done, so stdout's output is all that stays.

:class:`ProgressLines` is the form for a stderr that is not a terminal (a log file, a pipe, CI),
for commands that run for minutes (``shortlist eval``): no redrawing, but a whole line when a
task starts and each time a counted task passes another few percent, so a log shows the work
moving instead of minutes of silence (:func:`progress_lines_wanted` says when).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from shortlist._progress import listen
from shortlist.errors import UsageError

__all__ = ["ProgressLines", "add_progress_flag", "progress_line", "progress_lines_wanted", "progress_wanted"]

_SPIN = "|/-\\"


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-progress`` to a subcommand."""
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress line on stderr (it is shown only when stderr is a terminal)",
    )


def progress_wanted(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """Whether to draw: stderr is a terminal and ``--no-progress`` was not given."""
    stream = stream or sys.stderr
    if getattr(args, "no_progress", False) or getattr(args, "quiet", False):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_lines_wanted(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """Whether to write :class:`ProgressLines`: stderr is not a terminal and ``--no-progress`` was not given."""
    stream = stream or sys.stderr
    if getattr(args, "no_progress", False) or getattr(args, "quiet", False):
        return False
    return not progress_wanted(args, stream)


class ProgressLines:
    """Progress as whole lines (``shortlist: TASK: DONE/TOTAL (P%), S s``), for a stderr that is not a terminal.

    A :mod:`shortlist._progress` listener (:meth:`on_report`): a counted task writes a line when it
    starts, each time it passes another ``step_pct`` percent (at most one line per
    ``min_interval_s`` of a task, so a task of a few seconds is two lines), and when it ends; an
    uncounted task (loading a model) a line when it starts. :meth:`note` writes a line of its own
    (a phase). A stream that fails (a closed pipe) ends the lines, never the work.
    """

    def __init__(self, stream: TextIO | None = None, *, step_pct: float = 5.0, min_interval_s: float = 1.0) -> None:
        if not 0 < step_pct <= 100 or min_interval_s < 0:
            raise UsageError("step_pct must be in (0, 100] and min_interval_s >= 0")
        self.stream = stream or sys.stderr
        self.step_pct = float(step_pct)
        self.min_interval_s = float(min_interval_s)
        self._lock = threading.Lock()
        self._tasks: dict[str, tuple[int, float, float]] = {}  # task -> (last step written, started, written at)
        self._broken = False

    def _write(self, text: str) -> None:
        if self._broken:
            return
        try:
            self.stream.write(f"shortlist: {text}\n")
            self.stream.flush()
        except (OSError, ValueError):
            self._broken = True

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own."""
        with self._lock:
            self._write(text)

    def on_report(self, task: str, done: int, total: int | None) -> None:
        """A :data:`shortlist._progress.ProgressListener`: write a line when ``task`` has moved a step."""
        now = time.monotonic()
        with self._lock:
            ended = done < 0 or (total is not None and total > 0 and done >= total)
            known = self._tasks.get(task)
            if not total:  # uncounted work: a line when it starts
                if ended:
                    self._tasks.pop(task, None)
                elif known is None:
                    self._tasks[task] = (0, now, now)
                    self._write(f"{task} …")
                return
            started = known[1] if known is not None else now
            if ended:
                self._tasks.pop(task, None)
                if done >= 0:
                    self._write(f"{task}: {total:,}/{total:,} (100%), {now - started:.1f} s")
                return
            step = int(done * 100 / total // self.step_pct)
            if known is None or (step > known[0] and now - known[2] >= self.min_interval_s):
                self._tasks[task] = (step, started, now)
                self._write(f"{task}: {done:,}/{total:,} ({done * 100 // total}%), {now - started:.1f} s")


class _Line:
    def __init__(self, stream: TextIO, interval_s: float) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self.tasks: dict[str, tuple[int, int | None, float]] = {}  # task -> (done, total, started)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.drawn = False
        self.tick = 0

    def on_report(self, task: str, done: int, total: int | None) -> None:
        with self.lock:
            if done < 0 or (total is not None and done >= total):
                self.tasks.pop(task, None)
            else:
                started = self.tasks.get(task, (0, None, time.monotonic()))[2]
                self.tasks[task] = (done, total, started)

    def text(self) -> str:
        now = time.monotonic()
        parts = []
        with self.lock:
            for task, (done, total, started) in self.tasks.items():
                count = f" {done}/{total}" if total else ""
                parts.append(f"{task}{count} ({now - started:.1f} s)")
        if not parts:
            return ""
        self.tick += 1
        return f"{_SPIN[self.tick % len(_SPIN)]} " + " · ".join(parts)

    def draw(self) -> None:
        text = self.text()
        try:
            if text:
                self.stream.write("\r\x1b[K" + text[:200])
                self.drawn = True
            elif self.drawn:
                self.stream.write("\r\x1b[K")
                self.drawn = False
            self.stream.flush()
        except (OSError, ValueError):
            self.stop.set()

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):
            self.draw()

    def erase(self) -> None:
        if self.drawn:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass


@contextmanager
def progress_line(
    args: argparse.Namespace, *, stream: TextIO | None = None, force: bool = False, interval_s: float = 0.1
) -> Iterator[Any]:
    """Draw the progress of the work done in the block on ``stream`` (stderr) when wanted.

    Yields the listener (``listener(task, done, total)``), so a command can report its own
    steps too; it is a no-op when nothing is drawn.
    """
    out = stream or sys.stderr
    if not (force or progress_wanted(args, out)):
        yield lambda task, done, total=None: None
        return
    line = _Line(out, interval_s)
    drawer = threading.Thread(target=line.run, name="shortlist-progress", daemon=True)
    with listen(line.on_report):
        drawer.start()
        try:
            yield line.on_report
        finally:
            line.stop.set()
            drawer.join(timeout=1)
            line.erase()
