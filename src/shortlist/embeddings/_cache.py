"""The persistent, content-addressed vector cache, shared by every process of a user.

Vectors live in one SQLite file (``vectors.sqlite3`` in the cache directory), keyed by
``(model identity, sha256(text))``: the identity names the model's content (the sha256 of its
files for the default model, the endpoint and model name for an HTTP one), never only its
name, so two models called alike never share vectors. Catalog descriptions, usage examples and
documents are then embedded once per model and machine, not at every start of a process.

The directory is ``$SHORTLIST_CACHE_DIR``, else ``$XDG_CACHE_HOME/shortlist``, else
``~/.cache/shortlist``; ``SHORTLIST_CACHE_DIR=off`` (or a config's ``spec.cache.dir: off``)
turns the cache off. A ``postgresql://`` URL there (or as a provider's ``vector_cache``) keeps the
vectors in PostgreSQL instead (:class:`~shortlist.embeddings._postgres.PostgresVectorStore`, same
keys and checks), shared by every replica of a deployment; files (the optimised model graph) then
stay in the user's cache directory. The file is safe under concurrent processes (WAL journal, a busy timeout,
one short write transaction per batch; misses are embedded and saved :data:`SAVE_EVERY` at a time,
so a process killed mid-catalog keeps its progress) and bounded: above ``max_mb`` (default 512,
``$SHORTLIST_CACHE_MAX_MB``) the least recently used vectors are evicted. A cache that cannot
be opened or written (a read-only home, a full disk) is skipped with a
``embeddings.cache_unavailable`` event: vectors are then computed, never wrong.

Every row is checked when it is read (:func:`check_rows`, in ``_cache_rows``): ``dim`` finite float32s
and a ``digest``, the sha256 of (model identity, text key, vector) written with it, so a row damaged on
disk or copied under another text's key is not served: it is deleted, recomputed and stored again,
with an ``embeddings.cache_row_dropped`` event. The digest is no signature: the cache trusts whoever
can write it (``docs/caching.md``, "What the cache trusts"). Embedding through a store: ``_cached_embed``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from shortlist._events import Event, emit
from shortlist._sqlite import BUSY_TIMEOUT_MS, enable_wal, retry_locked
from shortlist.embeddings._base import Embedder, Vectors
from shortlist.embeddings._cache_rows import (
    CacheInfo,
    CacheRowDropped,
    check_rows,
    decode_vector,
    report_dropped,
    row_digest,
)
from shortlist.embeddings._cache_rows import encoded as _encoded
from shortlist.embeddings._cache_rows import text_key as text_key
from shortlist.embeddings._cached_embed import SAVE_EVERY, model_identity
from shortlist.embeddings._cached_embed import cached_embed as cached_embed
from shortlist.errors import ConfigError, EmbeddingError

__all__ = [
    "DEFAULT_MAX_MB",
    "ENV_CACHE_DIR",
    "ENV_CACHE_MAX_MB",
    "SAVE_EVERY",
    "CacheInfo",
    "CacheRowDropped",
    "CacheUnavailable",
    "CachingEmbedder",
    "VectorStore",
    "cache_dir",
    "cache_location",
    "check_rows",
    "configure_cache",
    "decode_vector",
    "default_store",
    "is_postgres_url",
    "row_digest",
]

#: The environment variable naming the cache directory (``off`` disables the cache).
ENV_CACHE_DIR = "SHORTLIST_CACHE_DIR"
#: The environment variable bounding the vector file, in MB.
ENV_CACHE_MAX_MB = "SHORTLIST_CACHE_MAX_MB"
#: The default bound of the vector file, in MB (about 300,000 MiniLM vectors).
DEFAULT_MAX_MB = 512
#: The vector file's name inside the cache directory.
VECTORS_FILE = "vectors.sqlite3"

_OFF = frozenset({"off", "none", "0", "false", "no"})
_CHUNK = 500
_TOUCH_AFTER_US = 3600 * 1_000_000  # a hit refreshes its last use (µs) at most hourly: hits stay read-only

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS vectors (
        model TEXT NOT NULL,
        key BLOB NOT NULL,
        dim INTEGER NOT NULL,
        vec BLOB NOT NULL,
        used INTEGER NOT NULL DEFAULT 0,
        digest BLOB,
        PRIMARY KEY (model, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)",
)

logger = logging.getLogger("shortlist.embeddings")


@dataclass(frozen=True, kw_only=True)
class CacheUnavailable(Event):
    """The persistent vector cache (a directory or a PostgreSQL database) could not be opened, reached or written;
    vectors are computed without it."""

    name: ClassVar[str] = "embeddings.cache_unavailable"
    area: ClassVar[str] = "embeddings"
    level: int = logging.WARNING
    path: str = ""
    error: str = ""


# -- where ---------------------------------------------------------------------------------

_settings_lock = threading.Lock()
_configured_dir: str | None = None  # set by configure_cache (a config's spec.cache.dir)
_configured_max_mb: int | None = None


def configure_cache(*, directory: str | os.PathLike[str] | None = None, max_mb: int | None = None) -> None:
    """Set this process's cache directory (``"off"`` disables it) and bound (a config's ``spec.cache``).

    They win over the environment; ``None`` keeps the current choice.

    Raises:
        ConfigError: ``max_mb`` below 1.
    """
    global _configured_dir, _configured_max_mb
    if max_mb is not None and max_mb < 1:
        raise ConfigError(f"cache max_mb must be >= 1, not {max_mb}")
    with _settings_lock:
        if directory is not None:
            _configured_dir = os.fspath(directory)
        if max_mb is not None:
            _configured_max_mb = max_mb


def is_postgres_url(value: object) -> bool:
    """Whether a cache location is a PostgreSQL URL (``postgresql://`` or ``postgres://``) rather than a path."""
    return isinstance(value, str) and value.strip().startswith(("postgresql://", "postgres://"))


def _setting() -> str:
    return _configured_dir if _configured_dir is not None else os.environ.get(ENV_CACHE_DIR, "")


def cache_location() -> Path | str | None:
    """Where vectors are kept: the cache directory, a ``postgresql://`` URL, or None when the cache is off."""
    value = _setting()
    if is_postgres_url(value):
        return value.strip()
    return cache_dir()


def cache_dir() -> Path | None:
    """The cache directory in effect (files: vectors unless a URL is set, optimised model graphs), or None when off.

    With a ``postgresql://`` URL as the cache location the vectors are in the database and this is
    the user's cache directory (``$XDG_CACHE_HOME/shortlist`` or ``~/.cache/shortlist``).
    """
    value = _setting()
    if value.strip().lower() in _OFF and value.strip():
        return None
    if value.strip() and not is_postgres_url(value):
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "shortlist"


def cache_max_mb() -> int:
    """The bound of the vector file in effect, in MB."""
    if _configured_max_mb is not None:
        return _configured_max_mb
    raw = os.environ.get(ENV_CACHE_MAX_MB, "").strip()
    if not raw:
        return DEFAULT_MAX_MB
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{ENV_CACHE_MAX_MB}={raw!r}: expected a whole number of MB") from None
    if value < 1:
        raise ConfigError(f"{ENV_CACHE_MAX_MB}={raw!r}: expected at least 1")
    return value


_stores: dict[tuple[str, int], VectorStore | None] = {}
_retry_at: dict[tuple[str, int], float] = {}  # a database location that could not be opened: when to try again
#: Seconds a vector database that could not be reached is left alone before the next attempt.
DATABASE_RETRY_S = 30.0
_stores_lock = threading.Lock()


def default_store() -> VectorStore | None:
    """The process's store where the cache location points (opened once per location), or None when off.

    A directory that cannot be created or opened, or a database that cannot be reached, gives None
    and one ``embeddings.cache_unavailable`` event (a later call tries again: a database may come up).
    """
    location = cache_location()
    if location is None:
        return None
    where = location if isinstance(location, str) else str(location / VECTORS_FILE)
    key = (where, cache_max_mb())
    with _stores_lock:
        if key in _stores:
            return _stores[key]
        if time.monotonic() < _retry_at.get(key, 0.0):
            return None
        store: VectorStore | None
        try:
            store = VectorStore(where, max_mb=key[1])
        except EmbeddingError as exc:
            shown = where
            if isinstance(location, str):
                from shortlist.retrieval._backends.postgres import redact_url

                shown = redact_url(where)
            emit(CacheUnavailable(path=shown, error=str(exc)))
            if isinstance(location, str):
                # not remembered for good: the database may come up; tried again after a while, so a
                # database that does not answer does not cost every batch a connection timeout
                _retry_at[key] = time.monotonic() + DATABASE_RETRY_S
                return None
            store = None
        _stores[key] = store
        return store


# -- the store ------------------------------------------------------------------------------


class VectorStore:
    """One SQLite file of vectors keyed by ``(model identity, sha256(text))``, bounded by LRU eviction.

    Safe for threads (one connection behind a lock) and for concurrent processes (WAL, busy
    timeout, short write transactions). ``VectorStore("postgresql://…")`` opens a
    :class:`~shortlist.embeddings._postgres.PostgresVectorStore` instead (``shortlist[postgres]``).

    Args:
        path: the SQLite file (created with its folder when missing), or a ``postgresql://`` URL.
        max_mb: evict the least recently used vectors above this size.

    Raises:
        EmbeddingError: the file cannot be created or opened.
    """

    path: Path | str

    def __new__(cls, path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> VectorStore:
        if cls is VectorStore and is_postgres_url(path):
            from shortlist.embeddings._postgres import PostgresVectorStore

            return object.__new__(PostgresVectorStore)  # whose __init__ then runs
        return object.__new__(cls)

    def __init__(self, path: str | os.PathLike[str], *, max_mb: int = DEFAULT_MAX_MB) -> None:
        self.path = Path(path)
        self.max_bytes = int(max_mb) * 1024 * 1024
        self._lock = threading.Lock()
        self._broken = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            enable_wal(self._db, timeout_ms=BUSY_TIMEOUT_MS, source=str(self.path))
            self._db.execute("PRAGMA synchronous = NORMAL")
            retry_locked(self._create_schema, timeout_ms=BUSY_TIMEOUT_MS)
        except (sqlite3.Error, OSError) as exc:
            raise EmbeddingError(f"vector cache {self.path}: {exc}") from exc

    def _create_schema(self) -> None:
        with self._db:
            self._db.execute(_SCHEMA[0])
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(vectors)")}
            if "used" not in columns:  # a file of the earlier schema (vector_cache: PATH)
                self._db.execute("ALTER TABLE vectors ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
            if "digest" not in columns:  # rows written before digests: none is served, each is recomputed once
                self._db.execute("ALTER TABLE vectors ADD COLUMN digest BLOB")
            self._db.execute(_SCHEMA[1])

    def get(self, model: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray[Any, np.dtype[np.float32]]]:
        """The stored vectors of ``keys`` (missing keys are absent); refreshes their last use now and then.

        A row that fails :func:`check_rows` is absent too: it is deleted, with an
        ``embeddings.cache_row_dropped`` event, and the caller recomputes it.
        """
        found: dict[bytes, np.ndarray[Any, np.dtype[np.float32]]] = {}
        if self._broken or not keys:
            return found
        now = time.time_ns() // 1000
        stale: list[bytes] = []
        bad: list[tuple[bytes, str]] = []
        unique = list(dict.fromkeys(keys))
        try:
            with self._lock:
                for start in range(0, len(unique), _CHUNK):
                    chunk = unique[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = self._db.execute(
                        f"SELECT key, dim, vec, used, digest FROM vectors WHERE model = ? AND key IN ({marks})",
                        [model, *chunk],
                    ).fetchall()
                    good, rejected = check_rows(model, [(key, dim, blob, digest) for key, dim, blob, _, digest in rows])
                    found.update(good)
                    bad += rejected
                    stale += [key for key, _, _, used, _ in rows if key in good and used < now - _TOUCH_AFTER_US]
                if stale or bad:
                    with self._db:
                        self._db.executemany(
                            "UPDATE vectors SET used = ? WHERE model = ? AND key = ?", [(now, model, k) for k in stale]
                        )
                        self._db.executemany(
                            "DELETE FROM vectors WHERE model = ? AND key = ?", [(model, k) for k, _ in bad]
                        )
        except sqlite3.Error as exc:
            self._fail(exc)
        if bad:
            report_dropped(str(self.path), model, [reason for _, reason in bad])
        return found

    def put(self, model: str, items: Sequence[tuple[bytes, np.ndarray[Any, Any]]]) -> None:
        """Store vectors (one transaction), then evict the least recently used ones above the bound."""
        if self._broken or not items:
            return
        now = time.time_ns() // 1000
        try:
            with self._lock:
                with self._db:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO vectors (model, key, dim, vec, used, digest) VALUES (?, ?, ?, ?, ?, ?)",
                        [(model, k, int(v.shape[0]), b, now, row_digest(model, k, b)) for k, v, b in _encoded(items)],
                    )
                self._evict()
        except sqlite3.Error as exc:
            self._fail(exc)

    def _used_bytes(self) -> int:
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    def _evict(self) -> None:
        used = self._used_bytes()
        if used <= self.max_bytes:
            return
        count = self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        if not count:
            return
        target = int(self.max_bytes * 0.9)  # evict a tenth more than needed: not at every insert
        drop = min(count, max(1, int(count * (used - target) / used) + 1))
        with self._db:
            self._db.execute(
                "DELETE FROM vectors WHERE (model, key) IN (SELECT model, key FROM vectors ORDER BY used LIMIT ?)",
                (drop,),
            )
        logger.debug("vector cache %s: evicted %d of %d vectors (%d bytes used)", self.path, drop, count, used)

    def _fail(self, exc: BaseException) -> None:
        self._broken = True
        emit(CacheUnavailable(path=str(self.path), error=str(exc)))

    def info(self) -> CacheInfo:
        """How many vectors of which models, and the bytes they use."""
        with self._lock:
            models = dict(self._db.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model ORDER BY model"))
            return CacheInfo(
                path=str(self.path),
                exists=True,
                vectors=sum(models.values()),
                bytes=self._used_bytes(),
                max_bytes=self.max_bytes,
                models=models,
            )

    def clear(self, model: str | None = None) -> int:
        """Delete every vector (or one model's); return how many were deleted."""
        with self._lock:
            with self._db:
                if model is None:
                    deleted = self._db.execute("DELETE FROM vectors").rowcount
                else:
                    deleted = self._db.execute("DELETE FROM vectors WHERE model = ?", (model,)).rowcount
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")
            return int(deleted)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


class CachingEmbedder(Embedder):
    """Serves vectors from a :class:`VectorStore` and embeds only the misses with ``inner``.

    Args:
        inner: the embedder that computes missing vectors.
        path: a :class:`VectorStore`, or the SQLite file of one (created with its folder).
        min_batch: batches smaller than this bypass the cache (a per-turn query is cheaper
            to embed, or to find in the inner embedder's own memory cache, than to look up
            on disk).
        identity: the model identity the vectors are keyed by (default: the inner
            embedder's ``model_identity``, else its ``model_name``).
    """

    def __init__(
        self,
        inner: Embedder,
        path: str | os.PathLike[str] | VectorStore,
        *,
        min_batch: int = 2,
        identity: str | None = None,
    ) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.store = path if isinstance(path, VectorStore) else VectorStore(path)
        self._owns_store = not isinstance(path, VectorStore)
        self.path = self.store.path
        self.min_batch = min_batch
        self._identity = identity
        self.hits = 0
        self.misses = 0

    @property
    def model_identity(self) -> str:
        """The identity the vectors are keyed by."""
        return self._identity or model_identity(self.inner)

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Return cached vectors and embed (then store) the rest in one inner call."""
        if len(texts) < self.min_batch:
            return self.inner.embed_batch(texts)
        out, hits, misses = cached_embed(self.store, self.model_identity, texts, self.inner.embed_batch)
        self.hits += hits
        self.misses += misses
        return out

    def close(self) -> None:
        """Close the store when this object opened it."""
        if self._owns_store:
            self.store.close()
