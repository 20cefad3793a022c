"""``PostgresVectorStore``: the vector cache in PostgreSQL: a deployment embeds its catalog once, not per replica.

Chosen by a ``postgresql://`` URL wherever the cache location is configured (``SHORTLIST_CACHE_DIR``,
``spec.cache.dir``, a provider's ``vector_cache``, ``VectorStore(url)``): the first replica embeds the
catalog and stores the vectors; the next ones read them back and are ready in seconds. Keyed exactly
like the SQLite :class:`~shortlist.embeddings._cache.VectorStore` (model identity, sha256 of the
text), with the same checks (:func:`~shortlist.embeddings._cache.check_rows`: a stored row that is not
``dim`` finite float32s, or whose digest is not its model's, text's and vector's, is deleted with an
``embeddings.cache_row_dropped`` event and replaced by the recomputed vector) and the same bound
(``max_mb`` of vector bytes, least recently used evicted first).

One table, ``shortlist_vectors``, created under an advisory lock by :func:`shortlist._pg.migrate`
(several replicas may start at once) and versioned in ``shortlist_vector_migrations``. Reads and
writes are one statement per chunk of keys (arrays, not one round trip per vector); concurrent
writers of the same vectors converge (``ON CONFLICT DO UPDATE``, keys in one order, so two replicas
embedding the same catalog never deadlock). The connections come from :class:`shortlist._pg.IdlePool`.
A database that goes away makes the store a miss for ``retry_s`` (vectors are computed, never wrong),
with one ``embeddings.cache_unavailable`` event, then it is tried again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from shortlist._events import emit
from shortlist.embeddings._cache import (
    _TOUCH_AFTER_US,
    DEFAULT_MAX_MB,
    CacheUnavailable,
    VectorStore,
)
from shortlist.embeddings._cache_rows import CacheInfo, check_rows, report_dropped, row_digest
from shortlist.embeddings._cache_rows import encoded as _encoded
from shortlist.errors import EmbeddingError, MissingDependencyError, first_line

try:
    import psycopg
except ImportError as exc:  # the store names its extra instead of a traceback
    from shortlist._install import pip_install

    raise MissingDependencyError(f"a PostgreSQL vector cache needs psycopg: {pip_install('postgres')}") from exc

from shortlist._pg import IdlePool, migrate

__all__ = ["MIGRATIONS", "PostgresVectorStore"]

_LOCK_ID = 0x5EED_0003
_CHUNK = 2000  # keys per statement: one round trip each

#: Schema migrations of the vector table, applied in order; append, never edit a shipped one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE shortlist_vectors (
        model TEXT NOT NULL,
        key BYTEA NOT NULL,
        dim INTEGER NOT NULL,
        vec BYTEA NOT NULL,
        used BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (model, key)
    );
    CREATE INDEX shortlist_vectors_used ON shortlist_vectors (used);
    """,
    # the digest of (model, key, vector) checked on read; rows written before it are recomputed once
    "ALTER TABLE shortlist_vectors ADD COLUMN digest BYTEA;",
)

logger = logging.getLogger("shortlist.embeddings")


class _Unavailable(Exception):
    """The database could not be reached (an ``OperationalError``)."""


def _unavailable(exc: psycopg.OperationalError) -> _Unavailable:
    return _Unavailable(first_line(exc))


