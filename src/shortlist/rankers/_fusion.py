"""How the hybrid's score vectors become one ranking: the three fusions of its BM25 and embedding sides
(z-scores, scores, Reciprocal Rank Fusion) and their default BM25 weights, the tools a message names put
first, and a top ``k`` that covers every intent of a multi-request query.

Three fusions are offered. ``"score"`` (the hybrid's default) adds the BM25 score divided by the
turn's best with weight 0.2 to the cosine; ``"zscore"`` standardises each side over the
turn's candidates, ``z(dense) + bm25_weight * z(bm25)`` with ``bm25_weight`` 0.35, so the
weight means the same whatever the spread of either score; ``"rrf"`` is Reciprocal Rank
Fusion, ``Σ w / (k + rank)`` with ``k = 60`` (candidates sharing no term with the query get
no BM25 contribution).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from shortlist.errors import UsageError
from shortlist.rankers._base import Scores

__all__ = [
    "DEFAULT_BM25_WEIGHT",
    "Fusion",
    "cover",
    "fuse",
    "fusion_weights",
    "rank_named_first",
    "rrf_fuse",
    "score_fuse",
    "zscore",
    "zscore_fuse",
]

Fusion = Literal["zscore", "score", "rrf"]

#: The BM25 side's weight when none is given, per fusion.
DEFAULT_BM25_WEIGHT: dict[str, float] = {"zscore": 0.35, "score": 0.2, "rrf": 1.0}


def _ranks(scores: Scores) -> Scores:
    """1-based rank of every entry (ties broken by position)."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = np.arange(1, scores.size + 1, dtype=np.float64)
    return ranks


def zscore(x: Scores) -> Scores:
    """``(x - mean) / std`` over the entries (all zeros when they are all equal)."""
    if x.size == 0:
        return np.zeros(0, dtype=np.float64)
    std = float(x.std())
    return (x - float(x.mean())) / std if std > 0 else np.zeros_like(x, dtype=np.float64)


def rrf_fuse(
    bm25: Scores, dense: Scores, *, k: float = 60.0, bm25_weight: float = 1.0, dense_weight: float = 1.0
) -> Scores:
    """Reciprocal Rank Fusion of two score vectors (BM25 zeros contribute nothing)."""
    fused = dense_weight / (k + _ranks(dense))
    lexical = bm25_weight / (k + _ranks(bm25))
    return fused + np.where(bm25 > 0, lexical, 0.0)


def score_fuse(bm25: Scores, dense: Scores, *, bm25_weight: float = 0.2, dense_weight: float = 1.0) -> Scores:
    """``dense_weight * dense + bm25_weight * bm25 / max(bm25)`` (BM25 term 0 when nothing matched)."""
    best = float(bm25.max()) if bm25.size else 0.0
    lexical = bm25 / best if best > 0 else np.zeros_like(bm25)
    return dense_weight * dense + bm25_weight * lexical


def zscore_fuse(bm25: Scores, dense: Scores, *, bm25_weight: float = 0.35, dense_weight: float = 1.0) -> Scores:
    """``dense_weight * z(dense) + bm25_weight * z(bm25)``, each standardised over the candidates."""
    return dense_weight * zscore(dense) + bm25_weight * zscore(bm25)


def cover(fused: Scores, parts: Sequence[Scores], k: int) -> list[int]:
    """The top ``k`` indexes covering every part: the best by ``fused``, then the best of each part
    whose best is not taken yet, then the rest by ``fused``.

    Args:
        fused: the ranking scores.
        parts: one score vector per intent.
        k: how many indexes to return.
    """
    k = min(k, fused.size)
    by_fused = [int(i) for i in np.argsort(-fused, kind="stable")]
    taken: dict[int, None] = dict.fromkeys(by_fused[:1])
    for part in parts:
        if len(taken) >= k:
            break
        taken.setdefault(int(np.argmax(part)), None)
    for i in by_fused:
        if len(taken) >= k:
            break
        taken.setdefault(i, None)
    return list(taken)[:k]


def rank_named_first(fused: Scores, named: Mapping[int, int]) -> tuple[Scores, tuple[int, ...]]:
    """``fused`` with the named candidates above all others (longer matches first, then by score)."""
    if not named:
        return fused, ()
    out = np.array(fused, dtype=np.float64)
    finite = out[np.isfinite(out)]  # candidates masked out (-inf) stay out, and set no offset
    offset = float(finite.max() - finite.min()) + 1.0 if finite.size else 1.0
    for i, length in named.items():
        out[i] = fused[i] + offset * length
    ids = tuple(sorted(named, key=lambda i: -out[i]))
    return out, ids


def fusion_weights(
    fusion: str, bm25_weight: float | None, dense_weight: float, rrf_k: float
) -> tuple[float, float, float]:
    """A fusion's checked ``(bm25_weight, dense_weight, rrf_k)``; ``bm25_weight`` None is the fusion's default.

    Raises:
        UsageError: an unknown fusion, a negative weight or a non-positive ``rrf_k``.
    """
    if fusion not in DEFAULT_BM25_WEIGHT:
        raise UsageError(f"fusion must be 'zscore', 'score' or 'rrf', got {fusion!r}")
    if rrf_k <= 0:
        raise UsageError("rrf_k must be positive")
    bm25 = float(bm25_weight if bm25_weight is not None else DEFAULT_BM25_WEIGHT[fusion])
    if bm25 < 0 or dense_weight < 0:
        raise UsageError("fusion weights must be >= 0")
    return bm25, float(dense_weight), float(rrf_k)


def fuse(fusion: Fusion, bm25: Scores, dense: Scores, *, bm25_weight: float, dense_weight: float, k: float) -> Scores:
    """One BM25 and one embedding score vector fused by ``fusion`` (``k``: RRF's constant)."""
    if fusion == "rrf":
        return rrf_fuse(bm25, dense, k=k, bm25_weight=bm25_weight, dense_weight=dense_weight)
    if fusion == "zscore":
        return zscore_fuse(bm25, dense, bm25_weight=bm25_weight, dense_weight=dense_weight)
    return score_fuse(bm25, dense, bm25_weight=bm25_weight, dense_weight=dense_weight)
