"""The CLI's progress line on stderr: what runs now (model load, embedding, indexing) and for how long.

:func:`progress_line` listens to :mod:`shortlist.progress` while a command works and redraws one
line of stderr ten times a second, so it moves even while one long call (loading the model)
runs. It is off when stderr is not a terminal or with ``--no-progress``; the line is erased
when the command is done, so stdout's output is all that stays.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from shortlist.progress import listen

__all__ = ["add_progress_flag", "progress_line", "progress_wanted"]

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
