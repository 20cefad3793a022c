"""A persistent vector cache: wrap any embedder so each text is embedded once, across processes.

Vectors are stored in a SQLite file keyed by ``(model_name, sha256(text))`` as float32
blobs. Catalog descriptions and usage examples (thousands of them, from the feedback log)
are then embedded once per model, not at every start of a process or an evaluation.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from shortlist.embeddings.base import Embedder, Vectors
from shortlist.errors import EmbeddingError

__all__ = ["CachingEmbedder"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    key BLOB NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (model, key)
) WITHOUT ROWID
"""
_CHUNK = 500


class CachingEmbedder(Embedder):
    """Serves vectors from a SQLite cache and embeds only the misses with ``inner``.

    Args:
        inner: the embedder that computes missing vectors.
        path: the SQLite file (created with its folder when missing).
        min_batch: batches smaller than this bypass the cache (a per-turn query is cheaper
            to embed, or to find in the inner embedder's own memory cache, than to look up
            on disk).
    """

    def __init__(self, inner: Embedder, path: str | os.PathLike[str], *, min_batch: int = 2) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.path = Path(path)
        self.min_batch = min_batch
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.Error as exc:
            raise EmbeddingError(f"vector cache {self.path}: {exc}") from exc
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Return cached vectors and embed (then store) the rest in one inner call."""
        if len(texts) < self.min_batch:
            return self.inner.embed_batch(texts)
        keys = [self._key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                rows = self._db.execute(
                    f"SELECT key, dim, vec FROM vectors WHERE model = ? AND key IN ({','.join('?' * len(chunk))})",
                    [self.model_name, *chunk],
                ).fetchall()
                for key, dim, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32, count=dim)
        missing = [(k, t) for k, t in dict(zip(keys, texts, strict=True)).items() if k not in found]
        self.hits += len(unique) - len(missing)
        self.misses += len(missing)
        if missing:
            vecs = np.asarray(self.inner.embed_batch([t for _, t in missing]), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != len(missing):
                raise EmbeddingError(f"{self.model_name}: expected {len(missing)} vectors, got shape {vecs.shape}")
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (model, key, dim, vec) VALUES (?, ?, ?, ?)",
                    [(self.model_name, k, vecs.shape[1], v.tobytes()) for (k, _), v in zip(missing, vecs, strict=True)],
                )
                self._db.commit()
            for (k, _), v in zip(missing, vecs, strict=True):
                found[k] = v
        dims = {v.shape[0] for v in found.values()}
        if len(dims) > 1:
            raise EmbeddingError(f"vector cache {self.path}: mixed dimensions {sorted(dims)} for {self.model_name}")
        return np.stack([found[k] for k in keys])

    def close(self) -> None:
        """Close the SQLite connection."""
        with self._lock:
            self._db.close()
