"""Abstention calibration: the curve against a hand computation, picking a threshold, AUROC."""

from __future__ import annotations

import pytest

from shortlist._types import Candidate
from shortlist.rankers._calibration import CurvePoint, abstention_curve, auroc, pick_threshold
from shortlist.rankers._embedding import EmbeddingRanker
from shortlist.testing import HashEmbedder

CATALOG = [
    Candidate("weather", "weather", "weather forecast rain"),
    Candidate("email", "email", "send email message"),
]


def test_curve_matches_hand_computation() -> None:
    ranker = EmbeddingRanker(embedder=HashEmbedder(dim=512))
    queries = ["weather forecast rain", "send email message", "zebra xylophone quartz"]
    golds: list[list[str]] = [["weather"], ["email"], []]
    curve = abstention_curve(ranker, queries, golds, CATALOG, k=1, thresholds=[-2.0, 0.5, 2.0])
    # Identical texts score ~1.0; the unrelated query scores well below 0.5.
    assert curve[0] == CurvePoint(-2.0, 0.0, 1.0, 0.0)
    assert curve[1].abstention == 1.0 and curve[1].recall == pytest.approx(1.0)
    assert curve[2] == CurvePoint(2.0, 1.0, 0.0, 1.0)
    assert pick_threshold(curve, min_recall=0.9).threshold == 0.5
    with pytest.raises(ValueError):
        pick_threshold(curve, min_recall=1.5)


def test_bad_input_is_rejected() -> None:
    ranker = EmbeddingRanker(embedder=HashEmbedder())
    with pytest.raises(ValueError, match="gold"):
        abstention_curve(ranker, ["a"], [], CATALOG)
    with pytest.raises(ValueError, match="empty"):
        abstention_curve(ranker, ["a"], [["x"]], [])


def test_auroc_counts_pairs_and_halves_ties() -> None:
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auroc([0.1], [0.9]) == 0.0
    assert auroc([0.5, 0.5], [0.5]) == 0.5
    # pairs (pos, neg): (0.3, 0.2) win, (0.3, 0.3) tie, (0.1, 0.2) loss, (0.1, 0.3) loss -> 1.5 / 4
    assert auroc([0.3, 0.1], [0.2, 0.3]) == pytest.approx(0.375)


@pytest.mark.parametrize(("pos", "neg"), [([], [0.1]), ([0.1], []), ([float("nan")], [0.1])])
def test_auroc_refuses_empty_sides_and_nan(pos: list[float], neg: list[float]) -> None:
    with pytest.raises(ValueError, match="auroc"):
        auroc(pos, neg)
