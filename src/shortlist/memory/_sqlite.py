"""``SqliteMemoryStore``: the embedded default memory store, one SQLite file.

WAL journal, one connection per thread, ``BEGIN IMMEDIATE`` write transactions, so concurrent
threads and processes may share a file. Threads of one process take turns on a lock; between
processes a locked database is retried with short jittered sleeps up to ``busy_timeout_ms``
(SQLite's own busy handler backs off to 100 ms sleeps, which starves writers under contention).
Every write is one transaction: a process killed mid-write loses at most that write. Recall
uses FTS5 (``porter unicode61``) with the query's content words joined by ``OR`` and ranked
by ``bm25()``. Expiry is enforced in every read query; :meth:`SqliteMemoryStore.purge_expired`
deletes expired rows for good.

Opening runs ``PRAGMA quick_check`` and refuses a damaged file (:class:`~shortlist.errors.ConfigError`
naming it), so a service never reports ready on it. Later failures are typed: a full disk (or
``max_page_count``) is :class:`MemoryStoreFull` (HTTP 507), damage found mid-operation
:class:`MemoryStoreCorrupt`; both keep SQLite's own error as their cause, never the error of the
``ROLLBACK`` that follows (SQLite may already have rolled the transaction back itself).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from shortlist._sqlite import enable_wal, retry_locked
from shortlist._text import analyser
from shortlist.errors import ConfigError, MemoryStoreCorrupt, MemoryStoreFull
from shortlist.memory._record import Memory, scope_key
from shortlist.memory._store import MemoryStore, _check_limit, stamp

__all__ = ["MemoryStoreCorrupt", "MemoryStoreFull", "SqliteMemoryStore"]

logger = logging.getLogger("shortlist.memory")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_MAX_QUERY_TERMS = 64
_SQLITE_BUSY_MS = 5  # SQLite's own wait before our jittered retry loop takes over
_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    pk INTEGER PRIMARY KEY,
    scope_key TEXT NOT NULL,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    confidence REAL NOT NULL,
    scope TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_start INTEGER NOT NULL,
    turn_end INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    accessed_us INTEGER NOT NULL,
    expires_us INTEGER,
    UNIQUE (scope_key, id)
);
CREATE INDEX IF NOT EXISTS memories_scope ON memories (scope_key, pk);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    content, content='memories', content_rowid='pk', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.pk, new.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.pk, old.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.pk, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.pk, new.content);
END;
"""

_COLUMNS = (
    "m.id, m.type, m.content, m.metadata, m.confidence, m.scope, m.session_id, "
    "m.turn_start, m.turn_end, m.created_us, m.accessed_us, m.expires_us"
)


_SQLITE_FULL = 13
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26
_QUICK_CHECK_LINES = 3


def _typed(exc: sqlite3.Error, path: Path) -> Exception:
    """SQLite's error as a typed one (full disk, damaged file), else ``exc`` itself."""
    primary = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if primary == _SQLITE_FULL:
        return MemoryStoreFull(f"memory database {path} is full (no space left for it on its disk): {exc}")
    if primary in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return MemoryStoreCorrupt(
            f"memory database {path} is damaged ({exc}); stop the service and restore the file from a backup"
        )
    return exc


def _to_us(value: datetime | None) -> int | None:
    return None if value is None else (value - _EPOCH) // _US


