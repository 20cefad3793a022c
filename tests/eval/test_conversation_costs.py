"""The conversation replay prices the whole prompt: provider presets, grounding placement, reductions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shortlist.cli._eval import PRICE_PRESET_NAMES
from shortlist.errors import ConfigError
from shortlist.eval import _conversations as conversations
from shortlist.eval._conversations import CostModel, run_conversation_eval
from shortlist.eval._datasets import load_tools
from shortlist.offer import PRICE_PRESETS, OfferPolicy, Prices, ToolSession
from shortlist.offer._policies import PREFETCH_QUERY
from shortlist.offer._search import SEARCH_TOOL_NAME
from shortlist.rankers._registry import create_builtin_selector
from shortlist.selection._cousage import CoUsage
from shortlist.selection._facade import Shortlist

CONV = Path(__file__).resolve().parents[1] / "data" / "conv_tiny"


# -- the presets ---------------------------------------------------------------------------------
def test_presets_carry_the_providers_rules() -> None:
    assert tuple(PRICE_PRESETS) == PRICE_PRESET_NAMES  # the CLI's choices are the presets
    assert Prices.preset("anthropic-5m") == Prices(1.25, 0.1, 1024, "anthropic-5m")
    assert Prices.preset("anthropic-1h").cache_write == 2.0
    assert Prices.preset("openai-gpt-5.6").cache_write == 1.25
    for free in ("openai-legacy", "gemini-implicit"):  # writes billed at the base price
        assert Prices.preset(free).cache_write == 1.0
    for name, prices in PRICE_PRESETS.items():
        assert prices.name == name and prices.cache_read == 0.1 and prices.min_prefix == 1024
        assert prices.to_dict()["preset"] == name


def test_an_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown price preset 'azure'.*anthropic-5m.*gemini-implicit"):
        Prices.preset("azure")


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_min_prefix_must_be_a_token_count(bad: Any) -> None:
    with pytest.raises(ConfigError, match="min_prefix"):
        Prices(min_prefix=bad)


def test_below_the_minimum_prefix_nothing_is_cached() -> None:
    prices = Prices(1.25, 0.1, min_prefix=1000)
    assert prices.call(999, 999) == 999.0  # too short to cache: the base price, no write premium
    assert prices.call(2000, 500) == 2000 * 1.25  # a cached prefix below the minimum was never cached
    assert prices.call(2000, 1500) == pytest.approx(1500 * 0.1 + 500 * 1.25)
    assert Prices().call(999, 999) == pytest.approx(99.9)  # no minimum: the old rule


# -- the replay ----------------------------------------------------------------------------------
class Chars:
    """A token counter that counts characters (so a cost can be computed by hand)."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)


def _size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False, default=str))


def _replay(directory: Path, model: CostModel, strategies: list[str], histories: list[int]) -> dict[str, Any]:
    binding = Shortlist(load_tools(directory / "tools.jsonl"), selector=create_builtin_selector("bm25"))

    def make(policy: OfferPolicy, co_usage: CoUsage | None) -> ToolSession:
        return ToolSession(binding, policy=policy, k=2, search_k=1, co_usage=co_usage)

    return run_conversation_eval(
        directory, make, strategies=strategies, histories=histories, cost_model=model, progress=False
    )


@pytest.fixture
def two_turns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(conversations, "default_counter", Chars)
    (tmp_path / "tools.jsonl").write_text(json.dumps({"id": "mv", "name": "mv", "description": "Move a file."}) + "\n")
    call = {"name": "mv", "arguments": {}}
    turns = [{"user": "move it", "calls": [call]}, {"user": "again", "calls": [call]}]
    (tmp_path / "conversations.jsonl").write_text(json.dumps({"cid": "c", "turns": turns}) + "\n")
    return tmp_path


def _oracle_sizes() -> tuple[int, int, int, int]:
    definition = json.dumps({"description": "Move a file.", "name": "mv"}, ensure_ascii=False, sort_keys=True)
    ask = {"role": "assistant", "tool_calls": [{"name": SEARCH_TOOL_NAME, "arguments": {"query": PREFETCH_QUERY}}]}
    exchange = _size(ask) + _size({"role": "tool", "content": [definition]})
    reply = _size({"role": "assistant", "tool_calls": [{"name": "mv", "arguments": {}}]}) + 10
    return _size({"role": "user", "content": "move it"}), _size({"role": "user", "content": "again"}), exchange, reply


