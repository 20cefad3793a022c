"""``PostgresFeedbackStore``: the feedback log in PostgreSQL, so every replica learns from every replica's traffic.

The same interface as the SQLite :class:`~shortlist.feedback._store.FeedbackStore`, chosen by URL:
``FeedbackStore("postgresql://…")`` opens this one. Two tables, ``shortlist_feedback_turns`` and
``shortlist_feedback_uses``, created under an advisory lock (several replicas may start at once) and
versioned in ``shortlist_feedback_migrations`` (the memory store's ``shortlist_schema_migrations`` is its
own, so both may share one database). A turn and its uses commit in one transaction; ``external_id``
is unique, so a turn recorded twice (by two replicas importing one file) is kept once. The examples a
replica serves are re-read when the log has grown (newest turn id), checked at most once per
``refresh_s``: a turn recorded on one replica reaches the others' rankers within that time. The
reading SQL is :class:`~shortlist.feedback._store.FeedbackStore`'s, built for these tables
(:data:`POSTGRES`); the connection comes from :class:`shortlist._pg.IdlePool`, so a server restart
costs the calls made while it is down (an :class:`~shortlist.errors.OperationalError` with
``retry_after``), not the store.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shortlist._records import load_queries
from shortlist._types import Query
from shortlist.errors import (
    CatalogError,
    MissingDependencyError,
    OperationalError,
    UsageError,
    first_line,
    unavailable,
)
from shortlist.feedback._store import Dialect, FeedbackStore, _ids

try:
    import psycopg
except ImportError as exc:  # the store names its extra instead of a traceback
    from shortlist._install import pip_install

    raise MissingDependencyError(f"the PostgreSQL feedback log needs psycopg: {pip_install('postgres')}") from exc

from shortlist._pg import IdlePool, migrate

__all__ = ["MIGRATIONS", "POSTGRES", "PostgresFeedbackStore"]

_LOCK_ID = 0x5EED_0002

#: Schema migrations of the feedback tables, applied in order; append, never edit a shipped one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE shortlist_feedback_turns (
        id BIGSERIAL PRIMARY KEY,
        ts DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL,
        query TEXT NOT NULL,
        selected JSONB NOT NULL,
        external_id TEXT UNIQUE
    );
    CREATE TABLE shortlist_feedback_uses (
        turn_id BIGINT NOT NULL REFERENCES shortlist_feedback_turns(id) ON DELETE CASCADE,
        candidate_id TEXT NOT NULL,
        pos INTEGER NOT NULL,
        PRIMARY KEY (turn_id, candidate_id)
    );
    CREATE INDEX shortlist_feedback_uses_by_candidate ON shortlist_feedback_uses (candidate_id, turn_id);
    """,
)


#: The reading SQL of :class:`FeedbackStore`, on these tables (a turn's uses in the order recorded).
POSTGRES = Dialect(turns="shortlist_feedback_turns", uses="shortlist_feedback_uses", param="%s", use_order="u.pos")


def _unavailable(exc: psycopg.OperationalError) -> OperationalError:
    return unavailable("feedback database", exc)


