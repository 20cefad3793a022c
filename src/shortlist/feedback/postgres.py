"""``PostgresFeedbackStore``: the feedback log in PostgreSQL, so every replica learns from every replica's traffic.

The same interface as the SQLite :class:`~shortlist.feedback.store.FeedbackStore`, chosen by URL:
``FeedbackStore("postgresql://…")`` opens this one. Two tables, ``shortlist_feedback_turns`` and
``shortlist_feedback_uses``, created under an advisory lock (several replicas may start at once) and
versioned in ``shortlist_feedback_migrations`` (the memory store's ``shortlist_schema_migrations`` is its
own, so both may share one database). A turn and its uses commit in one transaction; ``external_id``
is unique, so a turn recorded twice (by two replicas importing one file) is kept once. The examples a
replica serves are re-read when the log has grown (newest turn id), checked at most once per
``refresh_s``: a turn recorded on one replica reaches the others' rankers within that time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shortlist.errors import CatalogError, MissingDependencyError
from shortlist.feedback.store import FeedbackStore, _ids
from shortlist.types import Candidate, Query

try:
    import psycopg
except ImportError as exc:  # the store names its extra instead of a traceback
    raise MissingDependencyError(
        "the PostgreSQL feedback log needs psycopg: pip install 'shortlist[postgres]'"
    ) from exc

__all__ = ["MIGRATIONS", "PostgresFeedbackStore"]

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


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PostgresFeedbackStore(FeedbackStore):
    """A feedback log in PostgreSQL, shared by replicas. Safe to share between threads.

    Args:
        path: a ``postgresql://`` URL (or any libpq connection string).
        refresh_s: how often, at most, the examples are checked for other replicas' new turns.

    Raises:
        CatalogError: the database cannot be reached or its tables cannot be created.
    """

    def __init__(self, path: str | Path = ":memory:", *, refresh_s: float = 1.0) -> None:
        self.path = str(path)
        self.refresh_s = float(refresh_s)
        self._lock = threading.RLock()
        self._writes = 0
        self._cache_key: tuple[int, int] | None = None
        self._cache: dict[str | None, dict[str, list[str]]] = {}
        self._enriched: dict[tuple[str | None, int | None, str, str, str, tuple[str, ...]], Candidate] = {}
        self._checked = 0.0
        self._seen = 0
        try:
            self._conn = psycopg.connect(self.path, autocommit=True, prepare_threshold=None, connect_timeout=5)
        except psycopg.Error as exc:
            raise CatalogError(f"feedback database unavailable: {_first_line(exc)}") from exc
        try:
            self._migrate()
        except psycopg.Error as exc:
            self._conn.close()
            raise CatalogError(f"feedback database: cannot create its tables: {_first_line(exc)}") from exc

    def _migrate(self) -> None:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS shortlist_feedback_migrations"
                " (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            row = self._conn.execute("SELECT COALESCE(MAX(version), 0) FROM shortlist_feedback_migrations").fetchone()
            current = int(row[0]) if row else 0
            for version, sql in enumerate(MIGRATIONS[current:], start=current + 1):
                self._conn.execute(sql.encode())  # several statements: sent as one simple query
                self._conn.execute("INSERT INTO shortlist_feedback_migrations (version) VALUES (%s)", (version,))

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
            raise ValueError("a feedback turn needs a non-empty query text")
        kind = kind or (query.kind if isinstance(query, Query) else "tool")
        sel, use = _ids(selected, "selected"), _ids(used, "used")
        with self._lock, self._conn.transaction():
            row = self._conn.execute(
                "INSERT INTO shortlist_feedback_turns (ts, kind, query, selected, external_id)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (external_id) DO NOTHING RETURNING id",
                (time.time() if ts is None else float(ts), kind, text, json.dumps(list(sel)), external_id),
            ).fetchone()
            turn_id = int(row[0]) if row else 0
            if turn_id and use:
                self._conn.execute(
                    "INSERT INTO shortlist_feedback_uses (turn_id, candidate_id, pos) SELECT %s, u.id, u.pos"
                    " FROM unnest(%s::text[]) WITH ORDINALITY AS u(id, pos) ON CONFLICT DO NOTHING",
                    (turn_id, list(use)),
                )
            self._writes += 1
            return turn_id

    def import_jsonl(self, path: str | Path, *, kind: str = "tool") -> int:
        """See :meth:`FeedbackStore.import_jsonl` (one transaction; idempotent per ``qid`` across replicas)."""
        from shortlist.eval.datasets import load_queries

        queries = load_queries(path)
        source = Path(path).name
        rows = [(q, f"{source}:{q.qid}") for q in queries if q.gold and q.text.strip()]
        added = 0
        with self._lock, self._conn.transaction():
            now = time.time()
            for q, ext in rows:
                row = self._conn.execute(
                    "INSERT INTO shortlist_feedback_turns (ts, kind, query, selected, external_id)"
                    " VALUES (%s, %s, %s, '[]', %s) ON CONFLICT (external_id) DO NOTHING RETURNING id",
                    (now, kind, q.text, ext),
                ).fetchone()
                if row:
                    self._conn.execute(
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
        if now - self._checked >= self.refresh_s or self._cache_key is None:
            row = self._conn.execute("SELECT COALESCE(MAX(id), 0) FROM shortlist_feedback_turns").fetchone()
            self._seen = int(row[0]) if row else 0
            self._checked = now
        return (self._seen, self._writes)

    def _all_examples(self, kind: str | None) -> dict[str, list[str]]:
        key = self._version()
        if key != self._cache_key:
            self._cache.clear()
            self._enriched.clear()
            self._cache_key = key
        cached = self._cache.get(kind)
        if cached is None:
            sql = (
                "SELECT u.candidate_id, t.query FROM shortlist_feedback_uses u"
                " JOIN shortlist_feedback_turns t ON t.id = u.turn_id"
            )
            params: tuple[str, ...] = ()
            if kind is not None:
                sql += " WHERE t.kind = %s"
                params = (kind,)
            out: dict[str, dict[str, None]] = {}
            for cid, text in self._conn.execute(sql + " ORDER BY t.id", params):
                out.setdefault(cid, {})[text] = None
            cached = {cid: list(texts) for cid, texts in out.items()}
            self._cache[kind] = cached
        return cached

    def used_sets(self, *, kind: str | None = "tool", limit: int = 100_000) -> list[tuple[str, ...]]:
        """See :meth:`FeedbackStore.used_sets`."""
        where, params = ("WHERE t.kind = %s", [kind]) if kind is not None else ("", [])
        with self._lock:
            rows = self._conn.execute(
                "SELECT u.turn_id, u.candidate_id FROM shortlist_feedback_uses u"
                f" JOIN shortlist_feedback_turns t ON t.id = u.turn_id {where} ORDER BY u.turn_id DESC, u.pos",
                params,
            ).fetchall()
        sets: dict[int, list[str]] = {}
        for turn_id, candidate in rows:
            if turn_id not in sets and len(sets) >= limit:
                break
            sets.setdefault(int(turn_id), []).append(str(candidate))
        return [tuple(ids) for ids in sets.values()]

    def stats(self) -> dict[str, Any]:
        """See :meth:`FeedbackStore.stats` (``path`` is the URL without its password)."""
        from shortlist.retrieval.backends.postgres import redact_url

        with self._lock:
            row = self._conn.execute("SELECT COUNT(*), MIN(ts), MAX(ts) FROM shortlist_feedback_turns").fetchone()
            assert row is not None
            turns, first, last = row
            row = self._conn.execute(
                "SELECT COUNT(*), COUNT(DISTINCT candidate_id) FROM shortlist_feedback_uses"
            ).fetchone()
            assert row is not None
            uses, cands = row
            kinds: dict[str, int] = dict(
                self._conn.execute(
                    "SELECT kind, COUNT(*) FROM shortlist_feedback_turns GROUP BY kind ORDER BY kind"
                ).fetchall()
            )
            top = self._conn.execute(
                "SELECT candidate_id, COUNT(*) AS n FROM shortlist_feedback_uses GROUP BY candidate_id"
                " ORDER BY n DESC, candidate_id LIMIT 10"
            ).fetchall()
        return {
            "path": redact_url(self.path),
            "turns": int(turns),
            "uses": int(uses),
            "candidates": int(cands),
            "kinds": {str(k): int(v) for k, v in kinds.items()},
            "first_ts": first,
            "last_ts": last,
            "top": [{"id": cid, "uses": int(n)} for cid, n in top],
        }

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            self._conn.close()
