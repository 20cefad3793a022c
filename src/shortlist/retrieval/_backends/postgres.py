"""``PostgresBackend``: the corpus index in PostgreSQL with pgvector, shared by every replica.

One database holds many corpora: a row each in ``shortlist_index_corpora`` (what it was built with,
its counts) and three tables each, ``shortlist_ix_<corpus>_{chunks,postings,terms}``: the passages
with their float32 vectors under an HNSW graph (over ``halfvec`` casts by default), BM25 postings
with their impacts, and the terms' document frequencies. This module is the backend: connections,
a corpus's lifecycle, and writes and reads under its lock. Its parts live beside it: names and URLs
(``_pg_names``), the catalogue and tables (``_pg_catalog``), the HNSW graph, its shards and rebuilds
(``_pg_graph``), writing passages by binary ``COPY`` (``_pg_writes``), and a query's SQL, its BM25
approximation and the RRF fusion (``_pg_query``). With both legs, the dense one runs on a second
pooled connection while the lexical one runs.

Writes (upsert, delete) take a per-corpus advisory lock and commit in one transaction, so readers
see a corpus before or after a write, never half of it. The first load of an empty corpus builds
its indexes after the rows are copied in, which is how a million passages load in minutes rather
than hours. Incremental upserts skip documents whose content hash is unchanged.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from shortlist._pg import IdlePool
from shortlist._text import analyser
from shortlist.embeddings._base import Embedder, Vectors
from shortlist.errors import ConfigError, MissingDependencyError, OperationalError, unavailable
from shortlist.retrieval._backends.base import PREFETCH, Hit, IndexBackend, Progress, UpsertReport
from shortlist.retrieval._document import Chunker, Document

try:
    import psycopg
except ImportError as exc:  # the backend names its extra instead of a traceback
    from shortlist._install import pip_install

    raise MissingDependencyError(f"the PostgreSQL index backend needs psycopg: {pip_install('postgres')}") from exc

from shortlist.retrieval._backends._pg_catalog import (
    check_recorded,
    create_indexes,
    describe_corpus,
    drop_corpus,
    drop_indexes,
    ensure_catalog,
    list_corpora,
    read_corpus,
    register_corpus,
)
from shortlist.retrieval._backends._pg_graph import (
    check_ef_search,
    check_layout,
    rebuild_graph,
    recorded_layout,
)
from shortlist.retrieval._backends._pg_names import (
    SCHEMA_VERSION,
    check_corpus_name,
    redact_url,
    split_corpus_url,
    split_index_url,
    term_id,
)
from shortlist.retrieval._backends._pg_query import fuse, query_statements
from shortlist.retrieval._backends._pg_writes import add_counts, copy_passages, counts_for_update, remove_documents

__all__ = [
    "SCHEMA_VERSION",
    "PostgresBackend",
    "check_corpus_name",
    "redact_url",
    "split_corpus_url",
    "split_index_url",
    "term_id",
]

_LOCK_BASE = 0x5EED_1000
#: An upsert into an empty corpus of at least this many documents drops the indexes and builds them after.
_BULK = 1000
#: Documents embedded and copied at a time.
_BATCH_DOCS = 20_000


def _unavailable(exc: psycopg.OperationalError) -> OperationalError:
    return unavailable("index database", exc)


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
            another embedder, analyser or schema version.
        OperationalError: the database cannot be reached (``retry_after`` is set).
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
        self._hnsw = check_layout(hnsw_m, hnsw_ef_construction, hnsw_storage, hnsw_shards, pool_size)
        self.dsn, url_corpus, options = split_index_url(dsn)
        self.ef_search = check_ef_search(ef_search, options)
        self.corpus = check_corpus_name(corpus or url_corpus)
        self.dense_search = dense_search
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
        self._tables = (f"{prefix}_chunks", f"{prefix}_postings", f"{prefix}_terms")
        self._chunks_t, self._postings_t, self._terms_t = self._tables
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
            ensure_catalog(conn)
            row = read_corpus(conn, self.corpus)
            if row is None:
                self.dim = int(self.embedder.embed(["dimension probe"]).shape[1])
                register_corpus(
                    conn,
                    self.corpus,
                    self._tables,
                    dim=self.dim,
                    layout=self._hnsw,
                    embedder=self.embedder.model_name,
                    chunking=self.chunker.to_dict(),
                    k1=self.k1,
                    b=self.b,
                    analyser=self._analyser.signature,
                )
                return
        version, built_with, dim, chunking, k1, b, signature, hnsw = row
        check_recorded(self.corpus, version, built_with, self.embedder.model_name, signature, self._analyser)
        self.dim = int(dim)
        self.chunker = Chunker(**chunking)
        self.k1, self.b = float(k1), float(b)
        self._hnsw = recorded_layout(hnsw)

    def _create_indexes(self, conn: psycopg.Connection[Any]) -> None:
        create_indexes(conn, self._tables, self.dim, self._hnsw)

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
        layout = check_layout(
            self._hnsw["m"] if m is None else m,
            self._hnsw["ef_construction"] if ef_construction is None else ef_construction,
            storage or str(self._hnsw["storage"]),
            self._hnsw["shards"] if shards is None else shards,
            self._pool_size,
        )
        with self._write_lock:
            self._hnsw, raced = rebuild_graph(
                self._conn,
                corpus=self.corpus,
                table=self._chunks_t,
                dim=self.dim,
                lock_id=self._lock_id,
                current=self._hnsw,
                layout=layout,
                maintenance_work_mem=self.maintenance_work_mem,
                progress=progress,
            )
            if raced:  # raised once the drops are committed
                raise ConfigError(f"corpus {self.corpus!r}: another process changed its graph meanwhile")
        return dict(layout)

    @classmethod
    def corpora(cls, dsn: str) -> list[str]:
        """The corpora a database holds (none when it holds no index)."""
        return list_corpora(dsn)

    @classmethod
    def describe(cls, dsn: str, corpus: str) -> dict[str, Any] | None:
        """What the database records about ``corpus`` (embedder, dim, counts, ...), or None when it has none.

        Raises:
            ConfigError: a bad corpus name (checked first).
            OperationalError: the database cannot be reached (``retry_after`` is set).
        """
        return describe_corpus(dsn, corpus)

    def drop(self) -> None:
        """Delete this corpus: its tables and its row (the backend is closed afterwards)."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
            drop_corpus(conn, self.corpus, self._tables)
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
                remove_documents(conn, self._tables, self.corpus, [d.id for d in todo])
                row = counts_for_update(conn, self.corpus)
                n_chunks, n_tokens, next_row = row
                bulk = n_chunks == 0 and len(todo) >= _BULK
                if bulk:
                    conn.execute(f"SET LOCAL maintenance_work_mem = '{self.maintenance_work_mem}'")
                    drop_indexes(conn, self._tables)
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
                    copy_passages(
                        conn, self._tables, self.dim, self.k1, self.b, chunks, vectors, tokens, next_row, avgdl
                    )
                    next_row += len(chunks)
                if bulk:
                    self._create_indexes(conn)
                add_counts(conn, self.corpus, n_chunks - row[0], n_tokens - row[1], next_row)
            if bulk:
                with self._conn() as conn:
                    # the visibility map lets the postings be read by index-only scans
                    for table in (self._chunks_t, self._postings_t, self._terms_t):
                        conn.execute(f"VACUUM (ANALYZE) {table}")
        return UpsertReport(added=added, updated=updated, unchanged=unchanged)

    def delete(self, document_ids: Iterable[str]) -> int:
        """See :meth:`IndexBackend.delete`."""
        ids = list(dict.fromkeys(document_ids))
        if not ids:
            return 0
        with self._write_lock, self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
            return remove_documents(conn, self._tables, self.corpus, ids)

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
        lex_sql, den_sql_list, params = query_statements(
            self._tables,
            corpus=self.corpus,
            qterms=[term_id(t) for t in qterms],
            qv=qv,
            filters=filters,
            n=n,
            k1=self.k1,
            b=self.b,
            per_term=self.per_term,
            rescore=max(n, self.rescore),
            dense_search=self.dense_search,
            layout=self._hnsw,
            dim=self.dim,
        )
        iterative = bool(filters) and self.dense_search == "hnsw"
        statements = [*([lex_sql] if lex_sql else []), *den_sql_list]
        # the legs (and the shards' walks) are independent: all but the first run on other pooled
        # connections meanwhile
        pending = [self._executor().submit(self._run, sql, params, iterative) for sql in statements[1:]]
        first = self._run(statements[0], params, iterative and not lex_sql)
        rest = [f.result() for f in pending]
        lex_rows = first if lex_sql else []
        den_rows = [r for rows in (rest if lex_sql else [first, *rest]) for r in rows]
        return fuse(
            lex_rows,
            den_rows,
            lexical_leg=bool(qterms),
            dense_leg=qv is not None,
            sharded=len(den_sql_list) > 1,
            k=k,
            n=n,
        )
