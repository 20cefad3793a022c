"""Abstention calibration: the trade-off curve of a ranker's confidence threshold, and picking one.

A ranker abstains when its confidence (for the embedding and hybrid rankers: the best
cosine score) is below ``min_score``. On labelled queries, some with gold ids and some
with none, raising the threshold abstains correctly more often on the no-gold queries
and loses recall on the others. :func:`abstention_curve` measures both at every
threshold; :func:`pick_threshold` chooses one for a target; :func:`auroc` summarises how well
the confidence separates the two kinds of query, whatever the threshold.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from shortlist._types import Candidate, Query
from shortlist.errors import UsageError
from shortlist.rankers._base import Ranker

__all__ = ["CurvePoint", "abstention_curve", "auroc", "pick_threshold"]


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One threshold of the trade-off.

    Args:
        threshold: the ``min_score`` tried.
        abstention: share of no-gold queries on which the ranker abstains (correctly).
        recall: mean Recall@k over the queries with gold ids, counting abstentions as 0.
        false_abstention: share of queries with gold ids on which the ranker abstains.
    """

    threshold: float
    abstention: float
    recall: float
    false_abstention: float


def abstention_curve(
    ranker: Ranker,
    queries: Sequence[str | Query],
    golds: Sequence[Collection[str]],
    candidates: Sequence[Candidate],
    *,
    k: int = 5,
    thresholds: Iterable[float] | None = None,
) -> list[CurvePoint]:
    """Measure correct abstention vs Recall@k at each threshold (default: 41 steps over the range seen).

    Args:
        ranker: any ranker; its :meth:`~shortlist.rankers._base.Ranker.score_with_confidence` is used.
        queries: the query texts (or queries).
        golds: the relevant ids of each query (empty: no candidate fits).
        candidates: the catalog every query is ranked against.
        k: the cut-off of Recall@k.
        thresholds: the thresholds to try.

    Raises:
        ValueError: ``queries`` and ``golds`` differ in length, or the catalog is empty.
    """
    if len(queries) != len(golds):
        raise UsageError(f"{len(queries)} queries but {len(golds)} gold lists")
    if not candidates:
        raise UsageError("the catalog is empty")
    ids = [c.id for c in candidates]
    confidence = np.empty(len(queries))
    recall = np.zeros(len(queries))
    has_gold = np.array([bool(g) for g in golds])
    for i, (q, gold) in enumerate(zip(queries, golds, strict=True)):
        query = q if isinstance(q, Query) else Query(q)
        scores, conf = ranker.score_with_confidence(query, candidates)
        confidence[i] = float(np.max(conf))
        if gold:
            top = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:k]
            recall[i] = len(set(gold) & {ids[int(j)] for j in top}) / min(k, len(gold))
    if thresholds is None:
        thresholds = np.linspace(float(confidence.min()), float(confidence.max()), 41)
    points = []
    for t in thresholds:
        abstains = confidence < t
        points.append(
            CurvePoint(
                threshold=float(t),
                abstention=float(abstains[~has_gold].mean()) if (~has_gold).any() else float("nan"),
                recall=float(np.where(abstains, 0.0, recall)[has_gold].mean()) if has_gold.any() else float("nan"),
                false_abstention=float(abstains[has_gold].mean()) if has_gold.any() else float("nan"),
            )
        )
    return points


def pick_threshold(curve: Sequence[CurvePoint], *, min_recall: float) -> CurvePoint:
    """The point with the most correct abstention whose recall stays at or above ``min_recall``.

    Raises:
        ValueError: no point keeps that recall.
    """
    ok = [p for p in curve if p.recall >= min_recall]
    if not ok:
        raise UsageError(f"no threshold keeps recall >= {min_recall}")
    return max(ok, key=lambda p: (p.abstention, p.recall))


def auroc(positive: Iterable[float], negative: Iterable[float]) -> float:
    """The area under the ROC curve of a confidence: the chance that a query with a fitting
    candidate scores above one without (ties count one half; 0.5 is chance, 1.0 perfect).

    Args:
        positive: the best confidence of each query that has gold ids.
        negative: the best confidence of each query with none.

    Raises:
        ValueError: either side is empty or holds a NaN.
    """
    pos = np.asarray(list(positive), dtype=np.float64)
    neg = np.asarray(list(negative), dtype=np.float64)
    if pos.size == 0 or neg.size == 0:
        raise UsageError("auroc needs at least one positive and one negative query")
    if np.isnan(pos).any() or np.isnan(neg).any():
        raise UsageError("auroc got a NaN confidence")
    both = np.concatenate([pos, neg])
    order = np.argsort(both, kind="stable")
    ranks = np.empty(both.size, dtype=np.float64)
    ranks[order] = np.arange(1, both.size + 1, dtype=np.float64)
    # average the ranks of tied values (Mann-Whitney U)
    values, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    if values.size < both.size:
        sums = np.bincount(inverse, weights=ranks)
        ranks = (sums / counts)[inverse]
    u = float(ranks[: pos.size].sum()) - pos.size * (pos.size + 1) / 2
    return u / (pos.size * neg.size)
