"""Embedding through a vector store: the stored vectors served, only the misses computed, saved a
few at a time (a killed process keeps what it saved); rows of another dimension recomputed, vectors
that are not finite returned but not stored. Used by :class:`shortlist.embeddings._cache.CachingEmbedder`
and the embedders with a ``vector_store``; re-exported by :mod:`shortlist.embeddings._cache`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from shortlist.embeddings._base import Embedder, Vectors
from shortlist.embeddings._cache_rows import report_dropped, text_key
from shortlist.errors import EmbeddingError

if TYPE_CHECKING:
    from shortlist.embeddings._cache import VectorStore

__all__ = ["SAVE_EVERY", "cached_embed", "model_identity"]

#: Misses are embedded and saved this many at a time (a killed process keeps what it saved).
SAVE_EVERY = 32


def model_identity(embedder: Embedder) -> str:
    """The key of ``embedder``'s vectors: its ``model_identity`` when it has one, else its ``model_name``."""
    identity = getattr(embedder, "model_identity", None)
    return str(identity) if identity else embedder.model_name


def cached_embed(
    store: VectorStore,
    identity: str,
    texts: Sequence[str],
    compute: Any,
) -> tuple[Vectors, int, int]:
    """Embed ``texts`` through ``store``: ``(vectors, hits, misses)``; ``compute(texts)`` embeds the misses.

    Stored rows of one identity whose dimension is not the one the model computes (a row of another
    model stored under this identity) are recomputed and replaced (``embeddings.cache_row_dropped``,
    reason ``dim``); computed vectors that are not finite are returned but not stored.

    Raises:
        EmbeddingError: ``compute`` returned the wrong shape.
    """
    keys = [text_key(t) for t in texts]
    by_key = dict(zip(keys, texts, strict=True))
    found = store.get(identity, keys)
    missing = [k for k in by_key if k not in found]
    hits = len(by_key) - len(missing)
    # SAVE_EVERY at a time, each part saved before the next is computed: a process killed mid-way
    # (a spawned call past its caller's deadline) leaves its progress for the next; split by length
    # (padding is per forward batch)
    if len(missing) > SAVE_EVERY:
        missing.sort(key=lambda k: len(by_key[k]))
    for start in range(0, len(missing), SAVE_EVERY):
        _compute_into(store, identity, missing[start : start + SAVE_EVERY], by_key, compute, found)
    if len({v.shape[0] for v in found.values()}) > 1:
        # rows of one identity disagree in dimension (a row of another model stored under it): the
        # model's own output decides, so the batch's stored rows are computed again and replaced
        stored = [k for k in by_key if k not in missing]
        before = {k: found[k].shape[0] for k in stored}
        _compute_into(store, identity, stored, by_key, compute, found)
        dims = {v.shape[0] for v in found.values()}
        if len(dims) > 1:
            raise EmbeddingError(f"{identity}: the model computed vectors of dimensions {sorted(dims)}")
        (dim,) = dims
        report_dropped(str(store.path), identity, ["dim"] * sum(1 for d in before.values() if d != dim))
    out: Vectors = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
    return out, hits, len(missing)


def _compute_into(
    store: VectorStore,
    identity: str,
    keys: Sequence[bytes],
    by_key: dict[bytes, str],
    compute: Any,
    found: dict[bytes, np.ndarray[Any, np.dtype[np.float32]]],
) -> None:
    """Compute the vectors of ``keys`` into ``found`` and store the finite ones (a not-finite one: an event).

    Raises:
        EmbeddingError: ``compute`` returned the wrong shape.
    """
    vecs = np.asarray(compute([by_key[k] for k in keys]), dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[0] != len(keys):
        raise EmbeddingError(f"{identity}: expected {len(keys)} vectors, got shape {vecs.shape}")
    finite = [bool(np.isfinite(row).all()) for row in vecs]
    store.put(identity, [(k, v) for k, v, ok in zip(keys, vecs, finite, strict=True) if ok])
    if not all(finite):
        report_dropped(str(store.path), identity, ["not_finite"] * finite.count(False), stored=False)
    for k, v in zip(keys, vecs, strict=True):
        found[k] = v
