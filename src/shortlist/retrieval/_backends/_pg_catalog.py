"""The catalogue of PostgreSQL corpora: the ``shortlist_index_corpora`` table, each corpus's own
tables and their (non-graph) indexes, and listing or describing the corpora a database holds.

Used by :class:`shortlist.retrieval._backends.postgres.PostgresBackend`, which creates a corpus on
first open and bulk loads with its indexes dropped, then rebuilt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shortlist._text import Analyser
from shortlist.errors import REBUILD_INDEX_HINT, ConfigError, first_line, unavailable
from shortlist.retrieval._backends._embedded_files import analyser_problem as _analyser_problem
from shortlist.retrieval._backends._pg_graph import hnsw_ddl, hnsw_indexes, schema_version
from shortlist.retrieval._backends._pg_names import SCHEMA_VERSION, check_corpus_name, split_corpus_url

if TYPE_CHECKING:  # the backend module imports psycopg (or names its extra)
    import psycopg

__all__ = [
    "check_recorded",
    "create_indexes",
    "create_tables",
    "describe_corpus",
    "drop_corpus",
    "drop_indexes",
    "ensure_catalog",
    "list_corpora",
    "read_corpus",
    "register_corpus",
]

#: The catalogue: one row per corpus (what it was built with, its counts, its graph's layout).
_CORPORA = """
CREATE TABLE IF NOT EXISTS shortlist_index_corpora (
    corpus TEXT PRIMARY KEY,
    schema_version INTEGER NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    chunking JSONB NOT NULL,
    k1 DOUBLE PRECISION NOT NULL,
    b DOUBLE PRECISION NOT NULL,
    analyser JSONB NOT NULL,
    hnsw JSONB NOT NULL,
    chunks BIGINT NOT NULL DEFAULT 0,
    tokens BIGINT NOT NULL DEFAULT 0,
    next_row BIGINT NOT NULL DEFAULT 1,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


def create_tables(conn: psycopg.Connection[Any], tables: tuple[str, str, str], dim: int) -> None:
    """Create a corpus's (chunks, postings, terms) tables, vectors of ``dim`` dimensions, without indexes."""
    chunks_t, postings_t, terms_t = tables
    conn.execute(
        f"CREATE TABLE {chunks_t} ("
        " row BIGINT PRIMARY KEY, chunk_id TEXT NOT NULL, document_id TEXT NOT NULL, title TEXT NOT NULL,"
        " text TEXT NOT NULL, position INTEGER NOT NULL, count INTEGER NOT NULL, char_start INTEGER NOT NULL,"
        " char_end INTEGER NOT NULL, metadata JSONB NOT NULL, doc_hash TEXT NOT NULL, length INTEGER NOT NULL,"
        f" embedding vector({dim}) NOT NULL)"
    )
    conn.execute(
        f"CREATE TABLE {postings_t} (term BIGINT NOT NULL, row BIGINT NOT NULL, tf INTEGER NOT NULL,"
        " dl INTEGER NOT NULL, impact REAL NOT NULL)"
    )
    conn.execute(f"CREATE TABLE {terms_t} (term BIGINT PRIMARY KEY, df INTEGER NOT NULL)")


def create_indexes(
    conn: psycopg.Connection[Any], tables: tuple[str, str, str], dim: int, layout: Mapping[str, Any]
) -> None:
    """Create a corpus's indexes (those that exist are kept): by document, the graph, the postings'."""
    t, p, _ = tables
    conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_doc ON {t} (document_id)")
    for _, statement in hnsw_ddl(t, dim, layout):
        conn.execute(statement)
    conn.execute(f"CREATE INDEX IF NOT EXISTS {p}_term ON {p} (term, impact DESC) INCLUDE (row, tf, dl)")
    conn.execute(f"CREATE INDEX IF NOT EXISTS {p}_row ON {p} (row, term) INCLUDE (tf, dl)")


def drop_indexes(conn: psycopg.Connection[Any], tables: tuple[str, str, str]) -> None:
    """Drop a corpus's indexes, whatever layout built its graph (before a bulk load)."""
    t, p, _ = tables
    for name in (f"{t}_doc", *hnsw_indexes(conn, t), f"{p}_term", f"{p}_row"):
        conn.execute(f'DROP INDEX IF EXISTS "{name}"')


def list_corpora(dsn: str) -> list[str]:
    """The corpora a database holds (none when it holds no index)."""
    import psycopg

    url, _ = split_corpus_url(dsn)
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('shortlist_index_corpora')").fetchone() == (None,):
            return []
        return [r[0] for r in conn.execute("SELECT corpus FROM shortlist_index_corpora ORDER BY corpus")]


def describe_corpus(dsn: str, corpus: str) -> dict[str, Any] | None:
    """What the database records about ``corpus`` (embedder, dim, counts, ...), or None when it has none.

    Raises:
        ConfigError: a bad corpus name (checked first).
        OperationalError: the database cannot be reached (``retry_after`` is set).
    """
    import psycopg

    url, _ = split_corpus_url(dsn)
    check_corpus_name(corpus)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            if conn.execute("SELECT to_regclass('shortlist_index_corpora')").fetchone() == (None,):
                return None
            cur = conn.execute("SELECT * FROM shortlist_index_corpora WHERE corpus = %s", (corpus,))
            row = cur.fetchone()
            if row is None:
                return None
            names = [d.name for d in cur.description or ()]
            return dict(zip(names, row, strict=True))
    except psycopg.OperationalError as exc:
        raise unavailable("index database", exc) from exc


def ensure_catalog(conn: psycopg.Connection[Any]) -> None:
    """Create the pgvector extension (when it is missing and the role may) and the catalogue table.

    Raises:
        ConfigError: the server has no pgvector, or the role may not create the extension.
    """
    import psycopg

    has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if has is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise ConfigError(
                f"the index database has no pgvector extension ({first_line(exc)}); install pgvector "
                "on the server, or run CREATE EXTENSION vector as a superuser"
            ) from exc
    conn.execute(_CORPORA)


def read_corpus(conn: psycopg.Connection[Any], corpus: str) -> tuple[Any, ...] | None:
    """What the catalogue records of ``corpus`` (schema version, embedder, dim, chunking, k1, b,
    analyser, hnsw), or None when it has no row."""
    row = conn.execute(
        "SELECT schema_version, embedder, dim, chunking, k1, b, analyser, hnsw"
        " FROM shortlist_index_corpora WHERE corpus = %s",
        (corpus,),
    ).fetchone()
    return None if row is None else tuple(row)


def check_recorded(corpus: str, version: int, built_with: str, embedder: str, signature: Any, text: Analyser) -> None:
    """Check that this code can read ``corpus`` as recorded, with this embedder and text analyser.

    Raises:
        ConfigError: a newer schema version, another embedder, or another analyser.
    """
    where = f"corpus {corpus!r}"
    if not 1 <= int(version) <= SCHEMA_VERSION:
        raise ConfigError(
            f"{where} has schema version {version}, this version reads 1-{SCHEMA_VERSION}: {REBUILD_INDEX_HINT}"
        )
    if built_with != embedder:
        raise ConfigError(f"{where} was built with embedder {built_with!r}, opened with {embedder!r}")
    mismatch = _analyser_problem({"analyser": signature}, text)
    if mismatch:
        raise ConfigError(f"{where} {mismatch}")


def register_corpus(
    conn: psycopg.Connection[Any],
    corpus: str,
    tables: tuple[str, str, str],
    *,
    dim: int,
    layout: Mapping[str, Any],
    embedder: str,
    chunking: Mapping[str, Any],
    k1: float,
    b: float,
    analyser: Mapping[str, Any],
) -> None:
    """Create a new corpus: its tables, its indexes, and its row in the catalogue."""
    from psycopg.types.json import Jsonb

    create_tables(conn, tables, dim)
    create_indexes(conn, tables, dim, layout)
    conn.execute(
        "INSERT INTO shortlist_index_corpora (corpus, schema_version, embedder, dim, chunking, k1, b, analyser,"
        " hnsw) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            corpus,
            schema_version(layout),
            embedder,
            dim,
            Jsonb(dict(chunking)),
            k1,
            b,
            Jsonb(dict(analyser)),
            Jsonb(dict(layout)),
        ),
    )


def drop_corpus(conn: psycopg.Connection[Any], corpus: str, tables: tuple[str, str, str]) -> None:
    """Drop a corpus's tables and its row in the catalogue (the caller holds its lock)."""
    for t in tables:
        conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute("DELETE FROM shortlist_index_corpora WHERE corpus = %s", (corpus,))
