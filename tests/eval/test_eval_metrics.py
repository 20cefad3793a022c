"""Metric definitions on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shortlist.eval._metrics import mean, mrr_at_k, ndcg_at_k, percentile, recall_at_k


def test_recall_divides_by_min_k_gold() -> None:
    assert recall_at_k(["a", "b", "c"], ["b"], 1) == 0.0
    assert recall_at_k(["a", "b", "c"], ["b"], 2) == 1.0
    assert recall_at_k(["a", "b", "c"], ["a", "c"], 1) == 1.0  # |gold| > k: one hit fills k=1
    assert recall_at_k(["a", "b", "c"], ["a", "c", "z"], 5) == pytest.approx(2 / 3)
    assert recall_at_k([], ["a"], 5) == 0.0


def test_ndcg_binary_gains() -> None:
    assert ndcg_at_k(["x", "a"], ["a"], 10) == pytest.approx(1 / math.log2(3))
    expected = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["a", "x", "b"], ["a", "b"], 10) == pytest.approx(expected)
    assert ndcg_at_k(["a", "a", "b"], ["a", "b"], 10) == pytest.approx(expected)  # duplicates count once
    assert ndcg_at_k(["x"] * 10 + ["a"], ["a"], 10) == 0.0
    assert ndcg_at_k(["a", "b"], ["a", "b"], 10) == pytest.approx(1.0)


def test_mrr() -> None:
    assert mrr_at_k(["x", "y", "a"], ["a", "y"], 10) == pytest.approx(0.5)
    assert mrr_at_k(["x", "y", "a"], ["a"], 2) == 0.0


def test_undefined_for_empty_gold_or_bad_k() -> None:
    for fn in (recall_at_k, ndcg_at_k, mrr_at_k):
        with pytest.raises(ValueError):
            fn(["a"], [], 5)
        with pytest.raises(ValueError):
            fn(["a"], ["a"], 0)


def test_percentile_matches_numpy() -> None:
    xs = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 50, 90, 99, 100):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    assert percentile([], 50) is None
    assert mean([]) is None and mean([1.0, 2.0]) == 1.5
