"""Ranking metrics for tool retrieval: Recall@k, nDCG@k (binary gains), MRR@k, and percentiles.

Definitions (``ranked`` is the selector's list, best first; ``gold`` the relevant ids):

* Recall@k = |gold ∩ ranked[:k]| / min(k, |gold|) — so a single-gold query scores 1 when
  its tool is anywhere in the top k, and the metric can reach 1 whenever |gold| > k.
* nDCG@k = DCG@k / IDCG@k with gain 1 for a gold id, DCG = Σ_{i<k} gain_i / log2(i + 2),
  and IDCG the DCG of a perfect list with min(k, |gold|) hits.
* MRR@k = 1 / (1-based rank of the first gold id within the top k), 0 when none.

All three are undefined for an empty gold list (no tool applies); callers measure those
queries with the abstention metric instead.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from shortlist.errors import UsageError

__all__ = ["mean", "mrr_at_k", "ndcg_at_k", "percentile", "recall_at_k"]


def _check(gold: Collection[str], k: int) -> None:
    if k <= 0:
        raise UsageError("k must be positive")
    if not gold:
        raise UsageError("the metric is undefined for an empty gold list")


def recall_at_k(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Return |gold ∩ ranked[:k]| / min(k, |gold|).

    Raises:
        ValueError: ``k <= 0`` or empty ``gold``.
    """
    _check(gold, k)
    gold_set = set(gold)
    hits = len(gold_set.intersection(ranked[:k]))
    return hits / min(k, len(gold_set))


def ndcg_at_k(ranked: Sequence[str], gold: Collection[str], k: int = 10) -> float:
    """Return nDCG@k with binary gains (duplicates in ``ranked`` count once).

    Raises:
        ValueError: ``k <= 0`` or empty ``gold``.
    """
    _check(gold, k)
    gold_set = set(gold)
    seen: set[str] = set()
    dcg = 0.0
    for i, cid in enumerate(ranked[:k]):
        if cid in gold_set and cid not in seen:
            dcg += 1.0 / math.log2(i + 2)
        seen.add(cid)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold_set))))
    return dcg / idcg


def mrr_at_k(ranked: Sequence[str], gold: Collection[str], k: int = 10) -> float:
    """Return the reciprocal rank of the first gold id within the top ``k`` (0 when none).

    Raises:
        ValueError: ``k <= 0`` or empty ``gold``.
    """
    _check(gold, k)
    gold_set = set(gold)
    for i, cid in enumerate(ranked[:k]):
        if cid in gold_set:
            return 1.0 / (i + 1)
    return 0.0


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for no values."""
    return sum(values) / len(values) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) with linear interpolation (numpy's default), None when empty."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise UsageError("q must be between 0 and 100")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
