"""``ToolNarrower``'s offer policy, framework-free: ``stable`` decides at the first user message and only grows."""

from __future__ import annotations

import inspect

import pytest
from integration_helpers import FUNCTIONS, NAMES, SYSTEM, TURNS, Events

from shortlist._types import Candidate
from shortlist.errors import ConfigError
from shortlist.integrations._core import ToolNarrower, TurnLog, tool_candidate
from shortlist.testing import FailingSelector


def catalog(narrower: ToolNarrower) -> tuple[Candidate, ...]:
    def build() -> list[Candidate]:
        return [
            tool_candidate(
                f.__name__,
                f.__doc__,
                {"type": "object", "properties": {p: {"type": "string"} for p in inspect.signature(f).parameters}},
            )
            for f in FUNCTIONS
        ]

    return narrower.catalog(NAMES, build)


def conversation(*turns: str, system: str = SYSTEM, found: tuple[str, ...] = ()) -> TurnLog:
    conv = TurnLog().system(system)
    for turn in turns:
        conv.user(turn).other(f"an answer to {turn!r}")
    return conv.found_tools(found)


def test_stable_is_the_default_and_keeps_the_first_turns_tools() -> None:
    narrower = ToolNarrower(selector="bm25", k=3, horizon=1)
    assert narrower.policy == "stable"
    cands = catalog(narrower)
    offered = [narrower.choose(cands, conversation(*TURNS[: i + 1])).names for i in range(len(TURNS))]
    assert all(o == offered[0] for o in offered) and "get_weather" in offered[0] and len(offered[0]) <= 3
    grown = narrower.choose(cands, conversation(*TURNS, found=("convert_currency", "get_weather")))
    assert set(grown.names) == {*offered[0], "convert_currency"} and grown.found == ("convert_currency",)
    assert [n for n in NAMES if n in grown.names] == list(grown.names)  # the framework's order


def test_per_turn_re_selects_and_one_narrower_serves_concurrent_conversations() -> None:
    per_turn = ToolNarrower(selector="bm25", k=3, policy="per_turn")
    cands = catalog(per_turn)
    assert "book_flight" in per_turn.choose(cands, conversation(*TURNS[:2])).names
    stable = ToolNarrower(selector="bm25", k=3, horizon=1)
    cands = catalog(stable)
    a1 = stable.choose(cands, conversation(TURNS[0])).names
    b1 = stable.choose(cands, conversation(TURNS[3])).names
    assert stable.choose(cands, conversation(TURNS[0], TURNS[1])).names == a1
    assert stable.choose(cands, conversation(TURNS[3], TURNS[1])).names == b1 != a1


def test_a_short_history_lets_the_turns_top_tool_join_and_a_long_one_widens_to_the_whole_catalog() -> None:
    narrower = ToolNarrower(selector="bm25", k=3)
    cands = catalog(narrower)
    first = narrower.choose(cands, conversation(TURNS[0], system="")).names
    second = narrower.choose(cands, conversation(*TURNS[:2], system="")).names
    assert set(first) < set(second) and "book_flight" in second  # worth_changing: re-writing ~20 tokens is cheap
    everything = narrower.choose(cands, conversation(TURNS[0], system="x" * 40_000))
    assert everything.names == NAMES and not everything.search_tool  # whole_catalog_cheaper


def test_a_failing_selector_offers_every_tool_with_one_fallback_per_turn() -> None:
    events = Events()
    narrower = ToolNarrower(selector=FailingSelector(), on_event=events)
    cands = catalog(narrower)
    for _ in range(2):  # two model calls of the first turn
        choice = narrower.choose(cands, conversation(TURNS[0]))
        assert choice.names == NAMES and choice.fallback == "error" and not choice.search_tool
    assert len(events.named("selection.fallback")) == 1


async def test_achoose_agrees_with_choose() -> None:
    narrower = ToolNarrower(selector="bm25", k=3, horizon=1)
    cands = catalog(narrower)
    first = (await narrower.achoose(cands, conversation(TURNS[0]))).names
    assert (await narrower.achoose(cands, conversation(*TURNS[:3]))).names == first


@pytest.mark.parametrize(("policy", "message"), [("deferred", "history"), ("sometimes", "stable")])
def test_unsupported_policies_are_refused(policy: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ToolNarrower(selector="bm25", policy=policy)


@pytest.mark.parametrize("policy", ["stable", "per_turn"])
def test_a_search_from_a_conversation_leaves_out_what_the_model_has_and_pages_on(policy: str) -> None:
    narrower = ToolNarrower(selector="bm25", k=2, search_k=2, policy=policy, horizon=1)
    cands = catalog(narrower)
    conv = conversation("book a flight ticket to Rome")
    offered = narrower.choose(cands, conv).names
    assert "book_flight" in offered
    query = "book a flight ticket or a hotel room, get directions to the airport"
    whole = [c.id for c in narrower.search(cands, query)]
    assert set(whole) & set(offered)  # without the conversation the offered tools take result slots
    first = [c.id for c in narrower.search(cands, query, conv)]
    assert len(first) == 2 and not set(first) & set(offered) and "get_directions" in first
    # the result joined the conversation (found_in reads it back): asking again pages on
    again = conversation("book a flight ticket to Rome", found=tuple(first))
    second = [c.id for c in narrower.search(cands, query, again)]
    assert len(second) == 2 and not set(second) & {*offered, *first}
    assert narrower.search(cands, query, TurnLog()) == narrower.search(cands, query)  # no turn yet: everything
