"""Processes that open one new SQLite file at the same instant all succeed (vector cache, memory, feedback).

SQLite's busy handler does not cover ``PRAGMA journal_mode = WAL`` on a file others are creating: it
answered "database is locked" at once to one of several processes opening a new vector cache
together (a CI failure; reproduced 3 times in 15 rounds of 8 processes before ``shortlist._sqlite``).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shortlist._sqlite import enable_wal, is_locked, retry_locked

OPEN = {
    "vector_cache": (
        "import numpy as np\n"
        "from shortlist.embeddings._cache import VectorStore, text_key\n"
        "def go(path, me):\n"
        "    s = VectorStore(path)\n"
        "    s.put('m', [(text_key(me), np.ones(4, dtype=np.float32))])\n"
        "    assert len(s.get('m', [text_key(me)])) == 1\n"
    ),
    "memory": (
        "from shortlist.memory._record import Memory\n"
        "from shortlist.memory._sqlite import SqliteMemoryStore\n"
        "def go(path, me):\n"
        "    s = SqliteMemoryStore(path)\n"
        "    s.save(Memory(type='fact', content='fact ' + me, scope={'user_id': me}))\n"
        "    assert len(s.list({'user_id': me})) == 1\n"
    ),
    "feedback": (
        "from shortlist.feedback._store import FeedbackStore\n"
        "def go(path, me):\n"
        "    s = FeedbackStore(path)\n"
        "    s.record('query ' + me, selected=['t' + me], used=['t' + me])\n"
    ),
}

RUN = """
import sys, time
{body}
start = float(sys.argv[3])
while time.time() < start:
    pass
go(sys.argv[1], sys.argv[2])
print("ok")
"""

PROCESSES = 8
ROUNDS = 3


@pytest.mark.slow  # processes racing
@pytest.mark.parametrize("store", sorted(OPEN))
def test_processes_opening_a_new_file_together_all_succeed(tmp_path: Path, store: str) -> None:
    script = RUN.format(body=OPEN[store])
    for round_ in range(ROUNDS):
        path = tmp_path / str(round_) / "store.sqlite3"
        start = time.time() + 2.0  # every process imported and waiting before the first opens
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(path), str(n), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for n in range(PROCESSES)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        failed = [err.decode()[-600:] for p, (_, err) in zip(procs, outs, strict=True) if p.returncode]
        assert not failed, failed
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_retry_locked_waits_for_the_lock_then_gives_up_with_sqlites_error(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    began = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as info:
        retry_locked(lambda: other.execute("INSERT INTO t VALUES (1)"), timeout_ms=200)
    assert is_locked(info.value) and time.monotonic() - began >= 0.2
    holder.execute("COMMIT")
    retry_locked(lambda: other.execute("INSERT INTO t VALUES (1)"), timeout_ms=200)
    assert other.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1


def test_retry_locked_does_not_retry_other_errors() -> None:
    calls = []

    def bad() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("no such table: nope")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_locked(bad, timeout_ms=1000)
    assert calls == [1]


def test_enable_wal_reports_a_file_that_cannot_use_wal() -> None:
    conn = sqlite3.connect(":memory:")  # an in-memory database keeps journal mode "memory"
    assert enable_wal(conn, timeout_ms=100) is False
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
