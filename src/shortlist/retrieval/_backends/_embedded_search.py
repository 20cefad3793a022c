"""The embedded index's dense search in numpy: exact cosine, or a sign-bit (binary) Hamming prefilter
of candidates rescored exactly, and the top rows of a score vector (ties by row number).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shortlist.embeddings._base import Vectors, matvec

__all__ = ["dense_top", "pack", "top"]


def top(scores: np.ndarray[Any, Any], n: int, positive_only: bool) -> list[int]:
    """Row numbers of the ``n`` best scores, best first, ties broken by row number."""
    if positive_only:
        rows = np.flatnonzero(scores > 0)
        if rows.size > n:
            rows = rows[np.argpartition(-scores[rows], n - 1)[:n]]
    else:
        rows = np.arange(scores.size) if scores.size <= n else np.argpartition(-scores, n - 1)[:n]
        rows = rows[np.isfinite(scores[rows])]
    order = np.lexsort((rows, -scores[rows]))
    return [int(r) for r in rows[order]]


def pack(vectors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Sign bits of each row, packed into uint64 words (rows padded to a multiple of 64 bits)."""
    v = np.atleast_2d(vectors)
    packed = np.packbits(v > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    out = np.ascontiguousarray(packed).view(np.uint64)
    return out if vectors.ndim == 2 else out[0]


def dense_top(
    vectors: Vectors,
    qv: Vectors,
    n: int,
    mask: np.ndarray[Any, Any] | None,
    binary: tuple[np.ndarray[Any, Any], Vectors] | None,
    rescore: int,
) -> list[int]:
    """Rows of the ``n`` nearest vectors: exact, or (``binary``: the rows' packed sign bits, transposed,
    and their mean) a Hamming prefilter of ``rescore`` candidates (at least 2% and 4 x ``n``) + exact rescoring."""
    total = vectors.shape[0]
    if binary is None:
        dense = matvec(vectors, qv)
        if mask is not None:
            dense = np.where(mask, dense, -np.inf)
        return top(dense, n, positive_only=False)
    bits, mean = binary
    qbits = pack(qv - mean)
    ham = np.bitwise_count(bits[0] ^ qbits[0]).astype(np.uint16)
    for j in range(1, bits.shape[0]):
        ham += np.bitwise_count(bits[j] ^ qbits[j])
    if mask is not None:
        ham = np.where(mask, ham, np.uint16(65535))
    m = min(total, max(rescore, total // 50, 4 * n))
    cand = np.arange(total) if m >= total else np.argpartition(ham, m - 1)[:m]
    if mask is not None:
        cand = cand[mask[cand]]
    exact = np.full(total, -np.inf, dtype=np.float32)
    exact[cand] = matvec(vectors[cand], qv)
    return top(exact, n, positive_only=False)
