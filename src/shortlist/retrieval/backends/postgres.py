"""``PostgresBackend``: the corpus index in PostgreSQL with pgvector, shared by every replica.

One database holds many corpora. Each corpus has a row in ``shortlist_index_corpora`` (schema
version, embedder, dimension, chunking, BM25 parameters, the text analyser's signature, counts)
and three tables of its own, ``shortlist_ix_<corpus>_{chunks,postings,terms}``:

* ``chunks``: one row per passage (its fields, its document's content hash, and its L2-normalised
  vector in a ``vector(dim)`` column with an HNSW index on inner product, over the vectors cast to
  ``halfvec`` by default: half the graph's memory and I/O, while exact search and the similarities
  returned stay float32; corpora built before it index float32, as their ``hnsw`` record says);
* ``postings``: BM25 in tables: one row per (term, chunk) with the term frequency, the chunk's
  length and its *impact* (the BM25 term weight ``tf / (tf + k1 (1 - b + b dl / avgdl))`` when it
  was written), indexed by ``(term, impact DESC)`` so a term's best postings are read first;
* ``terms``: each term's document frequency.

Terms are the ``corpus`` analyser's (:mod:`shortlist.text`), hashed to 63-bit integers. A query
takes, for each query term, its ``per_term`` best postings (default 1,000; all of a rare term's),
scores those candidates, and rescores the best ``rescore`` (default 200) exactly, with every query
term's posting of each, by Lucene's BM25 (``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, the
current ``N`` and ``avgdl``): exactly bm25s' ranking whenever no query term has more postings than
``per_term``; above it the candidates are an approximation (measured against exact BM25 in
docs/postgres.md). Both legs return their best ``PREFETCH`` rows and are fused by RRF in Python,
with the embedded backend's tie rules, so rankings agree; with both legs, the dense one runs on a
second pooled connection while the lexical one runs (each is one statement returning its passages).
``dense_search="exact"`` orders by the exact inner product (a sequential scan, no index); ``"hnsw"``
(default) walks the HNSW index with ``hnsw.ef_search`` (iterative scans when filters apply).

The graph can be split into ``hnsw_shards`` partial HNSW indexes (``WHERE row % S = s``): the dense
leg then walks every shard's graph at once, one statement per pooled connection, and keeps the best
of their results by the float32 similarity. A walk's cost grows with ``ef_search`` far more than
with the graph's size, so on a machine with cores to spare two half graphs answer a million
passages at a given recall sooner than one whole graph (docs/postgres.md). ``rebuild_hnsw`` changes
an existing corpus's graph (links, build candidates, storage, shards) without reloading its rows:
it builds the new graph beside the old one, then drops the old.

Writes (upsert, delete) take a per-corpus advisory lock and commit in one transaction, so readers
see a corpus before or after a write, never half of it. The first load of an empty corpus builds
its indexes after the rows are copied in (binary ``COPY``), which is how a million passages load
in minutes rather than hours. Incremental upserts skip documents whose content hash is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from shortlist._pg import IdlePool
from shortlist._pg import first_line as _first_line
from shortlist.embeddings.base import Embedder, Vectors
from shortlist.errors import REBUILD_INDEX_HINT, ConfigError, MissingDependencyError
from shortlist.retrieval.backends.base import PREFETCH, Hit, IndexBackend, Progress, UpsertReport, rrf
from shortlist.retrieval.backends.embedded import _analyser_problem
from shortlist.retrieval.document import Chunk, Chunker, Document
from shortlist.text import analyser

try:
    import psycopg
    from psycopg.types.json import Jsonb
except ImportError as exc:  # the backend names its extra instead of a traceback
    from shortlist._install import pip_install

    raise MissingDependencyError(f"the PostgreSQL index backend needs psycopg: {pip_install('postgres')}") from exc

__all__ = [
    "SCHEMA_VERSION",
    "PostgresBackend",
    "check_corpus_name",
    "redact_url",
    "split_corpus_url",
    "split_index_url",
    "term_id",
]

#: Version of the tables' layout; a corpus written with a newer one is refused (rebuild it). 2: the
#: graph may be split into partial indexes (``hnsw.shards``), which a reader of 1 would not walk. A
#: corpus records the lowest version its layout needs, so one graph stays readable by version 1.
SCHEMA_VERSION = 2
_CORPUS = re.compile(r"[a-z][a-z0-9_]{0,39}")
_LOCK_BASE = 0x5EED_1000
_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_BINARY_TRAILER = struct.pack(">h", -1)
#: An upsert into an empty corpus of at least this many documents drops the indexes and builds them after.
_BULK = 1000
#: Documents embedded and copied at a time.
_BATCH_DOCS = 20_000

#: The passage columns both legs return (a Chunk's fields, in order).
_FIELDS = (
    "c.chunk_id, c.document_id, c.title, c.text, c.position, c.count, c.char_start, c.char_end, c.metadata, c.doc_hash"
)

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


def term_id(term: str) -> int:
    """A term's id in the postings: its 64-bit BLAKE2b digest as a signed integer (63 bits kept)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little") >> 1


#: The URL parameters that are shortlist's, not libpq's: the corpus, and how queries walk its graph.
_URL_OPTIONS = ("corpus", "ef_search")


