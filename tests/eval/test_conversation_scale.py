"""The conversation replay's floor (``oracle``), ``cost_vs_oracle``, ``preloaded`` and the simulated model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from shortlist._types import Candidate
from shortlist.errors import ConfigError
from shortlist.eval import _conversations as conversations
from shortlist.eval._conversations import (
    STRATEGIES,
    CostModel,
    Simulation,
    name_words,
    run_conversation_eval,
)
from shortlist.eval._datasets import load_tools
from shortlist.offer import OfferPolicy, Prices, ToolSession
from shortlist.offer._policies import PREFETCH_QUERY
from shortlist.offer._search import SEARCH_TOOL_NAME
from shortlist.rankers._registry import create_builtin_selector
from shortlist.selection._cousage import CoUsage
from shortlist.selection._facade import Shortlist

CONV = Path(__file__).resolve().parents[1] / "data" / "conv_tiny"
ROW_KEYS = {
    "turn_recall",
    "complete_turns",
    "preloaded",
    "tools_per_turn",
    "tool_tokens_per_turn",
    "tool_block_changes",
    "model_calls_per_turn",
    "searches_per_turn",
    "cost",
    "cost_vs_oracle",
    "by_history",
    "intervals",
    "per_conversation",
}


class RecordingSession(ToolSession):
    """A session that remembers every search query it was asked."""

    queries: ClassVar[list[str]] = []

    def search(self, query: str, **kwargs: Any) -> tuple[Candidate, ...]:
        RecordingSession.queries.append(query)
        return super().search(query, **kwargs)


@pytest.fixture(scope="module")
def binding() -> Shortlist:
    return Shortlist(load_tools(CONV / "tools.jsonl"), selector=create_builtin_selector("bm25"))


def replay(
    binding: Shortlist,
    *,
    k: int = 2,
    prefetch: int = 0,
    directory: Path = CONV,
    **kwargs: Any,
) -> dict[str, Any]:
    RecordingSession.queries = []

    def make(policy: OfferPolicy, co_usage: CoUsage | None) -> ToolSession:
        return RecordingSession(
            binding,
            policy=policy,
            k=k,
            search_k=1,
            prefetch=prefetch if policy == "deferred" else 0,
            co_usage=co_usage,
        )

    kwargs.setdefault("histories", (0, 1000))
    return run_conversation_eval(directory, make, progress=False, **kwargs)


def test_report_keys_and_the_oracle_is_replayed_by_default(binding: Shortlist) -> None:
    report = replay(binding)
    assert list(report["strategies"]) == list(STRATEGIES) and STRATEGIES[-1] == "oracle"
    assert report["simulation"] == {
        "search_query": "message",
        "miss_rate": 0.0,
        "spurious_rate": 0.0,
        "seed": 0,
        "miss_cost": "call",
        "max_searches": 2,
    }
    for name, row in report["strategies"].items():
        assert set(row) == ROW_KEYS | (set() if name in ("all", "oracle") else {"loads"})
        assert set(row["cost_vs_oracle"]) == set(row["cost"]) == {"0", "1000"}
        assert {"preloaded", "searches_per_turn"} <= set(row["by_history"]["1000"])
    oracle = report["strategies"]["oracle"]["cost"]
    for row in report["strategies"].values():
        for h, ratio in row["cost_vs_oracle"].items():
            assert ratio == pytest.approx(row["cost"][h] / oracle[h], abs=1e-4)


def test_each_conversation_adds_up_to_the_figures_and_the_intervals_hold_them(binding: Shortlist) -> None:
    report = replay(binding)
    n, turns = report["conversations"], report["conversation_turns"]
    assert len(report["conversation_ids"]) == len(turns) == n and sum(turns) == report["turns"]
    assert report["intervals"] == {"level": 0.95, "draws": 2000, "seed": 0, "unit": "conversation"}
    for name, row in report["strategies"].items():
        per = row["per_conversation"]
        assert set(per["cost"]) == set(per["complete"]) == {"0", "1000"}
        for h, costs in per["cost"].items():
            assert len(costs) == n and sum(costs) / n == pytest.approx(row["cost"][h], abs=0.1)
            share = sum(per["complete"][h]) / sum(turns)
            assert share == pytest.approx(row["by_history"][h]["complete_turns"], abs=1e-4)
            assert all(0 <= c <= t for c, t in zip(per["complete"][h], turns, strict=True))
        low, high = row["intervals"]["complete_turns"]
        assert low <= row["complete_turns"] <= high, name
        for h, (low, high) in row["intervals"]["cost_vs_oracle"].items():
            assert low - 1e-3 <= row["cost_vs_oracle"][h] <= high + 1e-3, (name, h)
    assert report["strategies"]["oracle"]["intervals"]["cost_vs_oracle"]["0"] == [1.0, 1.0]
    assert "oracle" not in report  # asked for: among the strategies
    alone = replay(binding, strategies=("deferred",))
    assert list(alone["strategies"]) == ["deferred"]
    oracle = alone["oracle"]["per_conversation"]  # replayed for cost_vs_oracle, kept for eval diff
    assert oracle == report["strategies"]["oracle"]["per_conversation"]


@pytest.mark.parametrize(
    "sim",
    [Simulation(), Simulation(miss_rate=1.0, miss_cost="retry"), Simulation("words:2", 0.5, 0.5, 3, "retry")],
    ids=["obliging", "never-notices", "less-obliging"],
)
def test_the_oracle_is_complete_and_the_cheapest(binding: Shortlist, sim: Simulation) -> None:
    report = replay(binding, simulation=sim)
    rows = report["strategies"]
    oracle = rows["oracle"]
    assert oracle["turn_recall"] == oracle["complete_turns"] == oracle["preloaded"] == 1.0
    assert oracle["searches_per_turn"] == 0.0 and oracle["tool_block_changes"] == 0.0
    assert oracle["model_calls_per_turn"] == 1.0
    for name, row in rows.items():
        for h in ("0", "1000"):
            assert oracle["cost"][h] <= row["cost"][h], (name, h)
            assert row["cost_vs_oracle"][h] >= 1.0


class Chars:
    """A token counter that counts characters (so a cost can be computed by hand)."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)


