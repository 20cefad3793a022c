"""Bootstrap intervals over conversations, and two replays compared conversation by conversation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shortlist.errors import ConfigError
from shortlist.eval._intervals import DRAWS, diff_reports, intervals_of, pooled, ranking_intervals, resamples


def report(costs: list[float], oracle: list[float], complete: list[int], turns: list[int]) -> dict[str, Any]:
    """A replay's JSON as ``run_conversation_eval`` writes it, reduced to what ``diff`` reads."""
    ids = [f"c{i}" for i in range(len(costs))]
    return {
        "conversation_ids": ids,
        "conversation_turns": turns,
        "strategies": {
            "deferred": {"per_conversation": {"cost": {"0": costs}, "complete": {"0": complete}}},
            "oracle": {"per_conversation": {"cost": {"0": oracle}, "complete": {"0": turns}}},
        },
    }


def test_resamples_are_seeded_and_shaped() -> None:
    a, b, c = resamples(7, 1), resamples(7, 1), resamples(7, 2)
    assert a.shape == (DRAWS, 7) and a.min() >= 0 and a.max() <= 6
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ConfigError, match="at least one conversation"):
        resamples(0, 0)
    with pytest.raises(ConfigError, match="draws must be positive"):
        resamples(3, 0, draws=0)


def test_an_interval_is_a_ratio_of_sums_and_holds_the_figure() -> None:
    rng = np.random.default_rng(3)
    oracle = rng.uniform(1000, 3000, 80).round(1).tolist()
    costs = [o * f for o, f in zip(oracle, rng.uniform(1.2, 2.6, 80), strict=True)]
    turns = rng.integers(2, 6, 80).tolist()
    complete = [t - (i % 9 == 0) for i, t in enumerate(turns)]
    per = {"cost": {"0": costs}, "complete": {"0": complete}}
    out = intervals_of(per, {"cost": {"0": oracle}}, turns, resamples(80, 0), "0")
    ratio = sum(costs) / sum(oracle)
    low, high = out["cost_vs_oracle"]["0"]
    assert low < ratio < high and high - low < 0.4
    low, high = out["complete_turns"]
    assert low < sum(complete) / sum(turns) < high <= 1.0
    # the same cost for every conversation: nothing to resample
    flat = intervals_of({"cost": {"0": [2.0] * 5}, "complete": {"0": [1] * 5}}, {"cost": {"0": [1.0] * 5}}, [1] * 5,
                        resamples(5, 0), "0")  # fmt: skip
    assert flat == {"complete_turns": [1.0, 1.0], "cost_vs_oracle": {"0": [2.0, 2.0]}}


def test_an_oracle_that_costs_nothing_has_no_interval() -> None:
    out = intervals_of({"cost": {"0": [1.0, 2.0]}, "complete": {"0": [1, 1]}}, {"cost": {"0": [0.0, 0.0]}}, [1, 1],
                       resamples(2, 0), "0")  # fmt: skip
    assert out["cost_vs_oracle"]["0"] is None


def test_a_small_change_on_every_conversation_is_clear_though_the_sets_spread_wide() -> None:
    # conversations of very different difficulty: each run's own interval is wide (+-10%), yet every
    # conversation got 2% cheaper, which the paired draws see
    rng = np.random.default_rng(0)
    oracle = rng.uniform(1000, 3000, 100).tolist()
    costs = [o * f for o, f in zip(oracle, rng.uniform(1.0, 3.0, 100), strict=True)]
    turns, complete = [4] * 100, [4] * 100
    before = report(costs, oracle, complete, turns)
    after = report([c * 0.98 for c in costs], oracle, complete, turns)
    own = intervals_of(before["strategies"]["deferred"]["per_conversation"], {"cost": {"0": oracle}}, turns,
                       resamples(100, 0), "0")  # fmt: skip
    low, high = own["cost_vs_oracle"]["0"]
    assert high - low > 0.2  # one run alone cannot tell a 2% change
    diff = diff_reports(before, after)
    fig = diff["cost_vs_oracle"]["0"]
    assert fig["difference"] == pytest.approx(-0.02 * fig["before"], abs=1e-3)
    assert fig["clear"] and fig["interval"][1] < 0
    assert diff["complete_turns"] == {
        "before": 1.0,
        "after": 1.0,
        "difference": 0.0,
        "interval": [0.0, 0.0],
        "clear": False,
    }
    assert (diff["strategy"], diff["conversations"], diff["level"], diff["draws"]) == ("deferred", 100, 0.95, DRAWS)


def test_costs_moved_between_conversations_are_not_a_change() -> None:
    # the same costs, each on another conversation: the whole set's figure is unchanged and the
    # paired draws spread on both sides of zero
    oracle = [1000.0] * 40
    costs = [1500.0 + 25 * i for i in range(40)]
    turns = [3] * 40
    before = report(costs, oracle, [3] * 40, turns)
    after = report(costs[::-1], oracle, [3] * 39 + [2], turns)
    fig = diff_reports(before, after)["cost_vs_oracle"]["0"]
    assert fig["difference"] == 0.0 and not fig["clear"]
    low, high = fig["interval"]
    assert low < 0 < high
    lost = diff_reports(before, after)["complete_turns"]
    assert lost["difference"] == pytest.approx(-1 / 120, abs=1e-4) and not lost["clear"]