def _from_us(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + value * _US


def _row_to_memory(row: sqlite3.Row | tuple[Any, ...]) -> Memory:
    return Memory(
        id=row[0],
        type=row[1],
        content=row[2],
        metadata=json.loads(row[3]),
        confidence=row[4],
        scope=json.loads(row[5]),
        session_id=row[6],
        turn_range=(row[7], row[8]),
        created_at=_from_us(row[9]),
        accessed_at=_from_us(row[10]),
        expires_at=_from_us(row[11]),
    )


def _now_us() -> int:
    return (datetime.now(UTC) - _EPOCH) // _US


class SqliteMemoryStore(MemoryStore):
    """A memory store in one SQLite file (WAL), safe across threads and processes.

    Args:
        path: the database file (created with its parent folder when missing).
        busy_timeout_ms: how long an operation waits for another process's lock before failing.
        synchronous: SQLite ``synchronous`` pragma. ``NORMAL`` (default) survives any process
            crash in WAL mode; ``FULL`` also survives power loss, at an fsync per commit.

    Raises:
        ConfigError: the file cannot be opened as a database, or SQLite lacks FTS5.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 10_000, synchronous: str = "NORMAL"):
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._all: builtins.list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._closed = False
        self._thread_lock = threading.Lock()
        try:
            conn = self._conn()
            self._quick_check(conn)
            with self._write(conn):
                for statement in _split(_SCHEMA):
                    conn.execute(statement)
        except (sqlite3.DatabaseError, MemoryStoreCorrupt, MemoryStoreFull) as exc:
            self.close()
            raise ConfigError(f"cannot open memory database: {exc}", source=str(self.path)) from exc
        except ConfigError:
            self.close()
            raise

    def _quick_check(self, conn: sqlite3.Connection) -> None:
        """Refuse a damaged file: ``PRAGMA quick_check`` must answer ``ok``.

        Raises:
            ConfigError: the check found damage (its first lines are in the message).
        """
        try:
            rows = self._retry(lambda: conn.execute("PRAGMA quick_check").fetchall())
        except sqlite3.DatabaseError as exc:  # damage bad enough that the check itself stops
            rows = [(str(exc),)]
        if [tuple(r) for r in rows] == [("ok",)]:
            return
        lines = [line for row in rows for line in str(row[0]).splitlines() if line.strip()]
        shown = "; ".join(lines[:_QUICK_CHECK_LINES]) + (f"; ... ({len(lines)} problems)" if len(lines) > 3 else "")
        raise ConfigError(
            f"memory database is damaged (PRAGMA quick_check: {shown}); restore it from a backup, or move it "
            "away to start with an empty one",
            source=str(self.path),
        )

    # -- connections ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise ConfigError("this SqliteMemoryStore is closed", source=str(self.path))
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_MS}")
            enable_wal(conn, timeout_ms=self._busy_timeout_ms, source=str(self.path))
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _retry(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn``, retrying while another process holds the database lock."""
        return retry_locked(fn, timeout_ms=self._busy_timeout_ms)

    @contextmanager
    def _write(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction; SQLite errors come out typed, with SQLite's own error as the cause."""
        with self._thread_lock:
            try:
                self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
                try:
                    yield
                except BaseException as exc:
                    self._rollback(conn, exc)
                    raise
                try:
                    self._retry(lambda: conn.execute("COMMIT"))
                except sqlite3.Error as exc:
                    self._rollback(conn, exc)
                    raise
            except sqlite3.Error as exc:
                typed = _typed(exc, self.path)
                if typed is exc:
                    raise
                logger.error("%s", typed)
                raise typed from exc

    def _rollback(self, conn: sqlite3.Connection, cause: BaseException) -> None:
        """Roll back after ``cause``; a failing ROLLBACK is logged and never hides ``cause``."""
        if not conn.in_transaction:  # SQLite already rolled back (e.g. on SQLITE_FULL or damage)
            return
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            logger.warning("rollback after %r failed: %s", cause, exc)

    def _read(self, sql: str, params: Sequence[Any]) -> builtins.list[Any]:
        conn = self._conn()
        try:
            return self._retry(lambda: conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            typed = _typed(exc, self.path)
            if typed is exc:
                raise
            logger.error("%s", typed)
            raise typed from exc

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        self._closed = True
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    # -- contract ------------------------------------------------------------------------------

    def save(self, memory: Memory) -> Memory:
        """See :meth:`MemoryStore.save`."""
        key = scope_key(memory.scope)
        conn = self._conn()
        with self._write(conn):
            created: datetime | None = None
            if memory.id:
                row = conn.execute(
                    "SELECT created_us FROM memories WHERE scope_key = ? AND id = ?", (key, memory.id)
                ).fetchone()
                if row is not None:
                    created = _from_us(row[0])
            now = datetime.now(UTC)
            stored = stamp(memory, Memory("x", "", created_at=created) if created else None, now)
            conn.execute("DELETE FROM memories WHERE scope_key = ? AND id = ?", (key, stored.id))
            conn.execute(
                "INSERT INTO memories (scope_key, id, type, content, metadata, confidence, scope, session_id,"
                " turn_start, turn_end, created_us, accessed_us, expires_us)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    stored.id,
                    stored.type,
                    stored.content,
                    json.dumps(dict(stored.metadata), ensure_ascii=False, default=str),
                    stored.confidence,
                    json.dumps(dict(stored.scope), ensure_ascii=False),
                    stored.session_id,
                    stored.turn_range[0],
                    stored.turn_range[1],
                    _to_us(stored.created_at),
                    _to_us(stored.accessed_at),
                    _to_us(stored.expires_at),
                ),
            )
        return stored

    @staticmethod
    def _filters(types: Sequence[str] | None, min_confidence: float) -> tuple[str, builtins.list[Any]]:
        sql = " AND (m.expires_us IS NULL OR m.expires_us > ?)"
        params: builtins.list[Any] = [_now_us()]
        if types:
            sql += f" AND m.type IN ({', '.join('?' * len(types))})"
            params.extend(types)
        if min_confidence > 0:
            sql += " AND m.confidence >= ?"
            params.append(float(min_confidence))
        return sql, params

    def retrieve(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        types: Sequence[str] | None = None,
        limit: int = 10,
        min_confidence: float = 0.0,
    ) -> builtins.list[Memory]:
        """See :meth:`MemoryStore.retrieve` (FTS5, OR over content words, ``bm25()`` order)."""
        _check_limit(limit)
        key = scope_key(scope)
        where, params = self._filters(types, min_confidence)
        words = analyser("corpus").content_words(query)[:_MAX_QUERY_TERMS]
        if not words:
            rows = self._read(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.scope_key = ?{where} ORDER BY m.pk LIMIT ?",
                (key, *params, limit),
            )
        else:
            match = " OR ".join(f'"{w}"' for w in words)
            rows = self._read(
                f"SELECT {_COLUMNS} FROM memories_fts f JOIN memories m ON m.pk = f.rowid"
                f" WHERE memories_fts MATCH ? AND m.scope_key = ?{where}"
                " ORDER BY bm25(memories_fts), m.pk LIMIT ?",
                (match, key, *params, limit),
            )
        return [_row_to_memory(r) for r in rows]

    def list(
        self,
        scope: Mapping[str, str],
        *,
        types: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[Memory]:
        """See :meth:`MemoryStore.list`."""
        _check_limit(limit, offset)
        key = scope_key(scope)
        where, params = self._filters(types, 0.0)
        rows = self._read(
            f"SELECT {_COLUMNS} FROM memories m WHERE m.scope_key = ?{where} ORDER BY m.pk LIMIT ? OFFSET ?",
            (key, *params, limit, offset),
        )
        return [_row_to_memory(r) for r in rows]

    def delete(self, scope: Mapping[str, str], memory_id: str) -> bool:
        """See :meth:`MemoryStore.delete`."""
        key = scope_key(scope)
        conn = self._conn()
        with self._write(conn):
            cur = conn.execute("DELETE FROM memories WHERE scope_key = ? AND id = ?", (key, memory_id))
        return cur.rowcount > 0

    def delete_all(self, scope: Mapping[str, str]) -> int:
        """See :meth:`MemoryStore.delete_all`."""
        key = scope_key(scope)
        conn = self._conn()
        with self._write(conn):
            cur = conn.execute("DELETE FROM memories WHERE scope_key = ?", (key,))
        return int(cur.rowcount)

    def purge_expired(self) -> int:
        """Delete expired memories in every scope; return how many were deleted."""
        conn = self._conn()
        with self._write(conn):
            cur = conn.execute("DELETE FROM memories WHERE expires_us IS NOT NULL AND expires_us <= ?", (_now_us(),))
        return int(cur.rowcount)


def _split(script: str) -> builtins.list[str]:
    """Split the schema into statements (triggers hold ``;`` inside ``BEGIN … END``)."""
    out: builtins.list[str] = []
    buf: builtins.list[str] = []
    for line in script.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        if text.endswith(";") and (not text.upper().startswith("CREATE TRIGGER") or text.upper().endswith("END;")):
            out.append(text)
            buf = []
    return out