def test_oracle_cost_by_hand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty tools block; the tool enters the history once, as an exchange carrying its definition."""
    monkeypatch.setattr(conversations, "default_counter", Chars)
    tool = {"id": "mv", "name": "mv", "description": "Move a file."}
    (tmp_path / "tools.jsonl").write_text(json.dumps(tool) + "\n")
    call = {"name": "mv", "arguments": {}}
    turns = [{"user": "move it", "calls": [call]}, {"user": "again", "calls": [call]}]
    (tmp_path / "conversations.jsonl").write_text(json.dumps({"cid": "c", "turns": turns}) + "\n")
    binding = Shortlist(load_tools(tmp_path / "tools.jsonl"), selector=create_builtin_selector("bm25"))
    model = CostModel(Prices(1.25, 0.1), system_tokens=100, result_tokens=10)
    report = replay(binding, directory=tmp_path, strategies=["oracle"], histories=[0], cost_model=model)

    def size(message: dict[str, Any]) -> int:
        return len(json.dumps(message, ensure_ascii=False, default=str))

    definition = json.dumps({"description": "Move a file.", "name": "mv"}, ensure_ascii=False, sort_keys=True)
    ask = {"role": "assistant", "tool_calls": [{"name": SEARCH_TOOL_NAME, "arguments": {"query": PREFETCH_QUERY}}]}
    exchange = size(ask) + size({"role": "tool", "content": [definition]})
    first = 100 + size({"role": "user", "content": "move it"}) + exchange
    reply = size({"role": "assistant", "tool_calls": [call]}) + 10
    second = first + reply + size({"role": "user", "content": "again"})  # no second exchange: already loaded
    expected = 1.25 * first + 0.1 * first + 1.25 * (second - first)
    assert report["strategies"]["oracle"]["cost"]["0"] == round(expected, 1)
    assert report["strategies"]["oracle"]["tool_tokens_per_turn"] == len(definition)


def test_cost_vs_oracle_without_the_oracle_row(binding: Shortlist) -> None:
    report = replay(binding, strategies=["all"], histories=[0])
    assert list(report["strategies"]) == ["all"]
    assert report["strategies"]["all"]["cost_vs_oracle"]["0"] > 1.0


def test_miss_rate_one_means_no_search(binding: Shortlist) -> None:
    searched = replay(binding, strategies=["deferred"])["strategies"]["deferred"]
    assert searched["searches_per_turn"] > 0 and RecordingSession.queries
    blind = replay(binding, strategies=["deferred"], simulation=Simulation(miss_rate=1.0))["strategies"]["deferred"]
    assert blind["searches_per_turn"] == 0.0 and blind["model_calls_per_turn"] == 1.0
    assert blind["complete_turns"] < searched["complete_turns"]
    assert blind["turn_recall"] == blind["preloaded"]  # nothing became callable after the offer
    assert RecordingSession.queries == []


def test_a_miss_is_not_free_with_retry(binding: Shortlist) -> None:
    blind = Simulation(miss_rate=1.0)
    call = replay(binding, strategies=["deferred", "all"], simulation=blind)["strategies"]
    retry = replay(binding, strategies=["deferred", "all"], simulation=Simulation(miss_rate=1.0, miss_cost="retry"))
    assert call["deferred"]["complete_turns"] < 1.0
    assert retry["strategies"]["deferred"]["cost"]["0"] > call["deferred"]["cost"]["0"]
    assert retry["strategies"]["deferred"]["model_calls_per_turn"] > 1.0
    assert retry["strategies"]["all"]["cost"] == call["all"]["cost"]  # complete turns never retry


def test_spurious_rate_searches_on_turns_that_need_nothing(binding: Shortlist) -> None:
    # k = 8: stable's first block is the whole catalog, so no turn needs a search
    quiet = replay(binding, k=8, strategies=["stable"])["strategies"]["stable"]
    assert quiet["searches_per_turn"] == 0.0 and quiet["preloaded"] == 1.0
    noisy = replay(binding, k=8, strategies=["stable"], simulation=Simulation(spurious_rate=1.0))
    row = noisy["strategies"]["stable"]
    assert row["searches_per_turn"] == 1.0 and row["model_calls_per_turn"] == 2.0
    assert row["cost"]["0"] > quiet["cost"]["0"]
    half = replay(binding, k=8, strategies=["stable"], simulation=Simulation(spurious_rate=0.5, seed=1))
    assert 0.0 < half["strategies"]["stable"]["searches_per_turn"] < 1.0


def test_search_query_modes_reach_the_search(binding: Shortlist) -> None:
    replay(binding, strategies=["deferred"], histories=[0])
    messages = set(RecordingSession.queries)
    users = {
        t["user"] for line in (CONV / "conversations.jsonl").read_text().splitlines() for t in json.loads(line)["turns"]
    }
    assert messages and messages <= users
    replay(binding, strategies=["deferred"], histories=[0], simulation=Simulation("words:2"))
    assert RecordingSession.queries and all(len(q.split()) <= 2 for q in RecordingSession.queries)
    assert {q for q in RecordingSession.queries} <= {" ".join(u.split()[:2]) for u in users}
    replay(binding, strategies=["deferred"], histories=[0], simulation=Simulation("name"))
    names = {name_words(t["id"]) for t in map(json.loads, (CONV / "tools.jsonl").read_text().splitlines())}
    assert RecordingSession.queries and set(RecordingSession.queries) <= names


def test_preloaded_counts_only_what_was_callable_before_a_search(binding: Shortlist) -> None:
    rows = replay(binding, strategies=["all", "deferred"])["strategies"]
    assert rows["all"]["preloaded"] == 1.0
    assert rows["deferred"]["preloaded"] < rows["deferred"]["turn_recall"]  # the searches found the rest
    prefetched = replay(binding, prefetch=3, strategies=["deferred"])["strategies"]["deferred"]
    assert prefetched["preloaded"] > rows["deferred"]["preloaded"]  # prefetched tools count as preloaded


def test_seeded_draws_are_reproducible(binding: Shortlist) -> None:
    sims = [Simulation(miss_rate=0.5, spurious_rate=0.5, seed=s) for s in (0, 0, 1, 2, 3)]
    reports = [replay(binding, strategies=["deferred"], histories=[0], simulation=x)["strategies"] for x in sims]
    assert reports[0] == reports[1]
    assert any(r != reports[0] for r in reports[2:])


def test_simulation_query_and_draws() -> None:
    user = "please  move the report into the archive"
    assert Simulation().query(user, "mv") == user
    assert Simulation("words:3").query(user, "mv") == "please move the"
    assert Simulation("words:30").query(user, "mv") == " ".join(user.split())
    assert Simulation("name").query(user, "Search_Car_Location") == "search car location"
    assert Simulation("name").query(user, None) == user
    assert name_words("getWeatherForecast") == "get weather forecast"
    assert name_words("Buses.FindBus") == "buses find bus"
    assert name_words("HTTPRequest_v2") == "http request v2"
    assert not Simulation(miss_rate=0.0).unnoticed("c", 0, "mv")
    assert Simulation(miss_rate=1.0).unnoticed("c", 0, "mv")
    assert Simulation(spurious_rate=1.0).spurious("c", 0) and not Simulation().spurious("c", 0)
    draws = [Simulation(miss_rate=0.5, seed=7).unnoticed("c", t, "mv") for t in range(200)]
    assert draws == [Simulation(miss_rate=0.5, seed=7).unnoticed("c", t, "mv") for t in range(200)]
    assert 60 < sum(draws) < 140


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"search_query": "words:0"}, "words:N"),
        ({"search_query": "words:x"}, "words:N"),
        ({"search_query": "tool"}, "search query"),
        ({"miss_rate": 1.5}, "miss rate"),
        ({"spurious_rate": -0.1}, "spurious rate"),
        ({"miss_cost": "free"}, "miss cost"),
    ],
)
def test_bad_simulation_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Simulation(**kwargs)


def test_a_grown_catalog_replaces_the_datasets(binding: Shortlist) -> None:
    extra = Candidate("translate_text", description="Translate text between languages", metadata={"suite": "x"})
    grown: Sequence[Candidate] = (*binding.catalog, extra)
    plain = replay(binding, strategies=["all"], histories=[0])
    more = replay(binding, strategies=["all"], histories=[0], catalog=grown)
    assert more["catalog_tokens"] > plain["catalog_tokens"]
    assert more["strategies"]["all"]["tools_per_turn"] == plain["strategies"]["all"]["tools_per_turn"] + 1


def test_learned_examples_rank_later_conversations_and_never_earlier_ones(tmp_path: Path) -> None:
    """``learn_examples``: a feedback log records each turn, and a conversation ranks with the examples of
    the ones replayed before it; each pass (history size) starts from an empty log."""
    tools = [
        {"id": "start_engine", "name": "start_engine", "description": "start the engine"},
        {"id": "get_weather", "name": "get_weather", "description": "weather forecast for a city"},
    ]
    (tmp_path / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tools))
    turn = {"user": "ignite my vehicle", "calls": [{"name": "start_engine", "arguments": {}}]}
    (tmp_path / "conversations.jsonl").write_text(
        "".join(json.dumps({"cid": f"c{i}", "turns": [turn]}) + "\n" for i in range(2))
    )
    sl = Shortlist(load_tools(tmp_path / "tools.jsonl"), selector=create_builtin_selector("bm25"))
    plain = replay(sl, prefetch=1, directory=tmp_path, strategies=["deferred"])
    learned = replay(sl, prefetch=1, directory=tmp_path, strategies=["deferred"], learn_examples=True)
    assert plain["learn"] == {"co_usage": True, "examples": False}
    assert learned["learn"] == {"co_usage": True, "examples": True}
    # no word of "ignite my vehicle" is in a description: only the first conversation's example finds it
    assert plain["strategies"]["deferred"]["preloaded"] == 0.0
    for size in ("0", "1000"):  # the second conversation only, in each pass: nothing leaks across passes
        assert learned["strategies"]["deferred"]["by_history"][size]["preloaded"] == 0.5
