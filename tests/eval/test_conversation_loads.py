"""Where a replay's loaded definitions went (``loads``): each prefetched or searched definition is
called on its turn, on a later one, or never, counted by prefetch slot, page position and companion."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from shortlist._events import Event
from shortlist._types import Candidate
from shortlist.eval._conversation_cases import ConversationCase, ConversationTurn
from shortlist.eval._conversations import run_conversation_eval
from shortlist.eval._datasets import load_tools
from shortlist.eval._loads import LoadTally, load_rows
from shortlist.offer import OfferPolicy, ToolSession
from shortlist.offer._search import ToolSearched
from shortlist.offer._state import Offer
from shortlist.rankers._registry import create_builtin_selector
from shortlist.selection._cousage import CoUsage
from shortlist.selection._facade import Shortlist

CONV = Path(__file__).resolve().parents[1] / "data" / "conv_tiny"


def case(*tools: str) -> ConversationCase:
    """A conversation whose turn i calls ``tools[i]`` (a space separates several)."""
    turns = tuple(ConversationTurn(f"turn {i}", tuple({"name": n} for n in t.split())) for i, t in enumerate(tools))
    return ConversationCase("c", turns)


def test_each_definition_is_called_now_later_or_never_by_where_it_came_from() -> None:
    tally = LoadTally()
    conv = case("a", "b", "c a")
    tokens = {"a": 10, "x": 20, "b": 30, "c": 40, "y": 5}
    tally.loaded("prefetch", conv, 0, ["a", "x", "b", "c"], ["c"], tokens)
    tally.loaded("search", conv, 1, ["y", "b", "c"], ["c"], tokens)
    out = tally.to_json(conversations=2)
    prefetch, search = out["prefetch"], out["search"]
    assert prefetch["by_slot"] == {
        "1": {"definitions": 1, "now": 1, "later": 0, "never": 0, "tokens": 10, "never_tokens": 0},
        "2": {"definitions": 1, "now": 0, "later": 0, "never": 1, "tokens": 20, "never_tokens": 20},
        "3": {"definitions": 1, "now": 0, "later": 1, "never": 0, "tokens": 30, "never_tokens": 0},
        "companion": {"definitions": 1, "now": 0, "later": 1, "never": 0, "tokens": 40, "never_tokens": 0},
    }
    assert (prefetch["definitions"], prefetch["now"], prefetch["later"], prefetch["never"]) == (4, 1, 2, 1)
    assert prefetch["tokens"] == 100 and prefetch["never_tokens"] == 20
    assert prefetch["never_tokens_per_conversation"] == 10.0
    assert list(search["by_position"]) == ["1", "2", "companion"]
    assert search["by_position"]["1"]["never"] == 1 and search["by_position"]["2"]["now"] == 1
    assert search["by_position"]["companion"]["later"] == 1  # c is called on the turn after
    assert search["never_tokens_per_conversation"] == 2.5


def test_a_tool_called_now_and_later_counts_once_as_now_and_slots_sort_as_numbers() -> None:
    tally = LoadTally()
    ids = [f"t{i}" for i in range(12)]
    conv = case("t0", "t0 t1")
    tally.loaded("prefetch", conv, 0, ids, [], {})
    slots = tally.to_json(1)["prefetch"]["by_slot"]
    assert list(slots) == [str(i) for i in range(1, 13)]  # "10" after "9", not after "1"
    assert slots["1"]["now"] == 1 and slots["1"]["later"] == 0
    assert slots["2"]["later"] == 1 and slots["12"]["never"] == 1


def test_nothing_loaded_reports_zeros_not_a_division_error() -> None:
    out = LoadTally().to_json(conversations=0)
    assert out["prefetch"]["definitions"] == 0 and out["prefetch"]["by_slot"] == {}
    assert out["search"]["never_tokens_per_conversation"] == 0.0


class Recording(ToolSession):
    """A session that keeps every offer and every search's event."""

    offers: ClassVar[list[Offer]] = []
    searches: ClassVar[list[ToolSearched]] = []

    def offer(self, *args: Any, **kwargs: Any) -> Offer:
        out = super().offer(*args, **kwargs)
        Recording.offers.append(out)
        return out

    def search(self, query: str, **kwargs: Any) -> tuple[Candidate, ...]:
        hooks = (*kwargs.pop("hooks", ()), self._heard)
        return super().search(query, hooks=hooks, **kwargs)

    @staticmethod
    def _heard(event: Event) -> None:
        if isinstance(event, ToolSearched):
            Recording.searches.append(event)


