"""SqliteMemoryStore on a real file: restarts, concurrent threads and processes, a writer killed mid-write."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from shortlist.memory import Memory, SqliteMemoryStore


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=60, check=True
    )


@pytest.mark.slow  # processes
def test_a_new_process_reads_what_was_saved(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    with SqliteMemoryStore(db) as store:
        saved = store.save(Memory(type="preference", content="prefers window seats", scope={"user_id": "u1"}))
    out = _run(
        """
        import json, sys
        from shortlist.memory import SqliteMemoryStore
        with SqliteMemoryStore(sys.argv[1]) as s:
            print(json.dumps([m.to_dict() for m in s.retrieve({"user_id": "u1"}, "window")]))
            print(json.dumps([m.to_dict() for m in s.list({"user_id": "u2"})]))
        """,
        str(db),
    )
    lines = out.stdout.strip().splitlines()
    assert '"prefers window seats"' in lines[0] and saved.id in lines[0]
    assert lines[1] == "[]"


def test_wal_mode_is_on(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    SqliteMemoryStore(db).close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_concurrent_threads_lose_and_leak_nothing(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "mem.db")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        scope = {"user_id": f"u{n % 4}", "thread": str(n)}
        try:
            for i in range(40):
                store.save(Memory(type="fact", content=f"thread {n} note {i}", scope=scope))
                if i % 5 == 0:
                    for m in store.retrieve(scope, "note"):
                        assert m.scope == scope
        except BaseException as exc:  # collected and asserted on in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for n in range(8):
        got = store.list({"user_id": f"u{n % 4}", "thread": str(n)}, limit=1000)
        assert sorted(m.content for m in got) == sorted(f"thread {n} note {i}" for i in range(40))
    store.close()


@pytest.mark.slow  # processes
def test_concurrent_processes_share_one_file(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    SqliteMemoryStore(db).close()
    code = textwrap.dedent(
        """
        import sys
        from shortlist.memory import Memory, SqliteMemoryStore
        with SqliteMemoryStore(sys.argv[1]) as s:
            for i in range(50):
                s.save(Memory(type="fact", content=f"proc {sys.argv[2]} item {i}", scope={"user_id": sys.argv[2]}))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(db), f"p{n}"]) for n in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with SqliteMemoryStore(db) as store:
        for n in range(4):
            assert len(store.list({"user_id": f"p{n}"}, limit=100)) == 50


@pytest.mark.slow  # processes
def test_a_writer_killed_mid_write_loses_at_most_the_in_flight_write(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    code = textwrap.dedent(
        """
        import sys
        from shortlist.memory import Memory, SqliteMemoryStore
        s = SqliteMemoryStore(sys.argv[1])
        i = 0
        while True:
            s.save(Memory(type="fact", content="x" * 2000 + f" item {i}", scope={"user_id": "k"}))
            print(i, flush=True)
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 150:
            break
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    proc.wait(timeout=10)
    proc.stdout.close()
    acknowledged = max([acknowledged, *(int(x) for x in rest.split())])
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with SqliteMemoryStore(db) as store:
        contents = [m.content for m in store.list({"user_id": "k"}, limit=100_000)]
    # every acknowledged write is there, in order; at most the in-flight one landed unacknowledged
    assert acknowledged + 1 <= len(contents) <= acknowledged + 2
    assert [c.rsplit(" ", 1)[1] for c in contents] == [str(i) for i in range(len(contents))]
