"""``IdlePool``: the idle PostgreSQL connections one store keeps, and what happens when one breaks; ``migrate``.

Shared by the PostgreSQL stores (the corpus index, the memory store, the feedback log): a LIFO queue
of at most ``size`` idle autocommit connections, opened on demand by the store's ``connect``. A
connection goes back to the queue after use, unless it was left inside a transaction (an error in the
middle of one) or the pool is closed. A connection that breaks (the server went away) takes every
idle connection with it, since they are as dead as it is, and the error becomes the store's own
"unavailable" error; errors the store names in ``refused`` keep the connection (it is still good).
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from shortlist.errors import MissingDependencyError

try:
    import psycopg
except ImportError as exc:  # the stores name their extra; this says the same
    from shortlist._install import pip_install

    raise MissingDependencyError(f"PostgreSQL needs psycopg: {pip_install('postgres')}") from exc

__all__ = ["IdlePool", "migrate"]

Connection = psycopg.Connection[Any]


def migrate(conn: Connection, *, table: str, lock_id: int, migrations: Sequence[str]) -> int:
    """Apply the ``migrations`` not applied yet, in one transaction under an advisory lock; return how many.

    Several replicas may start at once: the lock makes one of them apply the migrations and the
    others find them applied. The versions applied are recorded in ``table`` (created when missing),
    one table per store, so stores sharing a database migrate independently. Migrations are append
    only: never edit one that has shipped.

    Args:
        conn: an autocommit connection (the transaction is opened here).
        table: the store's migrations table.
        lock_id: the store's advisory lock.
        migrations: SQL scripts (several statements each), applied in order.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id,))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {table}").fetchone()
        current = int(row[0]) if row else 0
        for version, sql in enumerate(migrations[current:], start=current + 1):
            conn.execute(sql.encode())  # several statements: sent as one simple query
            conn.execute(f"INSERT INTO {table} (version) VALUES (%s)", (version,))
        return max(0, len(migrations) - current)


class IdlePool:
    """At most ``size`` idle connections from ``connect``, handed out one at a time. Thread-safe.

    Args:
        connect: opens a new connection (its ``psycopg.OperationalError`` is reported as unavailable).
        size: the most idle connections kept open.
    """

    def __init__(self, connect: Callable[[], Connection], size: int) -> None:
        self._connect = connect
        self.size = max(1, int(size))
        self._idle: queue.LifoQueue[Connection] = queue.LifoQueue(maxsize=self.size)
        self.closed = False

    @contextmanager
    def connection(
        self,
        unavailable: Callable[[psycopg.OperationalError], BaseException],
        refused: Callable[[psycopg.Error], BaseException | None] | None = None,
    ) -> Iterator[Connection]:
        """An idle (or new) connection for the ``with`` block, returned to the pool afterwards.

        Args:
            unavailable: the error raised instead of a ``psycopg.OperationalError`` (the connection is
                closed, and every idle one too when it is broken).
            refused: maps an error that leaves the connection usable (a full disk, a refused value) to
                the error to raise instead, or to None for the default handling.
        """
        try:
            conn: Connection | None = self._idle.get_nowait()
        except queue.Empty:
            conn = None
        try:
            if conn is None or conn.closed:
                conn = self._connect()
            yield conn
        except BaseException as exc:
            mapped = refused(exc) if refused is not None and isinstance(exc, psycopg.Error) else None
            if mapped is not None:
                self.release(conn)
                raise mapped from exc
            if isinstance(exc, psycopg.OperationalError):
                if conn is not None:
                    if conn.broken:  # the server went away: the idle connections are as dead as this one
                        self.discard_idle()
                    conn.close()
                raise unavailable(exc) from exc
            if conn is not None and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.close()
            self.release(conn)
            raise
        self.release(conn)

    def release(self, conn: Connection | None) -> None:
        """Keep ``conn`` for the next caller (closed instead when the pool is full or closed)."""
        if conn is None or conn.closed:
            return
        if self.closed:
            conn.close()
            return
        try:
            self._idle.put_nowait(conn)
        except queue.Full:
            conn.close()

    def discard_idle(self) -> None:
        """Close every idle connection."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def close(self) -> None:
        """Close every idle connection; connections in use are closed when released."""
        self.closed = True
        self.discard_idle()