def test_reports_that_cannot_be_compared_are_refused_with_the_reason() -> None:
    base = report([2.0, 3.0], [1.0, 1.0], [1, 1], [1, 1])
    other = report([2.0, 3.0, 4.0], [1.0, 1.0, 1.0], [1, 1, 1], [1, 1, 1])
    with pytest.raises(ConfigError, match="different conversations"):
        diff_reports(base, other)
    renamed = report([2.0, 3.0], [1.0, 1.0], [1, 1], [1, 1])
    renamed["conversation_ids"] = ["c0", "x9"]
    with pytest.raises(ConfigError, match="'c1' / 'x9'"):
        diff_reports(base, renamed)
    old = {"strategies": {"deferred": {"cost": {"0": 4000.0}}, "oracle": {"cost": {"0": 2000.0}}}}
    with pytest.raises(ConfigError, match="no per-conversation figures"):
        diff_reports(old, base)
    with pytest.raises(ConfigError, match=r"no 'stable' strategy.*deferred, oracle"):
        diff_reports(base, base, "stable")
    elsewhere = report([2.0, 3.0], [1.0, 1.0], [1, 1], [1, 1])
    for row in elsewhere["strategies"].values():
        row["per_conversation"]["cost"] = {"20000": row["per_conversation"]["cost"]["0"]}
    with pytest.raises(ConfigError, match="no history size in common"):
        diff_reports(base, elsewhere)


def ranking(values: list[float], qids: list[str] | None = None, selector: str = "hybrid") -> dict[str, Any]:
    """A tool-retrieval run's JSON, reduced to what ``diff`` reads (Recall@5 the same as nDCG@10)."""
    qids = qids or [f"q{i}" for i in range(len(values))]
    return {"selector": selector, "per_query": {"qids": qids, "ndcg@10": values, "recall@5": values}}


def test_two_rankings_are_compared_query_by_query() -> None:
    rng = np.random.default_rng(1)
    before = rng.uniform(0, 1, 200).round(4).tolist()
    better = [min(1.0, v + 0.02) for v in before]  # every query a little better
    diff = diff_reports(ranking(before), ranking(better, selector="bm25"))
    assert diff["kind"] == "ranking" and diff["selector"] == ["hybrid", "bm25"] and diff["queries"] == 200
    fig = diff["ndcg@10"]
    assert fig["clear"] and fig["interval"][0] > 0 and 0.015 < fig["difference"] <= 0.02
    shuffled = diff_reports(ranking(before), ranking(before[::-1]))["recall@5"]  # the same values moved around
    assert shuffled["difference"] == 0.0 and not shuffled["clear"]
    own = ranking_intervals(ranking(before)["per_query"])
    assert own["ndcg@10"][0] < fig["before"] < own["ndcg@10"][1] and own["unit"] == "query"
    assert ranking_intervals({"qids": [], "ndcg@10": [], "recall@5": []})["recall@5"] is None


def test_rankings_that_cannot_be_compared_are_refused() -> None:
    base = ranking([0.5, 1.0])
    with pytest.raises(ConfigError, match="different queries"):
        diff_reports(base, ranking([0.5, 1.0], ["q0", "q9"]))
    with pytest.raises(ConfigError, match="several selectors"):
        diff_reports({"compare": {"bm25": base}}, base)
    with pytest.raises(ConfigError, match="no per-query figures"):
        diff_reports(base, {"selector": "bm25", "ndcg@10": 0.5})
    conversation = report([2.0], [1.0], [1], [1])
    with pytest.raises(ConfigError, match="cannot compare a ranking report with a conversation report"):
        diff_reports(base, conversation)


def test_seeds_are_pooled_conversation_by_conversation() -> None:
    turns = [2, 4, 3]
    one = report([30.0, 50.0, 40.0], [10.0, 20.0, 10.0], [2, 3, 3], turns)
    two = report([34.0, 46.0, 40.0], [10.0, 20.0, 10.0], [1, 4, 3], turns)
    both = pooled([one, two])
    assert both["runs"] == 2 and both["conversation_ids"] == ["c0", "c1", "c2"]
    assert both["conversation_turns"] == [4, 8, 6]
    assert both["strategies"]["deferred"]["per_conversation"] == {
        "cost": {"0": [64.0, 96.0, 80.0]},
        "complete": {"0": [3, 7, 6]},
    }
    # the pooled figure is the mean of the runs' (the oracle is the same in each)
    diff = diff_reports(one, both)
    assert diff["runs"] == [1, 2] and diff["cost_vs_oracle"]["0"]["after"] == pytest.approx(120 / 40)
    assert diff["complete_turns"]["after"] == pytest.approx(16 / 18, abs=1e-4)
    # an oracle replayed but not asked for sits at the report's top level
    alone = report([30.0, 50.0, 40.0], [10.0, 20.0, 10.0], [2, 3, 3], turns)
    alone["oracle"] = alone["strategies"].pop("oracle")
    assert pooled([alone, alone])["strategies"]["oracle"]["per_conversation"]["cost"]["0"] == [20.0, 40.0, 20.0]
    assert diff_reports(alone, one)["cost_vs_oracle"]["0"]["difference"] == 0.0


def test_runs_that_cannot_be_pooled_are_refused() -> None:
    base = report([3.0, 4.0], [1.0, 1.0], [1, 1], [1, 1])
    with pytest.raises(ConfigError, match="no report to pool"):
        pooled([])
    with pytest.raises(ConfigError, match="different conversations"):
        pooled([base, report([3.0], [1.0], [1], [1])])
    other = report([3.0, 4.0], [1.0, 1.0], [1, 1], [1, 1])
    for row in other["strategies"].values():
        row["per_conversation"]["cost"]["20000"] = [5.0, 5.0]
    with pytest.raises(ConfigError, match="other history sizes"):
        pooled([base, other])
    with pytest.raises(ConfigError, match="no per-conversation figures"):
        pooled([{"strategies": {}}])