def test_grounding_in_the_history_is_appended_and_read_back(two_turns: Path) -> None:
    g = 50
    model = CostModel(Prices(1.25, 0.1), system_tokens=100, grounding_tokens=g, placement="history")
    report = _replay(two_turns, model, ["oracle"], [0])
    u1, u2, exchange, reply = _oracle_sizes()
    first = 100 + u1 + g + exchange
    second = first + reply + u2 + g  # the second turn's grounding is appended too
    expected = 1.25 * first + 0.1 * first + 1.25 * (second - first)
    assert report["strategies"]["oracle"]["cost"]["0"] == round(expected, 1)
    assert report["context"]["placement"] == "history" and report["context"]["grounding_tokens"] == g


def test_grounding_in_the_system_prompt_rewrites_everything_behind_the_tools(two_turns: Path) -> None:
    g = 50
    model = CostModel(Prices(1.25, 0.1), system_tokens=100, grounding_tokens=g, placement="system")
    report = _replay(two_turns, model, ["oracle"], [0])
    u1, u2, exchange, reply = _oracle_sizes()
    first = 100 + g + u1 + exchange
    second = 100 + g + u1 + exchange + reply + u2  # another system prompt: nothing after the (empty) tools is read
    assert report["strategies"]["oracle"]["cost"]["0"] == round(1.25 * first + 1.25 * second, 1)


def test_without_context_both_placements_cost_what_the_replay_always_did(two_turns: Path) -> None:
    base = _replay(two_turns, CostModel(Prices(1.25, 0.1), system_tokens=100), ["oracle", "all"], [0, 500])
    system = CostModel(Prices(1.25, 0.1), system_tokens=100, placement="system")
    assert _replay(two_turns, system, ["oracle", "all"], [0, 500])["strategies"] == base["strategies"]
    assert "context" not in base and "prices" not in base


def test_system_placement_costs_more_on_the_conversation_set() -> None:
    reports = {
        placement: _replay(
            CONV,
            CostModel(Prices.preset("anthropic-5m"), grounding_tokens=500, memory_tokens=100, placement=placement),
            ["deferred", "all"],
            [20_000],
        )
        for placement in ("history", "system")
    }
    assert reports["history"]["prices"]["preset"] == "anthropic-5m"
    for strategy in ("deferred", "all"):
        appended = reports["history"]["strategies"][strategy]["cost"]["20000"]
        system = reports["system"]["strategies"][strategy]["cost"]["20000"]
        assert appended < 0.6 * system, strategy


def test_a_reduction_rewrites_the_history_and_is_counted(two_turns: Path) -> None:
    u1, u2, exchange, reply = _oracle_sizes()
    first = 100 + 1000 + u1 + exchange
    budget = 1000 + u1 + exchange + reply + u2 - 1  # the second turn starts one token over the budget
    model = CostModel(Prices(1.25, 0.1), system_tokens=100, history_budget=budget, low_water=0.5)
    report = _replay(two_turns, model, ["oracle"], [1000])
    row = report["strategies"]["oracle"]
    assert row["by_history"]["1000"]["reductions"] == 1.0
    second = 100 + budget // 2  # reduced to the low-water mark; the tools block (empty) and system prompt read
    assert row["cost"]["1000"] == round(1.25 * first + 0.1 * 100 + 1.25 * (second - 100), 1)
    assert report["context"]["history_budget"] == budget


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grounding_tokens": -1}, "grounding tokens"),
        ({"memory_tokens": 1.5}, "memory tokens"),
        ({"placement": "user"}, "placement must be one of history, system"),
        ({"history_budget": 0}, "history budget"),
        ({"low_water": 0}, "low water"),
        ({"low_water": 1.5}, "low water"),
    ],
)
def test_bad_cost_model_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CostModel(**kwargs)


def test_the_text_table_names_the_preset_and_the_context(two_turns: Path) -> None:
    from shortlist.cli._eval_output import conversation_table as _conversation_table

    model = CostModel(Prices.preset("gemini-implicit"), grounding_tokens=500, placement="system", history_budget=9000)
    text = _conversation_table(_replay(two_turns, model, ["all"], [0]), [0])
    assert "prices gemini-implicit: writes 1x, reads 0.1x, minimum cacheable prefix 1,024 tokens" in text
    assert "context a turn: 500 grounding + 0 memory tokens in the system; history budget 9,000" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    plain = _conversation_table(_replay(two_turns, CostModel(), ["all"], [0]), [0])
    assert "prices" not in plain and "context a turn" not in plain