def replay(co_usage: CoUsage | None = None, **kwargs: Any) -> dict[str, Any]:
    binding = Shortlist(load_tools(CONV / "tools.jsonl"), selector=create_builtin_selector("bm25"))
    Recording.offers, Recording.searches = [], []

    def make(policy: OfferPolicy, learned: CoUsage | None) -> ToolSession:
        return Recording(
            binding,
            policy=policy,
            k=2,
            search_k=2,
            prefetch=1 if policy == "deferred" else 0,
            co_usage=co_usage or learned,
        )

    return run_conversation_eval(CONV, make, progress=False, histories=(0,), **kwargs)


def test_the_replay_counts_every_definition_it_loaded() -> None:
    report = replay(strategies=["deferred", "all", "oracle"])
    loads = report["strategies"]["deferred"]["loads"]
    prefetched = sum(len(o.prefetched) for o in Recording.offers)
    found = sum(len(e.found) for e in Recording.searches)
    assert prefetched > 0 and found > 0  # the tiny set exercises both
    assert loads["prefetch"]["definitions"] == prefetched
    assert loads["search"]["definitions"] == found
    for part in ("prefetch", "search"):
        p = loads[part]
        assert p["now"] + p["later"] + p["never"] == p["definitions"]
        assert 0 <= p["never_tokens"] <= p["tokens"]
    # the floor loads only what is called, and ``all`` loads nothing: neither has a ``loads``
    assert "loads" not in report["strategies"]["oracle"] and "loads" not in report["strategies"]["all"]


def test_co_usage_companions_are_counted_apart_and_named_by_the_offer_and_the_search() -> None:
    taught = CoUsage(min_count=1)
    for _ in range(3):
        taught.observe(["cd", "mv"])
        taught.observe(["grep", "cd"])
    report = replay(taught, strategies=["deferred"], learn=False)
    prefetch = report["strategies"]["deferred"]["loads"]["prefetch"]
    companions = sum(len(o.companions) for o in Recording.offers)
    assert companions > 0 and prefetch["by_slot"]["companion"]["definitions"] == companions
    for offer in Recording.offers:  # the companions are the last of the prefetched, never ranked ones
        n = len(offer.companions)
        assert n == 0 or offer.prefetched[-n:] == offer.companions
        assert offer.to_dict()["companions"] == list(offer.companions)
    for event in Recording.searches:
        n = len(event.companions)
        assert n == 0 or event.found[-n:] == event.companions


@pytest.mark.parametrize("policy", ["per_turn", "stable"])
def test_policies_that_never_prefetch_name_no_companions(policy: OfferPolicy) -> None:
    binding = Shortlist(load_tools(CONV / "tools.jsonl"), selector=create_builtin_selector("bm25"))
    taught = CoUsage(min_count=1)
    taught.observe(["cd", "mv"])
    session = ToolSession(binding, policy=policy, k=2, co_usage=taught)
    offer = session.offer("move the report into the archive folder")
    assert offer.prefetched == () and offer.companions == ()


def test_load_rows_prefer_the_default_strategy_and_say_when_nothing_was_loaded() -> None:
    tally = LoadTally()
    conv = case("a")
    tally.loaded("prefetch", conv, 0, ["a", "b"], [], {"a": 4, "b": 6})
    loads = tally.to_json(conversations=2)
    report: dict[str, Any] = {
        "default": "deferred",
        "conversations": 2,
        "strategies": {"all": {}, "stable": {"loads": loads}},
    }
    name, rows = load_rows(report) or ("", [])
    assert name == "stable"  # the default replayed nothing: the first strategy that loaded
    assert [(r.source, r.now, r.never, r.never_tokens_per_conversation) for r in rows] == [
        ("prefetch 1", 1, 0, 0.0),
        ("prefetch 2", 0, 1, 3.0),
    ]
    assert rows[1].never_share == 1.0
    report["strategies"]["deferred"] = {"loads": loads}
    assert (load_rows(report) or ("", []))[0] == "deferred"
    assert load_rows({"default": "deferred", "conversations": 1, "strategies": {"all": {}}}) is None