class PostgresVectorStore(VectorStore):
    """Vectors in one PostgreSQL table keyed by ``(model identity, sha256(text))``, shared by replicas.

    The interface of :class:`~shortlist.embeddings._cache.VectorStore` (``get``, ``put``, ``info``,
    ``clear``, ``close``). Safe for threads.

    Args:
        path: a ``postgresql://`` URL (or any libpq connection string).
        max_mb: evict the least recently used vectors above this many MB of vector data.
        pool_size: the most idle connections kept open.
        retry_s: after the database went away, how long the store answers "miss" before trying again.

    Raises:
        EmbeddingError: the database cannot be reached or its table cannot be created.
    """

    def __init__(self, path: str, *, max_mb: int = DEFAULT_MAX_MB, pool_size: int = 2, retry_s: float = 30.0) -> None:
        from shortlist.retrieval._backends.postgres import redact_url

        self.url = str(path)
        self.path = redact_url(self.url)
        self.max_bytes = int(max_mb) * 1024 * 1024
        self.retry_s = float(retry_s)
        self._down_until = 0.0
        self._pool = IdlePool(self._connect, pool_size)
        try:
            with self._pool.connection(_unavailable) as conn:
                migrate(conn, table="shortlist_vector_migrations", lock_id=_LOCK_ID, migrations=MIGRATIONS)
        except (_Unavailable, psycopg.Error) as exc:
            self._pool.close()
            raise EmbeddingError(
                f"vector cache {self.path}: {exc if isinstance(exc, _Unavailable) else first_line(exc)}"
            ) from exc

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, autocommit=True, prepare_threshold=None, connect_timeout=5)

    @contextmanager
    def _pg(self) -> Iterator[psycopg.Connection[Any] | None]:
        """A connection, or None while the database is marked down (the caller treats it as a miss)."""
        if self._pool.closed or time.monotonic() < self._down_until:
            yield None
            return
        try:
            with self._pool.connection(_unavailable) as conn:
                yield conn
        except (_Unavailable, psycopg.Error) as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        # a later call tries again: a restarted database serves its vectors again
        self._down_until = time.monotonic() + self.retry_s
        emit(CacheUnavailable(path=str(self.path), error=first_line(exc)))

    def get(self, model: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray[Any, np.dtype[np.float32]]]:
        """The stored vectors of ``keys`` (missing, malformed or unreachable: absent); refreshes their last use
        now and then. A row that fails :func:`~shortlist.embeddings._cache.check_rows` is deleted, with an
        ``embeddings.cache_row_dropped`` event."""
        found: dict[bytes, np.ndarray[Any, np.dtype[np.float32]]] = {}
        if not keys:
            return found
        now = time.time_ns() // 1000
        unique = list(dict.fromkeys(keys))
        stale: list[bytes] = []
        bad: list[tuple[bytes, str]] = []
        with self._pg() as conn:
            if conn is None:
                return found
            for start in range(0, len(unique), _CHUNK):
                rows = conn.execute(
                    "SELECT key, dim, vec, used, digest FROM shortlist_vectors WHERE model = %s AND key = ANY(%s)",
                    (model, unique[start : start + _CHUNK]),
                ).fetchall()
                good, rejected = check_rows(model, [(bytes(k), dim, blob, digest) for k, dim, blob, _, digest in rows])
                found.update(good)
                bad += rejected
                stale += [bytes(k) for k, _, _, used, _ in rows if bytes(k) in good and used < now - _TOUCH_AFTER_US]
            for start in range(0, len(stale), _CHUNK):
                conn.execute(
                    "UPDATE shortlist_vectors SET used = %s WHERE model = %s AND key = ANY(%s)",
                    (now, model, stale[start : start + _CHUNK]),
                )
            dropped = [k for k, _ in bad]
            for start in range(0, len(dropped), _CHUNK):
                conn.execute(
                    "DELETE FROM shortlist_vectors WHERE model = %s AND key = ANY(%s)",
                    (model, dropped[start : start + _CHUNK]),
                )
        if bad:
            report_dropped(str(self.path), model, [reason for _, reason in bad])
        return found

    def put(self, model: str, items: Sequence[tuple[bytes, np.ndarray[Any, Any]]]) -> None:
        """Store vectors (a statement per chunk, in key order), then evict the least recently used above the bound."""
        if not items:
            return
        now = time.time_ns() // 1000
        rows = _encoded(items)
        with self._pg() as conn:
            if conn is None:
                return
            for start in range(0, len(rows), _CHUNK):
                chunk = rows[start : start + _CHUNK]
                conn.execute(
                    "INSERT INTO shortlist_vectors (model, key, dim, vec, used, digest)"
                    " SELECT %s, k, d, v, %s, g"
                    " FROM unnest(%s::bytea[], %s::integer[], %s::bytea[], %s::bytea[]) AS t(k, d, v, g)"
                    " ON CONFLICT (model, key) DO UPDATE"
                    " SET dim = EXCLUDED.dim, vec = EXCLUDED.vec, used = EXCLUDED.used, digest = EXCLUDED.digest",
                    (
                        model,
                        now,
                        [k for k, _, _ in chunk],
                        [int(v.shape[0]) for _, v, _ in chunk],
                        [b for _, _, b in chunk],
                        [row_digest(model, k, b) for k, _, b in chunk],
                    ),
                )
            self._pg_evict(conn)

    def _pg_bytes(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        row = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(octet_length(vec) + octet_length(key)), 0) FROM shortlist_vectors"
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _pg_evict(self, conn: psycopg.Connection[Any]) -> None:
        count, used = self._pg_bytes(conn)
        if used <= self.max_bytes or not count:
            return
        target = int(self.max_bytes * 0.9)  # evict a tenth more than needed: not at every insert
        drop = min(count, max(1, int(count * (used - target) / used) + 1))
        conn.execute(
            "DELETE FROM shortlist_vectors WHERE (model, key) IN"
            " (SELECT model, key FROM shortlist_vectors ORDER BY used LIMIT %s)",
            (drop,),
        )
        logger.debug("vector cache %s: evicted %d of %d vectors (%d bytes used)", self.path, drop, count, used)

    def info(self) -> CacheInfo:
        """How many vectors of which models, and the bytes of vector data they use.

        Raises:
            EmbeddingError: the database cannot be reached.
        """
        with self._strict() as conn:
            models = {
                str(m): int(n)
                for m, n in conn.execute("SELECT model, COUNT(*) FROM shortlist_vectors GROUP BY model ORDER BY model")
            }
            return CacheInfo(
                path=str(self.path),
                exists=True,
                vectors=sum(models.values()),
                bytes=self._pg_bytes(conn)[1],
                max_bytes=self.max_bytes,
                models=models,
            )

    def clear(self, model: str | None = None) -> int:
        """Delete every vector (or one model's); return how many were deleted.

        Raises:
            EmbeddingError: the database cannot be reached.
        """
        with self._strict() as conn:
            if model is None:
                cur = conn.execute("DELETE FROM shortlist_vectors")
            else:
                cur = conn.execute("DELETE FROM shortlist_vectors WHERE model = %s", (model,))
            return int(cur.rowcount)

    @contextmanager
    def _strict(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for an explicit command (``shortlist cache``): unreachable is an error, not a miss."""
        if self._pool.closed:
            raise EmbeddingError(f"vector cache {self.path}: closed")
        try:
            with self._pool.connection(_unavailable) as conn:
                yield conn
        except (_Unavailable, psycopg.Error) as exc:
            raise EmbeddingError(f"vector cache {self.path}: {first_line(exc)}") from exc

    def close(self) -> None:
        """Close the pooled connections. Idempotent."""
        self._pool.close()