class PostgresFeedbackStore(FeedbackStore):
    """A feedback log in PostgreSQL, shared by replicas. Safe to share between threads.

    Args:
        path: a ``postgresql://`` URL (or any libpq connection string).
        refresh_s: how often, at most, the examples are checked for other replicas' new turns.

    Raises:
        OperationalError: the database cannot be reached (``retry_after`` is set).
        CatalogError: its tables cannot be created.
    """

    dialect = POSTGRES

    def __init__(self, path: str | Path = ":memory:", *, refresh_s: float = 1.0) -> None:
        self.path = str(path)
        self.refresh_s = float(refresh_s)
        self._lock = threading.RLock()
        self._writes = 0
        self._init_caches()
        self._checked = 0.0
        self._seen = 0
        # calls are serialised by the lock: one connection is used at a time, and kept for the next
        self._pool = IdlePool(self._connect, 1)
        try:
            self._migrate()
        except psycopg.Error as exc:
            self._pool.close()
            raise CatalogError(f"feedback database: cannot create its tables: {first_line(exc)}") from exc
        except BaseException:
            self._pool.close()
            raise

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.path, autocommit=True, prepare_threshold=None, connect_timeout=5)

    @contextmanager
    def _pg(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection (reopened after the server went away); unreachable is an OperationalError."""
        if self._pool.closed:
            raise CatalogError("this feedback store is closed")
        with self._pool.connection(_unavailable) as conn:
            yield conn

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._pg() as conn:
            return conn.execute(sql, tuple(params)).fetchall()

    def _shown_path(self) -> str:
        from shortlist.retrieval._backends.postgres import redact_url

        return redact_url(self.path)

    def _migrate(self) -> None:
        with self._lock, self._pg() as conn:
            migrate(conn, table="shortlist_feedback_migrations", lock_id=_LOCK_ID, migrations=MIGRATIONS)

    # -- writing ----------------------------------------------------------------------------

    def record(
        self,
        query: str | Query,
        selected: Sequence[str] = (),
        used: Sequence[str] = (),
        *,
        kind: str | None = None,
        ts: float | None = None,
        external_id: str | None = None,
    ) -> int:
        """See :meth:`FeedbackStore.record` (one transaction)."""
        text = query.text if isinstance(query, Query) else query
        if not isinstance(text, str) or not text.strip():
            raise UsageError("a feedback turn needs a non-empty query text")
        kind = kind or (query.kind if isinstance(query, Query) else "tool")
        sel, use = _ids(selected, "selected"), _ids(used, "used")
        with self._lock, self._pg() as conn, conn.transaction():
            row = conn.execute(
                "INSERT INTO shortlist_feedback_turns (ts, kind, query, selected, external_id)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (external_id) DO NOTHING RETURNING id",
                (time.time() if ts is None else float(ts), kind, text, json.dumps(list(sel)), external_id),
            ).fetchone()
            turn_id = int(row[0]) if row else 0
            if turn_id and use:
                conn.execute(
                    "INSERT INTO shortlist_feedback_uses (turn_id, candidate_id, pos) SELECT %s, u.id, u.pos"
                    " FROM unnest(%s::text[]) WITH ORDINALITY AS u(id, pos) ON CONFLICT DO NOTHING",
                    (turn_id, list(use)),
                )
            self._writes += 1
            return turn_id

    def import_jsonl(self, path: str | Path, *, kind: str = "tool") -> int:
        """See :meth:`FeedbackStore.import_jsonl` (one transaction; idempotent per ``qid`` across replicas)."""
        queries = load_queries(path)
        source = Path(path).name
        rows = [(q, f"{source}:{q.qid}") for q in queries if q.gold and q.text.strip()]
        added = 0
        with self._lock, self._pg() as conn, conn.transaction():
            now = time.time()
            for q, ext in rows:
                row = conn.execute(
                    "INSERT INTO shortlist_feedback_turns (ts, kind, query, selected, external_id)"
                    " VALUES (%s, %s, %s, '[]', %s) ON CONFLICT (external_id) DO NOTHING RETURNING id",
                    (now, kind, q.text, ext),
                ).fetchone()
                if row:
                    conn.execute(
                        "INSERT INTO shortlist_feedback_uses (turn_id, candidate_id, pos) SELECT %s, u.id, u.pos"
                        " FROM unnest(%s::text[]) WITH ORDINALITY AS u(id, pos) ON CONFLICT DO NOTHING",
                        (int(row[0]), list(dict.fromkeys(q.gold))),
                    )
                    added += 1
            self._writes += 1
        return added

    # -- reading ----------------------------------------------------------------------------

    def _version(self) -> tuple[int, int]:
        now = time.monotonic()
        if now - self._checked >= self.refresh_s or not self._checked:
            rows = self._rows(f"SELECT COALESCE(MAX(id), 0) FROM {POSTGRES.turns}")
            self._seen = int(rows[0][0]) if rows else 0
            self._checked = now
        return (self._seen, self._writes)

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            self._pool.close()
