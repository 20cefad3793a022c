"""``PostgresMemoryStore``: the memory store that replicas share, on PostgreSQL with psycopg 3.

Migrations run at start-up under an advisory lock, so several workers or replicas may start at
once; applied versions are recorded in ``shortlist_schema_migrations``. Every operation is **one
statement in autocommit mode**: one round trip to the server, and a write is durable (committed
with the server's ``synchronous_commit``) when it returns. A save is a single
``INSERT … ON CONFLICT (scope_key, id) DO UPDATE`` that keeps ``created_at`` and takes a new
``pk``, so a replaced memory moves to the end, as in the other stores, and concurrent saves of one
id serialise on the row (no explicit lock, no delete + insert). Recall uses PostgreSQL full-text
search (``english`` configuration: stemming, stopwords) with the query's content words joined by
OR, ranked by ``ts_rank`` then insertion order. Expiry is enforced in every read.

**Recall by meaning** (pgvector): given an ``embedder`` (or ``?embedder=NAME`` in the URL: ``default``
for the offline MiniLM, ``hashing``), the store adds an ``embedding vector`` column and an
``embedding_model`` column (``CREATE EXTENSION vector`` on first use), each save stores the content's
vector in the same single upsert statement, and recall returns the full-text matches first (by
``ts_rank``, ties by similarity), then the scope's memories that share no word with the query but
whose cosine similarity is at least ``min_similarity``, most similar first, so "what does the user
drink" finds "likes green tea". Meaning extends recall and never demotes a memory that shares words
with the query (the store contract's OR semantics and ranking hold). Similarities are computed
exactly inside the scope (``WHERE scope_key = …``: a scope holds few memories, and nothing crosses
scopes). A store without an embedder on such a database writes NULL vectors (a replaced
memory never keeps a stale one) and recalls by words only. Without pgvector nothing changes.

Connections come from a small built-in pool; a broken connection is discarded together with the
idle ones (after a database restart they are all dead), so the store recovers by itself. While
the database is unreachable every operation raises :class:`MemoryStoreUnavailable` (HTTP 503 in
the service).
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from shortlist._pg import IdlePool
from shortlist.embeddings._base import Embedder
from shortlist.errors import (
    ConfigError,
    MemoryStoreFull,
    MemoryStoreUnavailable,
    MemoryValueError,
    MissingDependencyError,
    first_line,
)

try:
    import psycopg
    from psycopg.types.json import Jsonb
except ImportError as exc:  # the backend names its extra instead of a traceback (shortlist serve, the CLI)
    from shortlist._install import pip_install

    raise MissingDependencyError(f"the PostgreSQL memory store needs psycopg: {pip_install('postgres')}") from exc

from shortlist._text import analyser
from shortlist.memory._record import Memory, scope_key
from shortlist.memory._store import MemoryStore, _check_limit, stamp

__all__ = ["MIGRATIONS", "MemoryStoreUnavailable", "PostgresMemoryStore"]

_MAX_QUERY_TERMS = 64
_LOCK_ID = 0x5EED_0001

#: Schema migrations, applied in order; never edit one that has shipped, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE shortlist_memories (
        pk BIGSERIAL PRIMARY KEY,
        scope_key TEXT NOT NULL,
        id TEXT NOT NULL,
        type TEXT NOT NULL,
        content TEXT NOT NULL,
        metadata JSONB NOT NULL,
        confidence DOUBLE PRECISION NOT NULL,
        scope JSONB NOT NULL,
        session_id TEXT NOT NULL,
        turn_start INTEGER NOT NULL,
        turn_end INTEGER NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        accessed_at TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ,
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
        UNIQUE (scope_key, id)
    );
    CREATE INDEX shortlist_memories_scope ON shortlist_memories (scope_key, pk);
    CREATE INDEX shortlist_memories_tsv ON shortlist_memories USING GIN (tsv);
    """,
)

_COLUMNS = (
    "id, type, content, metadata, confidence, scope, session_id, turn_start, turn_end,"
    " created_at, accessed_at, expires_at"
)