def split_index_url(url: str, default: str = "shortlist") -> tuple[str, str, dict[str, str]]:
    """Split ``postgresql://…/db?corpus=NAME&ef_search=N`` into the libpq URL (without shortlist's
    parameters), the corpus name, and the other shortlist parameters given (``ef_search``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _URL_OPTIONS}
    rest = urlencode([(k, v) for k, v in query if k not in _URL_OPTIONS])
    corpus = ours.pop("corpus", default)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), corpus, ours


def split_corpus_url(url: str, default: str = "shortlist") -> tuple[str, str]:
    """Split ``postgresql://…/db?corpus=NAME`` into the libpq URL (without shortlist's parameters) and the
    corpus name."""
    dsn, corpus, _ = split_index_url(url, default)
    return dsn, corpus


def check_corpus_name(corpus: str) -> str:
    """Return ``corpus`` if it can name a corpus (its tables are named after it).

    Checked before any query that names it: a NUL byte would otherwise reach the server first.

    Raises:
        ConfigError: not 1-40 lowercase letters, digits or ``_``, starting with a letter.
    """
    if not isinstance(corpus, str) or not _CORPUS.fullmatch(corpus):
        raise ConfigError(f"corpus name {corpus!r}: use 1-40 lowercase letters, digits or '_', starting with a letter")
    return corpus


def redact_url(url: str) -> str:
    """``url`` without its password (for messages and reports)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _check_layout(m: int, ef_construction: int, storage: str, shards: int, pool_size: int) -> dict[str, Any]:
    """A graph layout, checked (pgvector's bounds; a shard per pooled connection but the lexical leg's).

    Raises:
        ConfigError: a value out of bounds.
    """
    if storage not in ("halfvec", "vector"):
        raise ConfigError(f"hnsw_storage must be 'halfvec' or 'vector', not {storage!r}")
    most = max(1, int(pool_size) - 1)
    if not 1 <= int(shards) <= most:
        raise ConfigError(f"hnsw_shards must be 1..{most} (pool_size - 1), not {shards!r}")
    if not 2 <= int(m) <= 100 or not 2 * int(m) <= int(ef_construction) <= 1000:
        raise ConfigError(
            "hnsw_m and hnsw_ef_construction need 2 <= m <= 100 and 2 * m <= ef_construction <= 1000 (pgvector's)"
        )
    return {"m": int(m), "ef_construction": int(ef_construction), "storage": storage, "shards": int(shards)}


def _recorded_layout(hnsw: Mapping[str, Any]) -> dict[str, Any]:
    """A corpus's recorded ``hnsw``, with what corpora from before a field had (float32, one graph)."""
    return {"storage": "vector", "shards": 1, **dict(hnsw)}


def _schema_version(layout: Mapping[str, Any]) -> int:
    """The lowest schema version that describes a graph layout (a sharded graph needs 2)."""
    return 2 if int(layout["shards"]) > 1 else 1


def _vector_literal(v: Vectors) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(v, dtype=np.float32).reshape(-1)) + "]"


