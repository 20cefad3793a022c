"""A damaged or full SQLite memory database (issue 12, items 11 and the full-disk half of a Low item).

Damage is real: pages of a real database file are overwritten with random bytes. A full disk is
SQLite's own ``SQLITE_FULL``, reached with ``PRAGMA max_page_count`` (the same error a full
file system gives).
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
from pathlib import Path

import pytest

import shortlist.memory._sqlite as sqlite_store
from shortlist.errors import ConfigError
from shortlist.memory._record import Memory
from shortlist.memory._sqlite import SqliteMemoryStore

SCOPE = {"user_id": "u"}


def damaged_database(path: Path) -> Path:
    """A memory database of 300 memories with every third page partly overwritten by random bytes."""
    store = SqliteMemoryStore(path)
    for i in range(300):
        store.save(Memory(type="general", content=f"note {i} about the weather in Paris " * 5, scope=SCOPE))
    store.close()  # the last connection checkpoints the WAL into the file
    damage(path)
    return path


def damage(path: Path) -> None:
    """Overwrite the b-tree header of every third page (from the third) with random bytes."""
    size = os.path.getsize(path)
    rnd = random.Random(1)
    with open(path, "r+b") as f:
        for page in range(2, size // 4096, 3):
            f.seek(page * 4096)
            f.write(bytes(rnd.randrange(256) for _ in range(64)))


def test_a_damaged_file_is_refused_at_open_naming_it(tmp_path: Path) -> None:
    path = damaged_database(tmp_path / "m.db")
    with pytest.raises(ConfigError) as err:  # before: it opened, and accepted writes
        SqliteMemoryStore(path)
    message = str(err.value)
    assert str(path) in message and "quick_check" in message and "damaged" in message
    assert len(message) < 1000  # the first problems, not SQLite's whole report


def test_damage_found_after_open_is_a_typed_error_with_sqlite_s_cause(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SqliteMemoryStore(path)
    for i in range(300):
        store.save(Memory(type="general", content=f"note {i} about the weather in Paris " * 5, scope=SCOPE))
    store.close()
    store = SqliteMemoryStore(path)  # opened while intact
    damage(path)
    errors: list[BaseException] = []

    def read() -> None:  # a new thread: a new connection that reads the damaged pages
        try:
            store.list(SCOPE, limit=1000)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=read)
    t.start()
    t.join()
    store.close()
    assert errors and isinstance(errors[0], sqlite_store.MemoryStoreCorrupt), errors
    assert str(path) in str(errors[0])
    assert isinstance(errors[0].__cause__, sqlite3.DatabaseError)


def test_a_full_database_is_memory_store_full_and_nothing_is_written(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.db")
    for i in range(5):
        store.save(Memory(type="general", content=f"note {i}", scope=SCOPE))
    conn = store._conn()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite_store.MemoryStoreFull) as err:
        store.save(Memory(type="general", content="x" * 200_000, scope=SCOPE))
    assert "full" in str(err.value)  # the service answers it 507 (tests/server/test_server_store_failures.py)
    cause = err.value.__cause__
    assert isinstance(cause, sqlite3.OperationalError) and cause.sqlite_errorcode == sqlite3.SQLITE_FULL
    assert len(store.list(SCOPE)) == 5  # still readable, and the failed write left nothing
    store.close()


def test_a_failing_rollback_never_hides_the_error_that_caused_it(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.db")
    conn = store._conn()
    with pytest.raises(sqlite3.DatabaseError, match="the real error"), store._write(conn):
        conn.execute("ROLLBACK")  # as SQLite does itself on some errors (full disk, damage)
        raise sqlite3.DatabaseError("the real error")
    store.save(Memory(type="general", content="still works", scope=SCOPE))
    store.close()


def test_a_damaged_feedback_database_is_refused_at_open(tmp_path: Path) -> None:
    from shortlist.errors import CatalogError
    from shortlist.feedback._store import FeedbackStore

    path = tmp_path / "feedback.db"
    store = FeedbackStore(path)
    for i in range(300):
        store.record(f"query number {i} about sending an email to the team " * 3, ["a", "b"], ["a"])
    store.close()
    damage(path)
    with pytest.raises(CatalogError, match="damaged"):  # before: opened, and accepted writes
        FeedbackStore(path)