# Insert, or replace the memory with the same (scope_key, id): the replaced row takes a fresh pk
# (it moves to the end of the scope's insertion order) and keeps the created_at of its first save.
# ON CONFLICT waits for a concurrent save of the same id to commit, then updates its row.
_UPSERT = (
    "INSERT INTO shortlist_memories (scope_key, id, type, content, metadata, confidence, scope,"
    " session_id, turn_start, turn_end, created_at, accessed_at, expires_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (scope_key, id) DO UPDATE SET pk = DEFAULT, type = EXCLUDED.type,"
    " content = EXCLUDED.content, metadata = EXCLUDED.metadata, confidence = EXCLUDED.confidence,"
    " scope = EXCLUDED.scope, session_id = EXCLUDED.session_id, turn_start = EXCLUDED.turn_start,"
    " turn_end = EXCLUDED.turn_end, accessed_at = EXCLUDED.accessed_at, expires_at = EXCLUDED.expires_at"
    " RETURNING created_at"
)


_UPSERT_VECTOR = (
    _UPSERT.replace(", expires_at)", ", expires_at, embedding, embedding_model)", 1)
    .replace("%s, %s)", "%s, %s, %s::vector, %s)", 1)
    .replace(
        " expires_at = EXCLUDED.expires_at",
        " expires_at = EXCLUDED.expires_at, embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model",
        1,
    )
)


