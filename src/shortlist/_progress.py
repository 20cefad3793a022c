"""Progress of long work (model load, embedding, index build), reported to whoever listens.

Library code calls :func:`report` (``task``, units ``done`` of ``total``, or ``total=None`` for
work that cannot be counted, like loading a model); nothing happens unless a listener is set
(:func:`listen`, process-wide: the work runs on selector and embedding threads). The CLI's
listener draws a line on stderr (``shortlist.cli._progress``); a host could log instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ProgressListener", "listen", "report"]

#: ``(task, done, total)``; ``done == total`` (or ``done < 0`` for uncounted work) ends the task.
ProgressListener = Callable[[str, int, "int | None"], None]

_lock = threading.Lock()
_listeners: list[ProgressListener] = []


def report(task: str, done: int, total: int | None = None) -> None:
    """Tell the listeners that ``done`` of ``total`` units of ``task`` are done (``done=-1``: it ended).

    A listener that raises is ignored: progress never breaks the work.
    """
    if not _listeners:
        return
    with _lock:
        targets = list(_listeners)
    for listener in targets:
        try:
            listener(task, done, total)
        except Exception:  # progress is cosmetic: never let it break the work
            continue


@contextmanager
def listen(listener: ProgressListener) -> Iterator[None]:
    """Deliver every :func:`report` to ``listener`` while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
