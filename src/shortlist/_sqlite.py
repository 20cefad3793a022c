"""What every SQLite store here does the same way: retry while another process holds the lock, and WAL.

Shared by the SQLite stores (the vector cache, the memory store, the feedback log). SQLite's busy
handler does not cover every contended statement: ``PRAGMA journal_mode = WAL`` on a new file that
other processes are opening at the same moment returns "database is locked" at once, and so can a
read that must upgrade to a write. ``retry_locked`` retries such a statement with a short, jittered
pause until a deadline; ``enable_wal`` reads the journal mode first (WAL is a property of the file,
so a second opener has nothing to change) and sets it under that retry.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["BUSY_TIMEOUT_MS", "enable_wal", "is_locked", "retry_locked"]

#: how long a store waits for another process's lock by default (SQLite's busy handler, then retries)
BUSY_TIMEOUT_MS = 30_000

logger = logging.getLogger("shortlist.sqlite")

_T = TypeVar("_T")


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds the lock (worth retrying)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def retry_locked(fn: Callable[[], _T], *, timeout_ms: int) -> _T:
    """Run ``fn``, retrying while the database is locked, for at most ``timeout_ms``; then re-raise."""
    deadline = time.monotonic() + timeout_ms / 1000
    pause = 0.0005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 1.5, 0.02)


def enable_wal(conn: sqlite3.Connection, *, timeout_ms: int, source: str = "") -> bool:
    """Put the file in WAL mode (retrying while it is locked); ``False`` when SQLite keeps another mode."""

    def set_mode() -> str:
        row = conn.execute("PRAGMA journal_mode").fetchone()
        if row and str(row[0]).lower() == "wal":
            return "wal"
        row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        return str(row[0]).lower() if row else ""

    mode = retry_locked(set_mode, timeout_ms=timeout_ms)
    if mode != "wal":
        logger.debug("sqlite %s: journal mode %s (WAL unavailable)", source, mode or "unknown")
    return mode == "wal"