def _split_embedder(dsn: str) -> tuple[str, str | None]:
    """Take an ``embedder=NAME`` parameter out of a URL (libpq refuses parameters it does not know)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if "embedder=" not in dsn or "://" not in dsn:
        return dsn, None
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    name = next((v for k, v in query if k == "embedder"), None)
    rest = urlencode([(k, v) for k, v in query if k != "embedder"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), name


def _literal(vector: Any) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _params(key: str, m: Memory) -> tuple[Any, ...]:
    return (
        key,
        m.id,
        m.type,
        m.content,
        Jsonb(dict(m.metadata)),
        m.confidence,
        Jsonb(dict(m.scope)),
        m.session_id,
        m.turn_range[0],
        m.turn_range[1],
        m.created_at,
        m.accessed_at,
        m.expires_at,
    )


def _row_to_memory(row: Sequence[Any]) -> Memory:
    return Memory(
        id=row[0],
        type=row[1],
        content=row[2],
        metadata=row[3],
        confidence=row[4],
        scope=row[5],
        session_id=row[6],
        turn_range=(row[7], row[8]),
        created_at=row[9],
        accessed_at=row[10],
        expires_at=row[11],
    )


_NUL_MESSAGE = "PostgreSQL cannot store or match NUL characters (\\x00)"


def _refuse_nul(what: str, *texts: str | None) -> None:
    """Refuse a NUL in a text that names stored memories (an id, a scope, a type): PostgreSQL has none.

    Raises:
        MemoryValueError: a text holds ``\\x00`` (HTTP 422).
    """
    if any(t and "\x00" in t for t in texts):
        raise MemoryValueError(f"{_NUL_MESSAGE}: found one in {what}")


def _refuse_nul_scope(scope: Mapping[str, str]) -> None:
    _refuse_nul("the scope", *scope.keys(), *scope.values())


def _has_nul(memory: Memory) -> bool:
    texts = [memory.id, memory.type, memory.content, memory.session_id, scope_key(memory.scope)]
    texts.append(json.dumps(dict(memory.metadata), default=str))
    return any("\x00" in t or "\\u0000" in t for t in texts)


def _unavailable(exc: psycopg.OperationalError) -> MemoryStoreUnavailable:
    return MemoryStoreUnavailable(f"memory database unavailable: {first_line(exc)}")


def _refused(exc: psycopg.Error) -> Exception | None:
    """The errors that leave the connection usable: a full disk (retrying will not help) and a refused value."""
    if isinstance(exc, psycopg.errors.DiskFull):  # an OperationalError, but the connection is fine
        return MemoryStoreFull(f"memory database is out of disk space: {first_line(exc)}")
    if isinstance(exc, psycopg.DataError):  # a value PostgreSQL refuses (class 22)
        return MemoryValueError(f"the memory database refused a value: {first_line(exc)}")
    return None


class PostgresMemoryStore(MemoryStore):
    """A memory store in PostgreSQL, shared by every worker and replica.

    Args:
        dsn: a libpq connection string or URL (``postgresql://user@host:port/db``); an ``embedder=NAME``
            URL parameter (``default``, ``hashing``) sets ``embedder``.
        pool_size: the most idle connections kept open.
        connect_timeout: seconds to wait for a connection.
        embedder: embeds memories and queries for recall by meaning (needs pgvector on the server).
        min_similarity: the least cosine similarity a memory needs to be recalled by meaning alone.

    Raises:
        MemoryStoreUnavailable: the database cannot be reached to run the migrations.
        ConfigError: an embedder is given and the server has no pgvector.
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 16,
        connect_timeout: float = 5.0,
        embedder: Embedder | None = None,
        min_similarity: float = 0.35,
    ) -> None:
        dsn, name = _split_embedder(dsn)
        if embedder is None and name:
            from shortlist.retrieval._backends.opening import embedder_by_name

            embedder = embedder_by_name(name)
        self.dsn = dsn
        self.embedder = embedder
        self.min_similarity = float(min_similarity)
        self._vectors = False  # whether the table has the embedding columns
        self._connect_timeout = connect_timeout
        self._idle = IdlePool(self._connect, pool_size)
        self._lock = threading.Lock()
        try:
            self.migrate()
        except BaseException:
            self.close()
            raise

    # -- connections ---------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        # prepare_threshold=None: no server-side prepared statements, so every query is planned
        # for its own scope. A prepared statement switches to a generic plan after five runs, and
        # for "this scope, ORDER BY pk LIMIT n" that plan can walk the whole table in pk order
        # (30 ms for a one-row scope among 200,000 rows). It also keeps the store usable behind
        # a transaction-pooling PgBouncer.
        return psycopg.connect(
            self.dsn, connect_timeout=max(1, int(self._connect_timeout)), autocommit=True, prepare_threshold=None
        )

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection; connection failures become MemoryStoreUnavailable.

        Each statement run on it is its own transaction (one round trip); use
        ``conn.transaction()`` for several statements that must commit together.
        """
        if self._idle.closed:
            raise MemoryStoreUnavailable("this PostgresMemoryStore is closed")
        with self._idle.connection(_unavailable, _refused) as conn:
            yield conn

    def migrate(self) -> int:
        """Apply the migrations not applied yet; return how many were applied.

        Raises:
            MemoryStoreUnavailable: the database cannot be reached.
        """
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS shortlist_schema_migrations"
                " (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM shortlist_schema_migrations").fetchone()
            current = int(row[0]) if row else 0
            for version, sql in enumerate(MIGRATIONS[current:], start=current + 1):
                conn.execute(sql.encode())  # several statements: sent as one simple query
                conn.execute("INSERT INTO shortlist_schema_migrations (version) VALUES (%s)", (version,))
            if self.embedder is not None:
                try:
                    with conn.transaction():
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except psycopg.Error as exc:
                    raise ConfigError(
                        f"recall by meaning needs pgvector on the memory database ({first_line(exc)})"
                    ) from exc
                conn.execute("ALTER TABLE shortlist_memories ADD COLUMN IF NOT EXISTS embedding vector")
                conn.execute("ALTER TABLE shortlist_memories ADD COLUMN IF NOT EXISTS embedding_model TEXT")
            found = conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_name = 'shortlist_memories'"
                " AND column_name = 'embedding'"
            ).fetchone()
            self._vectors = found is not None
            return len(MIGRATIONS) - current

    def close(self) -> None:
        """Close every idle connection; later operations raise."""
        self._idle.close()

    # -- contract ------------------------------------------------------------------------------

    def save(self, memory: Memory) -> Memory:
        """See :meth:`MemoryStore.save` (one upsert statement: one round trip, one commit)."""
        key = scope_key(memory.scope)
        if _has_nul(memory):
            raise MemoryValueError(f"{_NUL_MESSAGE}: found one in the memory (id, type, content, scope or metadata)")
        now = datetime.now(UTC)
        stored = stamp(memory, None, now)
        if self._vectors:  # one statement still: the vector (or NULL) is written with the row
            vector, model = None, None
            if self.embedder is not None:
                vector, model = _literal(self.embedder.embed([memory.content])[0]), self.embedder.model_name
            sql, params = _UPSERT_VECTOR, (*_params(key, stored), vector, model)
        else:
            sql, params = _UPSERT, _params(key, stored)
        with self._conn() as conn:
            row = conn.execute(sql, params).fetchone()
        if row is not None and row[0] != stored.created_at:  # replaced: the first save's created_at stays
            stored = stamp(memory, Memory("x", "", created_at=row[0]), now)
        return stored

    @staticmethod
    def _filters(types: Sequence[str] | None, min_confidence: float) -> tuple[str, builtins.list[Any]]:
        sql = " AND (expires_at IS NULL OR expires_at > now())"
        params: builtins.list[Any] = []
        if types:
            sql += " AND type = ANY(%s)"
            params.append(builtins.list(types))
        if min_confidence > 0:
            sql += " AND confidence >= %s"
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
        """See :meth:`MemoryStore.retrieve` (full-text search, OR over content words, ``ts_rank`` order)."""
        _check_limit(limit)
        key = scope_key(scope)
        _refuse_nul_scope(scope)
        _refuse_nul("types", *(types or ()))
        where, params = self._filters(types, min_confidence)
        words = analyser("corpus").content_words(query)[:_MAX_QUERY_TERMS]
        with self._conn() as conn:
            if not words:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM shortlist_memories WHERE scope_key = %s{where} ORDER BY pk LIMIT %s",
                    (key, *params, limit),
                ).fetchall()
            elif self.embedder is not None and self._vectors:
                vector = _literal(self.embedder.embed([query])[0])
                rows = conn.execute(
                    "WITH q AS (SELECT websearch_to_tsquery('english', %s) AS tsq)"
                    f" SELECT {_COLUMNS} FROM (SELECT *, tsv @@ q.tsq AS hit, ts_rank(tsv, q.tsq) AS rank,"
                    " CASE WHEN embedding_model = %s THEN 1 - (embedding <=> %s::vector) END AS sim"
                    f" FROM shortlist_memories, q WHERE scope_key = %s{where}) m"
                    " WHERE hit OR sim >= %s ORDER BY hit DESC, rank DESC, sim DESC NULLS LAST, pk LIMIT %s",
                    (" or ".join(words), self.embedder.model_name, vector, key, *params, self.min_similarity, limit),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"WITH q AS (SELECT websearch_to_tsquery('english', %s) AS tsq)"
                    f" SELECT {_COLUMNS} FROM shortlist_memories, q"
                    f" WHERE scope_key = %s AND tsv @@ q.tsq{where}"
                    " ORDER BY ts_rank(tsv, q.tsq) DESC, pk LIMIT %s",
                    (" or ".join(words), key, *params, limit),
                ).fetchall()
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
        _refuse_nul_scope(scope)
        _refuse_nul("types", *(types or ()))
        where, params = self._filters(types, 0.0)
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM shortlist_memories WHERE scope_key = %s{where} ORDER BY pk LIMIT %s OFFSET %s",
                (key, *params, limit, offset),
            ).fetchall()
        return [_row_to_memory(r) for r in rows]

    def delete(self, scope: Mapping[str, str], memory_id: str) -> bool:
        """See :meth:`MemoryStore.delete`."""
        key = scope_key(scope)
        _refuse_nul_scope(scope)
        _refuse_nul("the id", memory_id)
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM shortlist_memories WHERE scope_key = %s AND id = %s", (key, memory_id))
            return cur.rowcount > 0

    def delete_all(self, scope: Mapping[str, str]) -> int:
        """See :meth:`MemoryStore.delete_all`."""
        key = scope_key(scope)
        _refuse_nul_scope(scope)
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM shortlist_memories WHERE scope_key = %s", (key,))
            return int(cur.rowcount)

    def purge_expired(self) -> int:
        """Delete expired memories in every scope; return how many were deleted."""
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM shortlist_memories WHERE expires_at IS NOT NULL AND expires_at <= now()")
            return int(cur.rowcount)