def _text_field(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack(">i", len(data)) + data


def _unavailable(exc: psycopg.OperationalError) -> ConfigError:
    return ConfigError(f"index database unavailable: {_first_line(exc)}")


class PostgresBackend(IndexBackend):
    """A corpus index in PostgreSQL + pgvector (``shortlist[postgres]``; the server needs pgvector >= 0.8).

    Args:
        dsn: a libpq connection string or URL; a ``corpus=NAME`` query parameter names the corpus.
        corpus: the corpus name (lowercase letters, digits, ``_``; default ``shortlist``, or the URL's).
        embedder: embeds chunks and queries (required: the corpus holds dense vectors).
        chunker: chunking for a new corpus (an existing corpus keeps its own).
        k1: BM25 term-frequency saturation (a new corpus).
        b: BM25 length normalisation (a new corpus).
        dense_search: ``"hnsw"`` (the HNSW index) or ``"exact"`` (exact inner product, no index).
        ef_search: HNSW candidates kept while searching (``hnsw.ef_search``, 1-1000; None: the URL's
            ``ef_search=`` parameter, else 100).
        hnsw_m: HNSW links per node (a new corpus; 32: recall@10 0.81 instead of 0.61 at a million
            passages at ``ef_search`` 100, docs/postgres.md).
        hnsw_ef_construction: HNSW build candidates (a new corpus; 256: recall@10 0.94 instead of
            0.92 at a million passages at ``ef_search`` 400, for a build 38% longer).
        hnsw_storage: what the HNSW graph holds for a new corpus: ``"halfvec"`` (default: the vectors
            cast to half precision, half the index's memory and I/O; the table keeps float32, so exact
            search and the returned similarities are unchanged) or ``"vector"`` (float32).
        hnsw_shards: partial graphs for a new corpus, walked at once by each query (1: one graph;
            at most ``pool_size - 1``, so the lexical leg keeps a connection).
        per_term: the most postings a query term contributes to the candidates (exact BM25 below it).
        rescore: how many of the best candidates are rescored exactly (every query term's posting).
        maintenance_work_mem: memory for building the indexes after a bulk load (the HNSW graph
            should fit: 1.3 GB for a million 384-d vectors in halfvec with ``m=32``; the server
            takes only what the build needs).
        pool_size: the most idle connections kept open.
        connect_timeout: seconds to wait for a connection.

    Raises:
        ConfigError: no embedder, a bad corpus name, a server without pgvector, a corpus built with
            another embedder, analyser or schema version, or an unreachable database.
    """

    def __init__(
        self,
        dsn: str,
        *,
        corpus: str | None = None,
        embedder: Embedder | None = None,
        chunker: Chunker | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        dense_search: str = "hnsw",
        ef_search: int | None = None,
        hnsw_m: int = 32,
        hnsw_ef_construction: int = 256,
        hnsw_storage: str = "halfvec",
        hnsw_shards: int = 1,
        per_term: int = 1000,
        rescore: int = 200,
        maintenance_work_mem: str = "2GB",
        pool_size: int = 8,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__(embedder=embedder, chunker=chunker)
        if embedder is None:
            raise ConfigError("PostgresBackend needs an embedder (the corpus holds dense vectors)")
        if dense_search not in ("hnsw", "exact"):
            raise ConfigError(f"dense_search must be 'hnsw' or 'exact', not {dense_search!r}")
        self._hnsw = _check_layout(hnsw_m, hnsw_ef_construction, hnsw_storage, hnsw_shards, pool_size)
        self.dsn, url_corpus, options = split_index_url(dsn)
        if ef_search is None:
            try:
                ef_search = int(options.get("ef_search", 100))
            except ValueError:
                raise ConfigError(f"ef_search in the URL must be an integer, not {options['ef_search']!r}") from None
        if not 1 <= int(ef_search) <= 1000:
            raise ConfigError(f"ef_search must be 1..1000 (pgvector's bounds), not {ef_search}")
        self.corpus = check_corpus_name(corpus or url_corpus)
        self.dense_search = dense_search
        self.ef_search = int(ef_search)
        self.per_term = int(per_term)
        self.rescore = int(rescore)
        if not re.fullmatch(r"\d{1,6}(kB|MB|GB)", maintenance_work_mem):
            raise ConfigError(f"maintenance_work_mem must look like '512MB' or '2GB', not {maintenance_work_mem!r}")
        self.maintenance_work_mem = maintenance_work_mem
        self.k1, self.b = float(k1), float(b)
        self._pool_size = int(pool_size)
        self._connect_timeout = connect_timeout
        self._idle = IdlePool(self._connect, pool_size)
        self._pool: ThreadPoolExecutor | None = None  # runs the dense leg beside the lexical one
        self._pool_lock = threading.Lock()
        self._analyser = analyser("corpus")
        prefix = f"shortlist_ix_{self.corpus}"
        self._chunks_t, self._postings_t, self._terms_t = f"{prefix}_chunks", f"{prefix}_postings", f"{prefix}_terms"
        self._lock_id = _LOCK_BASE + (term_id(self.corpus) % 1_000_000)
        self._write_lock = threading.Lock()
        self.dim = 0
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- connections ---------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(
            self.dsn, connect_timeout=max(1, int(self._connect_timeout)), autocommit=True, prepare_threshold=None
        )
        conn.execute(f"SET hnsw.ef_search = {int(self.ef_search)}")
        # The planner cannot know how many postings a query term has (it guesses the average), and for
        # frequent terms a bitmap scan reads every posting then sorts them all: 340 ms against 53 ms for
        # the index-only scan in (term, impact DESC) order that stops at ``per_term`` (100k passages).
        conn.execute("SET enable_bitmapscan = off")
        return conn

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        if self._idle.closed:
            raise ConfigError("this PostgresBackend is closed")
        with self._idle.connection(_unavailable) as conn:
            yield conn

    def close(self) -> None:
        """Close every idle connection; later operations raise."""
        with self._pool_lock:
            self._idle.close()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    # -- schema --------------------------------------------------------------------------------

    def _open(self) -> None:
        assert self.embedder is not None
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_BASE,))
            has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
            if has is None:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except psycopg.Error as exc:
                    raise ConfigError(
                        f"the index database has no pgvector extension ({_first_line(exc)}); install pgvector "
                        "on the server, or run CREATE EXTENSION vector as a superuser"
                    ) from exc
            conn.execute(_CORPORA)
            row = conn.execute(
                "SELECT schema_version, embedder, dim, chunking, k1, b, analyser, hnsw"
                " FROM shortlist_index_corpora WHERE corpus = %s",
                (self.corpus,),
            ).fetchone()
            if row is None:
                self.dim = int(self.embedder.embed(["dimension probe"]).shape[1])
                self._create(conn)
                return
        version, built_with, dim, chunking, k1, b, signature, hnsw = row
        where = f"corpus {self.corpus!r}"
        if not 1 <= int(version) <= SCHEMA_VERSION:
            raise ConfigError(
                f"{where} has schema version {version}, this version reads 1-{SCHEMA_VERSION}: {REBUILD_INDEX_HINT}"
            )
        if built_with != self.embedder.model_name:
            raise ConfigError(
                f"{where} was built with embedder {built_with!r}, opened with {self.embedder.model_name!r}"
            )
        mismatch = _analyser_problem({"analyser": signature}, self._analyser)
        if mismatch:
            raise ConfigError(f"{where} {mismatch}")
        self.dim = int(dim)
        self.chunker = Chunker(**chunking)
        self.k1, self.b = float(k1), float(b)
        self._hnsw = _recorded_layout(hnsw)

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            f"CREATE TABLE {self._chunks_t} ("
            " row BIGINT PRIMARY KEY, chunk_id TEXT NOT NULL, document_id TEXT NOT NULL, title TEXT NOT NULL,"
            " text TEXT NOT NULL, position INTEGER NOT NULL, count INTEGER NOT NULL, char_start INTEGER NOT NULL,"
            " char_end INTEGER NOT NULL, metadata JSONB NOT NULL, doc_hash TEXT NOT NULL, length INTEGER NOT NULL,"
            f" embedding vector({self.dim}) NOT NULL)"
        )
        conn.execute(
            f"CREATE TABLE {self._postings_t} (term BIGINT NOT NULL, row BIGINT NOT NULL, tf INTEGER NOT NULL,"
            " dl INTEGER NOT NULL, impact REAL NOT NULL)"
        )
        conn.execute(f"CREATE TABLE {self._terms_t} (term BIGINT PRIMARY KEY, df INTEGER NOT NULL)")
        self._create_indexes(conn)
        conn.execute(
            "INSERT INTO shortlist_index_corpora (corpus, schema_version, embedder, dim, chunking, k1, b, analyser,"
            " hnsw) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.corpus,
                _schema_version(self._hnsw),
                self.embedder.model_name if self.embedder is not None else "",
                self.dim,
                Jsonb(self.chunker.to_dict()),
                self.k1,
                self.b,
                Jsonb(self._analyser.signature),
                Jsonb(self._hnsw),
            ),
        )

    def _create_indexes(self, conn: psycopg.Connection[Any]) -> None:
        t = self._chunks_t
        conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_doc ON {t} (document_id)")
        for _, statement in self._hnsw_ddl(self._hnsw):
            conn.execute(statement)
        p = self._postings_t
        conn.execute(f"CREATE INDEX IF NOT EXISTS {p}_term ON {p} (term, impact DESC) INCLUDE (row, tf, dl)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {p}_row ON {p} (row, term) INCLUDE (tf, dl)")

    def _hnsw_ddl(self, layout: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The indexes of ``layout``'s graph, as (name, statement): one, or one partial index per shard.

        The names carry a digest of the layout, so a rebuild builds the new graph beside the old one
        and a rebuild already done (or interrupted after a shard) skips what exists."""
        t = self._chunks_t
        key = self._hnsw_key("embedding", str(layout["storage"]))
        shards = int(layout["shards"])
        params = f"m = {int(layout['m'])}, ef_construction = {int(layout['ef_construction'])}"
        digest = hashlib.blake2b(
            f"{t}|{layout['m']}|{layout['ef_construction']}|{layout['storage']}|{shards}".encode(), digest_size=4
        ).hexdigest()
        if shards == 1:
            name = f"{t[:44]}_hnsw_{digest}"
            return [(name, f"CREATE INDEX IF NOT EXISTS {name} ON {t} USING hnsw ({key}) WITH ({params})")]
        names = [f"{t[:40]}_hnsw_{digest}_{s}of{shards}" for s in range(shards)]
        return [
            (
                name,
                f"CREATE INDEX IF NOT EXISTS {name} ON {t} USING hnsw ({key}) WITH ({params})"
                f" WHERE {self._shard_predicate('row', s, shards)}",
            )
            for s, name in enumerate(names)
        ]

    @staticmethod
    def _shard_predicate(column: str, shard: int, shards: int, *, placeholders: bool = False) -> str:
        """A shard's rows (the query's WHERE must repeat the partial index's predicate for the planner;
        ``placeholders``: for a statement with parameters, where psycopg reads ``%`` as one)."""
        mod = "%%" if placeholders else "%"
        return f"({column} {mod} {int(shards)}) = {int(shard)}"

    def _hnsw_indexes(self, conn: psycopg.Connection[Any]) -> list[str]:
        """The HNSW indexes on this corpus's passages, whatever layout built them."""
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s"
            " AND indexdef LIKE %s ORDER BY indexname",
            (self._chunks_t, "% USING hnsw %"),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def _hnsw_key(self, column: str, storage: str | None = None) -> str:
        """The HNSW index's key: the column, or its half-precision cast (the query must order by the same)."""
        if (storage or self._hnsw.get("storage")) == "halfvec":
            return f"({column}::halfvec({self.dim})) halfvec_ip_ops"
        return f"{column} vector_ip_ops"

    def _hnsw_order(self, column: str) -> str:
        """The ORDER BY expression the HNSW index answers (``_hnsw_key`` without the operator class)."""
        if self._hnsw.get("storage") == "halfvec":
            return f"({column}::halfvec({self.dim})) <#> %(v)s::halfvec({self.dim})"
        return f"{column} <#> %(v)s::vector"

    def _drop_indexes(self, conn: psycopg.Connection[Any]) -> None:
        for name in (
            f"{self._chunks_t}_doc",
            *self._hnsw_indexes(conn),
            f"{self._postings_t}_term",
            f"{self._postings_t}_row",
        ):
            conn.execute(f'DROP INDEX IF EXISTS "{name}"')

    @property
    def hnsw(self) -> dict[str, Any]:
        """The corpus's graph as recorded: ``m``, ``ef_construction``, ``storage`` and ``shards``."""
        return dict(self._hnsw)

    def rebuild_hnsw(
        self,
        *,
        m: int | None = None,
        ef_construction: int | None = None,
        storage: str | None = None,
        shards: int | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Rebuild the corpus's HNSW graph with new parameters (None keeps one), without reloading the rows.

        The new graph (its indexes) is built while the old one still answers queries; then, in one
        transaction under the corpus's write lock, the old indexes are dropped and the layout recorded.
        Indexes of the same layout that already exist are kept, so a rebuild interrupted after a shard
        resumes. ``progress`` is called with the passages indexed since its last call (read from
        ``pg_stat_progress_create_index``). Returns the new layout.

        Raises:
            ConfigError: a bad parameter, or another process rebuilt the graph meanwhile.
        """
        layout = _check_layout(
            self._hnsw["m"] if m is None else m,
            self._hnsw["ef_construction"] if ef_construction is None else ef_construction,
            storage or str(self._hnsw["storage"]),
            self._hnsw["shards"] if shards is None else shards,
            self._pool_size,
        )
        with self._write_lock:
            with self._conn() as conn:
                before = self._recorded_hnsw(conn)
                if before != self._hnsw:
                    raise ConfigError(f"corpus {self.corpus!r}: another process changed its graph; reopen it")
                existed = set(self._hnsw_indexes(conn))
                conn.execute(f"SET maintenance_work_mem = '{self.maintenance_work_mem}'")
                try:
                    for name, statement in self._hnsw_ddl(layout):
                        self._build_index(conn, name, statement, progress)
                finally:
                    conn.execute("RESET maintenance_work_mem")
            keep = {name for name, _ in self._hnsw_ddl(layout)}
            with self._conn() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
                now = self._recorded_hnsw(conn, lock=True)
                if now != before:  # another rebuild won: drop what this one built, unless that one uses it
                    theirs = {name for name, _ in self._hnsw_ddl(now)}
                    for name in keep - existed - theirs:
                        conn.execute(f'DROP INDEX IF EXISTS "{name}"')
                else:
                    for name in self._hnsw_indexes(conn):
                        if name not in keep:
                            conn.execute(f'DROP INDEX "{name}"')
                    conn.execute(
                        "UPDATE shortlist_index_corpora SET hnsw = %s, schema_version = %s WHERE corpus = %s",
                        (Jsonb(layout), _schema_version(layout), self.corpus),
                    )
            self._hnsw = now if now != before else layout
            if now != before:  # raised once the drops are committed
                raise ConfigError(f"corpus {self.corpus!r}: another process changed its graph meanwhile")
        return dict(layout)

    def _recorded_hnsw(self, conn: psycopg.Connection[Any], *, lock: bool = False) -> dict[str, Any]:
        row = conn.execute(
            "SELECT hnsw FROM shortlist_index_corpora WHERE corpus = %s" + (" FOR UPDATE" if lock else ""),
            (self.corpus,),
        ).fetchone()
        if row is None:
            raise ConfigError(f"corpus {self.corpus!r} no longer exists")
        return _recorded_layout(row[0])

    def _build_index(self, conn: psycopg.Connection[Any], name: str, statement: str, progress: Progress | None) -> None:
        """Run one CREATE INDEX (nothing when it exists), reporting the passages indexed as it goes (polled
        from a second connection) and, once built, the rest of the index's passages."""
        built = "SELECT reltuples FROM pg_class WHERE relname = %s AND relkind = 'i'"
        if progress is None:
            conn.execute(statement)
            return
        reported = 0
        if conn.execute(built, (name,)).fetchone() is None:
            pid = int(conn.info.backend_pid)
            stop = threading.Event()

            def watch() -> None:
                nonlocal reported
                with self._conn() as side:
                    while not stop.wait(1.0):
                        row = side.execute(
                            "SELECT tuples_done FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
                        ).fetchone()
                        if row is not None and row[0] is not None and int(row[0]) > reported:
                            step, reported = int(row[0]) - reported, int(row[0])
                            progress(step)

            watcher = threading.Thread(target=watch, name="shortlist-pg-build-progress", daemon=True)
            watcher.start()
            try:
                conn.execute(statement)
            finally:
                stop.set()
                watcher.join()
        row = conn.execute(built, (name,)).fetchone()
        if row is not None and int(max(0.0, float(row[0]))) > reported:
            progress(int(float(row[0])) - reported)

    @classmethod
    def corpora(cls, dsn: str) -> list[str]:
        """The corpora a database holds (none when it holds no index)."""
        url, _ = split_corpus_url(dsn)
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('shortlist_index_corpora')").fetchone() == (None,):
                return []
            return [r[0] for r in conn.execute("SELECT corpus FROM shortlist_index_corpora ORDER BY corpus")]

    @classmethod
    def describe(cls, dsn: str, corpus: str) -> dict[str, Any] | None:
        """What the database records about ``corpus`` (embedder, dim, counts, ...), or None when it has none.

        Raises:
            ConfigError: a bad corpus name (checked first), or the database cannot be reached.
        """
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
            raise ConfigError(f"index database unavailable: {_first_line(exc)}") from exc

    def drop(self) -> None:
        """Delete this corpus: its tables and its row (the backend is closed afterwards)."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
            for t in (self._chunks_t, self._postings_t, self._terms_t):
                conn.execute(f"DROP TABLE IF EXISTS {t}")
            conn.execute("DELETE FROM shortlist_index_corpora WHERE corpus = %s", (self.corpus,))
        self.close()

    # -- contract: writes ----------------------------------------------------------------------

    def upsert(self, documents: Sequence[Document], *, progress: Progress | None = None) -> UpsertReport:
        """See :meth:`IndexBackend.upsert` (one transaction; an empty corpus is bulk-loaded, indexes after)."""
        with self._write_lock:
            todo, added, updated, unchanged = self._plan(documents)
            if progress is not None and unchanged:
                progress(unchanged)
            if not todo:
                return UpsertReport(added=added, updated=updated, unchanged=unchanged)
            with self._conn() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
                self._remove(conn, [d.id for d in todo])
                row = conn.execute(
                    "SELECT chunks, tokens, next_row FROM shortlist_index_corpora WHERE corpus = %s FOR UPDATE",
                    (self.corpus,),
                ).fetchone()
                assert row is not None
                n_chunks, n_tokens, next_row = (int(x) for x in row)
                bulk = n_chunks == 0 and len(todo) >= _BULK
                if bulk:
                    conn.execute(f"SET LOCAL maintenance_work_mem = '{self.maintenance_work_mem}'")
                    self._drop_indexes(conn)
                for start in range(0, len(todo), _BATCH_DOCS):
                    chunks, vectors = self._embed_chunks(todo[start : start + _BATCH_DOCS], progress)
                    assert vectors is not None
                    if vectors.shape[1] != self.dim:
                        raise ConfigError(
                            f"the embedder gives {vectors.shape[1]} dimensions, corpus {self.corpus!r} {self.dim}"
                        )
                    tokens = [self._analyser.tokens(c.index_text) for c in chunks]
                    n_chunks += len(chunks)
                    n_tokens += sum(len(t) for t in tokens)
                    avgdl = n_tokens / n_chunks if n_chunks else 1.0
                    self._copy(conn, chunks, vectors, tokens, next_row, avgdl)
                    next_row += len(chunks)
                if bulk:
                    self._create_indexes(conn)
                conn.execute(
                    "UPDATE shortlist_index_corpora SET chunks = chunks + %s, tokens = tokens + %s, next_row = %s"
                    " WHERE corpus = %s",
                    (n_chunks - int(row[0]), n_tokens - int(row[1]), next_row, self.corpus),
                )
            if bulk:
                with self._conn() as conn:
                    # the visibility map lets the postings be read by index-only scans
                    for table in (self._chunks_t, self._postings_t, self._terms_t):
                        conn.execute(f"VACUUM (ANALYZE) {table}")
        return UpsertReport(added=added, updated=updated, unchanged=unchanged)

    def _copy(
        self,
        conn: psycopg.Connection[Any],
        chunks: Sequence[Chunk],
        vectors: Vectors,
        tokens: Sequence[list[str]],
        first_row: int,
        avgdl: float,
    ) -> None:
        """Binary COPY of the chunks (with their vectors), their postings, then the terms' frequencies."""
        vec_head = struct.pack(">ihh", 4 + 4 * self.dim, self.dim, 0)
        big = np.ascontiguousarray(vectors, dtype=">f4")
        norm_k = self.k1 * (1 - self.b)
        slope = self.k1 * self.b / avgdl if avgdl > 0 else 0.0
        df: Counter[int] = Counter()
        terms: list[int] = []
        rows: list[int] = []
        tfs: list[int] = []
        dls: list[int] = []
        with conn.cursor().copy(
            f"COPY {self._chunks_t} (row, chunk_id, document_id, title, text, position, count, char_start,"
            " char_end, metadata, doc_hash, length, embedding) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            buf = bytearray(_BINARY_HEADER)
            for i, c in enumerate(chunks):
                row = first_row + i
                meta = b"\x01" + json.dumps(dict(c.metadata), ensure_ascii=False, default=str).encode("utf-8")
                buf += struct.pack(">hiq", 13, 8, row)
                for text in (c.id, c.document_id, c.title, c.text):
                    buf += _text_field(text)
                buf += struct.pack(">iiiiiiii", 4, c.position, 4, c.count, 4, c.char_start, 4, c.char_end)
                buf += struct.pack(">i", len(meta)) + meta
                buf += _text_field(c.doc_hash)
                buf += struct.pack(">ii", 4, len(tokens[i]))
                buf += vec_head + big[i].tobytes()
                counts = Counter(term_id(t) for t in tokens[i])
                dl = len(tokens[i])
                for term, tf in counts.items():
                    terms.append(term)
                    rows.append(row)
                    tfs.append(tf)
                    dls.append(dl)
                df.update(counts.keys())
                if len(buf) > 1 << 20:
                    copy.write(bytes(buf))
                    buf.clear()
            buf += _BINARY_TRAILER
            copy.write(bytes(buf))
        if terms:
            tf_a = np.asarray(tfs, dtype=np.float64)
            dl_a = np.asarray(dls, dtype=np.float64)
            impact = tf_a / (tf_a + norm_k + slope * dl_a)
            rec = np.empty(
                len(terms),
                dtype=[
                    ("n", ">i2"),
                    ("l1", ">i4"),
                    ("term", ">i8"),
                    ("l2", ">i4"),
                    ("row", ">i8"),
                    ("l3", ">i4"),
                    ("tf", ">i4"),
                    ("l4", ">i4"),
                    ("dl", ">i4"),
                    ("l5", ">i4"),
                    ("imp", ">f4"),
                ],
            )
            rec["n"], rec["l1"], rec["l2"], rec["l3"], rec["l4"], rec["l5"] = 5, 8, 8, 4, 4, 4
            rec["term"], rec["row"], rec["tf"], rec["dl"], rec["imp"] = terms, rows, tfs, dls, impact
            with conn.cursor().copy(
                f"COPY {self._postings_t} (term, row, tf, dl, impact) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                data = rec.tobytes()
                copy.write(_BINARY_HEADER)
                step = 1 << 22
                for start in range(0, len(data), step):
                    copy.write(data[start : start + step])
                copy.write(_BINARY_TRAILER)
            self._add_df(conn, df)

    def _add_df(self, conn: psycopg.Connection[Any], df: Mapping[int, int]) -> None:
        if not df:
            return
        conn.execute(
            f"INSERT INTO {self._terms_t} (term, df) SELECT * FROM unnest(%s::bigint[], %s::integer[])"
            " ON CONFLICT (term) DO UPDATE SET df = "
            f"{self._terms_t}.df + EXCLUDED.df",
            (list(df.keys()), list(df.values())),
        )

    def _remove(self, conn: psycopg.Connection[Any], doc_ids: list[str]) -> int:
        """Delete these documents' chunks, postings and frequencies; return how many documents were removed."""
        if not doc_ids:
            return 0
        gone = conn.execute(
            f"DELETE FROM {self._chunks_t} WHERE document_id = ANY(%s) RETURNING row, length, document_id",
            (doc_ids,),
        ).fetchall()
        if not gone:
            return 0
        rows = [int(r[0]) for r in gone]
        conn.execute(
            f"WITH p AS (DELETE FROM {self._postings_t} WHERE row = ANY(%s) RETURNING term),"
            " c AS (SELECT term, count(*) AS n FROM p GROUP BY term)"
            f" UPDATE {self._terms_t} t SET df = t.df - c.n FROM c WHERE t.term = c.term",
            (rows,),
        )
        conn.execute(f"DELETE FROM {self._terms_t} WHERE df <= 0")
        conn.execute(
            "UPDATE shortlist_index_corpora SET chunks = chunks - %s, tokens = tokens - %s WHERE corpus = %s",
            (len(rows), sum(int(r[1]) for r in gone), self.corpus),
        )
        return len({r[2] for r in gone})

    def delete(self, document_ids: Iterable[str]) -> int:
        """See :meth:`IndexBackend.delete`."""
        ids = list(dict.fromkeys(document_ids))
        if not ids:
            return 0
        with self._write_lock, self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
            return self._remove(conn, ids)

    # -- contract: reads -----------------------------------------------------------------------

    def count(self) -> int:
        """See :meth:`IndexBackend.count`."""
        with self._conn() as conn:
            row = conn.execute(f"SELECT count(*) FROM {self._chunks_t} WHERE position = 0").fetchone()
        return int(row[0]) if row else 0

    def hashes(self) -> dict[str, str]:
        """See :meth:`IndexBackend.hashes`."""
        with self._conn() as conn:
            rows = conn.execute(f"SELECT document_id, doc_hash FROM {self._chunks_t} WHERE position = 0").fetchall()
        return {str(d): str(h) for d, h in rows}

    @staticmethod
    def _filter_sql(filters: Mapping[str, Any] | None, alias: str) -> tuple[str, list[Any]]:
        if not filters:
            return "", []
        sql: list[str] = []
        params: list[Any] = []
        for key, want in filters.items():
            if isinstance(want, list | tuple | set | frozenset):
                sql.append(f"{alias}.metadata -> %s = ANY(%s::jsonb[])")
                params += [str(key), [Jsonb(v) for v in want]]
            else:
                sql.append(f"{alias}.metadata -> %s = %s::jsonb")
                params += [str(key), Jsonb(want)]
        return " AND " + " AND ".join(sql), params

    def _filter_params(self, filters: Mapping[str, Any] | None, prefix: str) -> tuple[str, dict[str, Any]]:
        """``_filter_sql`` with named parameters (``prefix`` keeps the legs' names apart)."""
        where, params = self._filter_sql(filters, "c")
        named: dict[str, Any] = {}
        for i, value in enumerate(params):
            where = where.replace("%s", f"%({prefix}{i})s", 1)
            named[f"{prefix}{i}"] = value
        return where, named

    def _run(self, sql: str, params: Mapping[str, Any], iterative: bool) -> list[Any]:
        """Run one leg's statement on a pooled connection (pgvector's iterative scan when filters apply)."""
        with self._conn() as conn:
            if iterative:
                with conn.transaction():
                    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    return conn.execute(sql, params).fetchall()
            return conn.execute(sql, params).fetchall()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._idle.closed:
                raise ConfigError("this PostgresBackend is closed")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._idle.size, thread_name_prefix="shortlist-pg-leg")
            return self._pool

    def query(
        self,
        text: str = "",
        *,
        vector: Vectors | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        use_embedder: bool = True,
    ) -> list[Hit]:
        """See :meth:`IndexBackend.query` (each leg is one statement returning its passages and their inner
        products; with both, they run at once on two connections; RRF here, with the embedded backend's tie
        rules)."""
        if k <= 0:
            return []
        n = max(k, PREFETCH)
        qterms = list(dict.fromkeys(self._analyser.tokens(text))) if text else []
        qv = self._query_vector(text, vector, use_embedder)
        if qv is not None and qv.shape[0] != self.dim:
            raise ConfigError(f"query vector has {qv.shape[0]} dimensions, the index {self.dim}")
        if not qterms and qv is None:
            return []
        params: dict[str, Any] = {"n": n}
        lex_sql = ""
        den_sqls: list[str] = []
        if qv is not None:
            params["v"] = _vector_literal(qv)
        if qterms:
            lex_where, lex_params = self._filter_params(filters, "lf")
            join = f" JOIN {self._chunks_t} c ON c.row = p.row" if lex_where else ""
            cos_col = "-(c.embedding <#> %(v)s::vector)" if qv is not None else "NULL::float8"
            lex_sql = (
                "WITH m AS (SELECT GREATEST(chunks, 1)::float8 AS n, (tokens::float8 / GREATEST(chunks, 1)) AS avgdl"
                " FROM shortlist_index_corpora WHERE corpus = %(corpus)s),"
                " q AS (SELECT t.term, ln(1 + (m.n - t.df + 0.5) / (t.df + 0.5)) AS idf"
                f" FROM {self._terms_t} t, m WHERE t.term = ANY(%(terms)s) AND t.df > 0),"
                # candidates: each term's best postings (all of them for a rare term), partially scored
                " lexcand AS (SELECT s.row FROM (SELECT x.row, SUM(x.idf * x.tf / (x.tf + %(k1)s * (1 - %(b)s"
                " + %(b)s * x.dl / GREATEST(m.avgdl, 1e-9)))) AS score FROM m, (SELECT q.idf, p.row, p.tf, p.dl FROM q"
                f" CROSS JOIN LATERAL (SELECT p.row, p.tf, p.dl FROM {self._postings_t} p{join} WHERE p.term = q.term"
                f"{lex_where} ORDER BY p.impact DESC LIMIT %(per_term)s) p) x GROUP BY x.row) s"
                " ORDER BY s.score DESC, s.row LIMIT %(rescore)s),"
                # the best candidates rescored exactly, every query term's posting of each (OFFSET 0 keeps
                # the planner from flattening the probe into a scan of every posting of the query's terms)
                " lex AS (SELECT p.row, SUM(q.idf * p.tf / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.dl"
                " / GREATEST(m.avgdl, 1e-9)))) AS score FROM lexcand CROSS JOIN LATERAL"
                f" (SELECT p.row, p.term, p.tf, p.dl FROM {self._postings_t} p"
                " WHERE p.row = lexcand.row AND p.term = ANY(%(terms)s) OFFSET 0) p"
                " JOIN q ON q.term = p.term CROSS JOIN m GROUP BY p.row"
                " HAVING SUM(q.idf) > 0 ORDER BY score DESC, p.row LIMIT %(n)s)"
                f" SELECT c.row, lex.score, {cos_col}, {_FIELDS} FROM lex JOIN {self._chunks_t} c ON c.row = lex.row"
            )
            params.update(
                lex_params,
                corpus=self.corpus,
                terms=[term_id(t) for t in qterms],
                k1=self.k1,
                b=self.b,
                per_term=self.per_term,
                rescore=max(n, self.rescore),
            )
        if qv is not None:
            den_where, den_params = self._filter_params(filters, "df")
            # exact: "+ 0" keeps the planner off the HNSW index (an index scan ordered by the distance
            # followed by an incremental sort on row would look exact and be approximate)
            if self.dense_search == "exact":
                order = "(c.embedding <#> %(v)s::vector) + 0, c.row"
            else:
                order = self._hnsw_order("c.embedding")
            # a sharded graph: one walk per shard (each statement repeats its partial index's predicate)
            shards = int(self._hnsw["shards"]) if self.dense_search == "hnsw" else 1
            where = ["true"]
            if shards > 1:
                where = [self._shard_predicate("c.row", s, shards, placeholders=True) for s in range(shards)]
            # the similarity returned is the float32 one (the HNSW walk may rank by half precision)
            den_sqls = [
                f"SELECT c.row, NULL::float8, -(c.embedding <#> %(v)s::vector), {_FIELDS} FROM {self._chunks_t} c"
                f" WHERE {w}{den_where} ORDER BY {order} LIMIT %(n)s"
                for w in where
            ]
            params.update(den_params)
        iterative = bool(filters) and self.dense_search == "hnsw"
        statements = [*([lex_sql] if lex_sql else []), *den_sqls]
        # the legs (and the shards' walks) are independent: all but the first run on other pooled
        # connections meanwhile
        pending = [self._executor().submit(self._run, sql, params, iterative) for sql in statements[1:]]
        first = self._run(statements[0], params, iterative and not lex_sql)
        rest = [f.result() for f in pending]
        lex_rows = first if lex_sql else []
        den_rows = [r for rows in (rest if lex_sql else [first, *rest]) for r in rows]
        if len(den_sqls) > 1:  # the shards' best, merged
            den_rows = sorted(den_rows, key=lambda r: (-float(r[2]), int(r[0])))[:n]
        found = [*lex_rows, *den_rows]
        by_row = {int(r[0]): r for r in found}
        lex_leg = sorted(lex_rows, key=lambda r: (-float(r[1]), int(r[0])))
        den_leg = sorted(den_rows, key=lambda r: (-float(r[2]), int(r[0])))
        lexical = {int(r[0]): float(r[1]) for r in lex_leg}
        if qterms and qv is not None:
            ranked = sorted(rrf([list(lexical), [int(r[0]) for r in den_leg]]).items(), key=lambda kv: -kv[1])[:k]
        elif qterms:
            ranked = list(lexical.items())[:k]
        else:
            ranked = [(int(r[0]), float(r[2])) for r in den_leg[:k]]
        hits = []
        for row, score in ranked:
            r = by_row[row]
            chunk = Chunk(r[3], r[4], r[5], r[6], int(r[7]), int(r[8]), int(r[9]), int(r[10]), r[11], r[12])
            hits.append(
                Hit(
                    chunk,
                    score=float(score),
                    dense=None if qv is None else float(r[2]),
                    lexical=lexical.get(row, 0.0),
                )
            )
        return hits
