"""Selection across a conversation: per_turn, stable and deferred offers, search, co-usage, state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shortlist._events import Event
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import ConfigError
from shortlist.offer import OfferState, Prices, ToolSession, decide_offer, search_tools
from shortlist.offer._policies import without_variants
from shortlist.offer._search import SEARCH_TOOL_NAME, ToolSearched
from shortlist.offer._state import MAX_STATE_COUNT, OfferChanged
from shortlist.selection._base import FunctionSelector, Selector
from shortlist.selection._cousage import CoUsage
from shortlist.selection._facade import Shortlist
from shortlist.testing import FailingSelector

CATALOG = tuple(
    Candidate(i, description=d)
    for i, d in [
        ("get_weather", "weather forecast for a city"),
        ("book_flight", "book a flight"),
        ("send_email", "send an email"),
        ("convert_currency", "convert money between currencies"),
        ("memory__recall", "recall a memory"),
    ]
)


def by_words(q: Query, cands: Sequence[Candidate]) -> list[str]:
    """Ids whose description shares a word with the query, best overlap first."""
    words = set(q.text.lower().split())
    scored = [(len(words & set(c.description.split())), c.id) for c in cands]
    return [i for s, i in sorted(scored, key=lambda t: (-t[0], t[1])) if s > 0]


def shortlist(events: list[Event] | None = None) -> Shortlist:
    return Shortlist(
        CATALOG, selector=FunctionSelector(by_words), on_event=events.append if events is not None else None
    )


def test_per_turn_narrows_every_turn_and_counts_changes() -> None:
    s = ToolSession(shortlist(), policy="per_turn", k=1)
    first = s.offer("weather in Oslo")
    assert first.block == ("get_weather", "memory__recall") and not first.changed and not first.search_tool
    second = s.offer("book a flight to Rome")
    assert second.block == ("book_flight", "memory__recall") and second.changed and second.reason == "narrowed"
    assert s.state.changes == 1 and s.state.turns == 2


def test_deferred_block_never_changes_and_search_loads_into_history() -> None:
    events: list[Event] = []
    s = ToolSession(shortlist(events), policy="deferred", k=1, search_k=1, prefetch=0, hot=1)
    first = s.offer("weather in Oslo")
    assert first.block == ("get_weather", "memory__recall") and first.search_tool
    assert set(first.deferred) == {"book_flight", "send_email", "convert_currency"}
    second = s.offer("book a flight to Rome")
    assert second.block == first.block and not second.changed and second.reason == "unchanged"
    found = s.search("book a flight")
    assert [c.id for c in found] == ["book_flight"]
    assert s.state.block == first.block and s.state.loaded == ("book_flight",)
    assert "book_flight" in s.state.available
    third = s.offer("and another flight")
    assert third.loaded == ("book_flight",) and not third.changed
    assert next(e for e in events if isinstance(e, ToolSearched)).found == ("book_flight",)
    assert not [e for e in events if isinstance(e, OfferChanged)]


def test_deferred_prefetches_two_by_default_two_more_before_a_call_and_zero_otherwise() -> None:
    deferred = ToolSession(shortlist(), policy="deferred")
    assert (deferred.prefetch, deferred.prefetch_max, deferred.prefetch_cold) == (2, 4, 2)
    assert ToolSession(shortlist(), policy="stable").prefetch == 0
    assert ToolSession(shortlist(), policy="per_turn").prefetch == 0
    with pytest.raises(ConfigError, match="prefetch_cold"):
        ToolSession(shortlist(), prefetch_cold=-1)


#: Eight tools scored alike: a flat top, so the prefetch loads as deep as its bounds allow.
#: Eight tools alike but for a word of their names (``send_0`` and ``send_1`` would be versions of one tool).
TIED = tuple(Candidate(f"send_{w}", description="send a message") for w in "abcdefgh")


def tied(q: Query, cands: Sequence[Candidate]) -> Selection:
    return Selection(tuple(c.id for c in cands), scores=(1.0,) * len(cands))


def test_before_the_first_call_the_prefetch_loads_more_and_widens_further() -> None:
    sl = Shortlist(TIED, selector=FunctionSelector(tied))
    cold = ToolSession(sl, prefetch=1, prefetch_max=2, prefetch_cold=2)
    assert len(cold.offer("send a message").prefetched) == 4  # nothing called: 1 + 2, widened up to 2 + 2
    warm = ToolSession(sl, prefetch=1, prefetch_max=2, prefetch_cold=2, state=OfferState(called=("send_h",)))
    assert len(warm.offer("send a message").prefetched) == 2  # a call is evidence: 1, widened up to 2


def test_no_prefetch_stays_no_prefetch_before_the_first_call() -> None:
    s = ToolSession(Shortlist(TIED, selector=FunctionSelector(tied)), prefetch=0, prefetch_cold=2)
    assert s.offer("send a message").prefetched == ()
    cold_off = ToolSession(
        Shortlist(TIED, selector=FunctionSelector(tied)), prefetch=1, prefetch_max=1, prefetch_cold=0
    )
    assert len(cold_off.offer("send a message").prefetched) == 1


#: Six tools scored alike, the 2nd and the 4th with long definitions (a long description: over 300
#: estimated tokens each, over both limits), the others short.
_LONG = "Look up an order by its id and return every field of it, line items and history included. " * 16
#: six distinct tools (their names differ in a word: ``order_1`` and ``order_3`` would be versions of one)
SIZED = tuple(
    Candidate(f"order_{i}", f"order_{'abcdef'[i]}", _LONG if i in (1, 3) else "look up an order") for i in range(6)
)


def test_the_deep_slots_leave_long_definitions_to_a_search() -> None:
    from shortlist._tokens import definition_tokens
    from shortlist.offer._policies import DEFAULT_PREFETCH_TOKENS, DefinitionsTrimmed

    assert definition_tokens(SIZED[1]) > DEFAULT_PREFETCH_TOKENS >= definition_tokens(SIZED[0])
    events: list[Event] = []
    sl = Shortlist(SIZED, selector=FunctionSelector(tied), on_event=events.append)
    # nothing called yet: 2 + 2 loaded, widened up to 4 + 2 on the flat top
    session = ToolSession(sl, prefetch=2, prefetch_max=4, prefetch_cold=2)
    assert session.prefetch_tokens == DEFAULT_PREFETCH_TOKENS
    offer = session.offer("look up my order")
    # the first two load whatever their size; after them the long order_3 is left out
    assert offer.prefetched == ("order_0", "order_1", "order_2", "order_4", "order_5")
    trimmed = [e for e in events if isinstance(e, DefinitionsTrimmed)]
    assert [(e.where, e.skipped, e.limit) for e in trimmed] == [("prefetch", ("order_3",), DEFAULT_PREFETCH_TOKENS)]
    assert trimmed[0].tokens == (definition_tokens(SIZED[3]),)
    assert "order_3" in offer.deferred  # a search still finds it
    assert session.search("order_3 look up an order") and "order_3" in session.state.loaded
    # None: any size; a limit of 0 keeps only the first prefetch tools
    any_size = ToolSession(sl, prefetch=2, prefetch_max=4, prefetch_cold=2, prefetch_tokens=None)
    assert any_size.offer("look up my order").prefetched == tuple(f"order_{i}" for i in range(6))
    none_deep = ToolSession(sl, prefetch=2, prefetch_max=4, prefetch_cold=2, prefetch_tokens=0)
    assert none_deep.offer("look up my order").prefetched == ("order_0", "order_1")


def test_a_search_page_after_its_first_result_leaves_long_definitions_to_the_next_search() -> None:
    from shortlist._tokens import definition_tokens
    from shortlist.offer._policies import DefinitionsTrimmed
    from shortlist.offer._search import DEFAULT_SEARCH_TOKENS

    assert definition_tokens(SIZED[1]) > DEFAULT_SEARCH_TOKENS >= definition_tokens(SIZED[0])
    events: list[Event] = []
    sl = Shortlist(SIZED, selector=FunctionSelector(tied), on_event=events.append)
    session = ToolSession(sl, prefetch=0, search_k=3)
    assert session.search_tokens == DEFAULT_SEARCH_TOKENS
    # the page is the tied ranking's first 3: order_0, order_1 (long), order_2
    assert [c.id for c in session.search("look up an order")] == ["order_0", "order_2"]
    trimmed = [e for e in events if isinstance(e, DefinitionsTrimmed)]
    assert [(e.where, e.skipped) for e in trimmed] == [("search", ("order_1",))]
    # the next search pages on: the long one comes first now, and the first result is any size
    assert [c.id for c in session.search("look up an order")] == ["order_1", "order_4"]  # order_3: long
    long_first = ToolSession(sl, prefetch=0, search_k=2)  # the ranking's own first, whatever its size
    long_first.state = OfferState(loaded=("order_0",))
    assert [c.id for c in long_first.search("look up an order")] == ["order_1", "order_2"]
    any_size = ToolSession(sl, prefetch=0, search_k=3, search_tokens=None)
    assert [c.id for c in any_size.search("look up an order")] == ["order_0", "order_1", "order_2"]


def test_a_negative_definition_size_limit_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="prefetch_tokens"):
        ToolSession(shortlist(), prefetch_tokens=-1)
    with pytest.raises(ConfigError, match="search_tokens"):
        ToolSession(shortlist(), search_tokens=-1)
    with pytest.raises(ConfigError, match="prefetch_tokens"):
        decide_offer(shortlist(), OfferState(), "x", policy="deferred", prefetch=2, prefetch_tokens=-1)
    with pytest.raises(ConfigError, match="search_tokens"):
        search_tools(shortlist(), OfferState(), "x", policy="deferred", search_tokens=-1)


def test_deferred_prefetch_loads_the_turns_top_tools_without_a_search() -> None:
    s = ToolSession(shortlist(), policy="deferred", k=1, prefetch=1, hot=1)
    s.offer("weather in Oslo")
    offer = s.offer("send an email to Ann")
    assert offer.prefetched == ("send_email",) and offer.loaded == ("send_email",)
    assert not offer.changed and offer.block == ("get_weather", "memory__recall")
    again = s.offer("send an email to Bob")
    assert again.prefetched == ()  # already loaded: nothing new enters the history


def test_deferred_prefetches_nothing_from_a_ranking_that_says_nothing() -> None:
    # BM25 on "thanks": no tool shares a word, every score is 0 and the order is arbitrary
    s = ToolSession(Shortlist(CATALOG, selector="bm25"), policy="deferred", k=2, prefetch=2)
    s.offer("weather in Oslo")
    idle = s.offer("thanks")
    assert idle.prefetched == () and idle.selection is not None and set(idle.selection.scores.values()) == {0.0}
    assert s.offer("send an email to Ann").prefetched[0] == "send_email"  # an informative ranking still loads


def test_stable_adds_found_tools_to_the_block_once_and_records_why() -> None:
    events: list[Event] = []
    s = ToolSession(shortlist(events), policy="stable", k=1, search_k=1)
    s.offer("weather in Oslo")
    big = 50_000  # a long history: re-writing it costs more than the search it saves
    assert not s.offer("book a flight to Rome", prefix_tokens=big).changed
    s.search("book a flight")
    assert s.state.block == ("get_weather", "memory__recall", "book_flight") and s.state.changes == 1
    changed = [e for e in events if isinstance(e, OfferChanged)]
    assert [(e.reason, e.added) for e in changed] == [("search", ("book_flight",))]


def test_stable_changes_on_a_short_prefix_when_the_top_tool_is_missing() -> None:
    s = ToolSession(shortlist(), policy="stable", k=1)
    s.offer("weather in Oslo")
    offer = s.offer("book a flight to Rome", prefix_tokens=10)
    assert offer.changed and offer.reason == "worth_changing" and "book_flight" in offer.block


def test_prices_rule() -> None:
    p = Prices()
    assert p.call(1000, 1000) == pytest.approx(100.0) and p.call(1000, 0) == pytest.approx(1250.0)
    assert not p.worth_changing(20_000, p_needed=1.0, round_trip_tokens=600)
    assert p.worth_changing(100, p_needed=1.0, round_trip_tokens=600)
    assert not p.worth_changing(100, p_needed=0.0, round_trip_tokens=600)


def test_state_round_trips_through_json_and_decides_the_same() -> None:
    a = ToolSession(shortlist(), policy="deferred", k=1, prefetch=1)
    a.offer("weather in Oslo")
    a.record_calls(["get_weather"])
    wire = json.loads(json.dumps(a.state.to_dict()))
    restored = OfferState.from_dict(wire)
    assert restored == a.state
    local = a.offer("send an email")
    remote = decide_offer(shortlist(), restored, "send an email", policy="deferred", k=1, prefetch=1)
    mine, theirs = local.to_dict(), remote.to_dict()
    mine["selection"].pop("elapsed_ms"), theirs["selection"].pop("elapsed_ms")
    assert theirs == mine


@pytest.mark.parametrize(
    "bad",
    [{"block": "get_weather"}, {"block": [1]}, {"turns": -1}, {"changes": True}, {"loaded": None}],
)
def test_bad_state_is_a_config_error(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="invalid offer state"):
        OfferState.from_dict(bad)


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="offer policy"):
        ToolSession(shortlist(), policy="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ToolSession(shortlist(), search_k=0)
    with pytest.raises(ConfigError):
        ToolSession(shortlist(), prefetch=-1)


def test_a_failing_selector_never_floods_the_history_on_search() -> None:
    events: list[Event] = []
    s = ToolSession(
        Shortlist(CATALOG, selector=FailingSelector(RuntimeError("ranker down")), on_event=events.append),
        policy="deferred",
        search_k=2,
    )
    first = s.offer("weather")
    assert first.reason == "fallback:error" and len(first.block) == len(CATALOG)  # first turn: all eligible
    s2 = ToolSession(
        Shortlist(CATALOG, selector=FailingSelector(RuntimeError("ranker down"))), policy="deferred", search_k=2
    )
    s2.state = OfferState(block=("memory__recall",), turns=1)
    found = s2.search("convert money between currencies")
    assert [c.id for c in found][:1] == ["convert_currency"] and len(found) <= 2


def test_co_usage_proposes_companions_learned_from_calls() -> None:
    co = CoUsage(min_count=2, min_ratio=0.5, limit=2)
    for _ in range(3):
        co.observe(["start_engine", "press_brake"])
    co.observe(["start_engine"])
    co.observe(["get_weather", "book_flight"])  # seen once: below min_count
    assert co.companions(["start_engine"]) == ["press_brake"]
    assert co.companions(["press_brake"]) == ["start_engine"]
    assert co.companions(["get_weather"]) == []
    assert co.companions(["start_engine"], exclude=["press_brake"]) == []
    with pytest.raises(ValueError):
        CoUsage(min_ratio=0)


def test_co_usage_learns_from_one_sighting_by_default() -> None:
    """A short conversation seldom repeats a pair: one turn is evidence, gated by the share of the
    tool's turns (at least 0.3) the companion was in."""
    co = CoUsage()
    co.observe(["start_engine", "press_brake", "lock_doors"])
    assert co.companions(["start_engine"]) == ["lock_doors", "press_brake"]
    for _ in range(3):
        co.observe(["start_engine"])  # now 1 of start_engine's 4 turns: 0.25, below the share
    assert co.companions(["start_engine"]) == []
    assert co.companions(["press_brake"]) == ["lock_doors", "start_engine"]  # 1 of 1 turns


def test_search_brings_co_used_tools_along() -> None:
    co = CoUsage(min_count=1)
    co.observe(["book_flight", "convert_currency"])
    s = ToolSession(shortlist(), policy="deferred", k=1, search_k=1, co_usage=co)
    s.offer("weather in Oslo")
    found = s.search("book a flight")
    assert [c.id for c in found] == ["book_flight", "convert_currency"]
    s.record_calls(["book_flight", "send_email"])
    assert "send_email" in co.companions(["book_flight"])
    assert s.state.called == ("book_flight", "send_email")


def _brute_companions(turns: list[set[str]], ids: Sequence[str], exclude: set[str], co: CoUsage) -> list[str]:
    """The companions rule read off the turns directly (every pair of every turn), for comparison."""
    scores: dict[str, float] = {}
    for src in ids:
        seen = sum(1 for t in turns if src in t)
        for dst in {d for t in turns if src in t for d in t}:
            shared = sum(1 for t in turns if src in t and dst in t)
            if dst in ids or dst in exclude or shared < co.min_count or not seen:
                continue
            if shared / seen >= co.min_ratio:
                scores[dst] = max(scores.get(dst, 0.0), shared / seen)
    return sorted(scores, key=lambda d: (-scores[d], d))[: co.limit]


def test_a_table_layered_on_a_base_reads_both_and_teaches_only_itself() -> None:
    import random

    rng = random.Random(7)
    tools = [f"t{i}" for i in range(8)]
    for _ in range(30):
        below = [set(rng.sample(tools, rng.randint(1, 4))) for _ in range(rng.randint(0, 12))]
        above = [set(rng.sample(tools, rng.randint(1, 4))) for _ in range(rng.randint(0, 12))]
        options = {"min_count": rng.randint(1, 3), "min_ratio": rng.choice([0.2, 0.3, 0.5, 1.0]), "limit": 3}
        base = CoUsage(**options).observe_all(below)  # type: ignore[arg-type]
        layered = CoUsage(base=base, **options).observe_all(above)  # type: ignore[arg-type]
        flat = CoUsage(**options).observe_all([*below, *above])  # type: ignore[arg-type]
        for _ in range(5):
            ids = rng.sample(tools, rng.randint(1, 2))
            exclude = set(rng.sample(tools, rng.randint(0, 2)))
            expected = _brute_companions([*below, *above], ids, exclude, layered)
            assert layered.companions(ids, exclude=exclude) == flat.companions(ids, exclude=exclude) == expected
            assert base.companions(ids, exclude=exclude) == _brute_companions(below, ids, exclude, base)
        assert layered.turns == flat.turns == sum(map(len, below)) + sum(map(len, above))


def test_a_frozen_table_cannot_be_taught_and_a_layer_on_it_can() -> None:
    shared = CoUsage(frozen=True)
    with pytest.raises(ValueError, match=r"CoUsage\(base=table\)"):
        shared.observe(["start_engine", "press_brake"])
    layer = CoUsage(base=shared)
    layer.observe(["start_engine", "press_brake"])
    assert layer.companions(["start_engine"]) == ["press_brake"] and shared.companions(["start_engine"]) == []


def test_a_session_learns_on_top_of_the_bound_logs_co_usage(tmp_path: Path) -> None:
    from shortlist.feedback import FeedbackStore

    log = FeedbackStore(tmp_path / "fb.db")
    log.record("book a trip", used=["book_flight", "convert_currency"])
    sl = Shortlist(CATALOG, selector=FunctionSelector(by_words), examples=log)
    assert sl.co_usage() is log.co_usage()  # the log's one shared table
    s = ToolSession(sl, policy="deferred", k=1, prefetch=1, prefetch_max=1, prefetch_cold=0)  # co_usage="log"
    offer = s.offer("book a flight")
    assert offer.prefetched == ("book_flight", "convert_currency") and offer.companions == ("convert_currency",)
    s.record_calls(["book_flight", "send_email"])  # this conversation's own table learns it
    assert s.co_usage is not None and "send_email" in s.co_usage.companions(["book_flight"])
    assert log.co_usage().companions(["book_flight"]) == ["convert_currency"]  # the shared one does not
    off = ToolSession(sl, policy="deferred", k=1, prefetch=1, prefetch_max=1, prefetch_cold=0, co_usage=None)
    assert off.offer("book a flight").prefetched == ("book_flight",)
    alone = ToolSession(shortlist(), policy="deferred")  # no log bound: nothing to layer on
    assert alone.co_usage is None
    with pytest.raises(ConfigError, match="co_usage must be"):
        ToolSession(sl, co_usage="feedback")  # type: ignore[arg-type]
    log.close()


def test_search_tool_name_is_reserved_outside_the_catalog() -> None:
    assert SEARCH_TOOL_NAME not in {c.id for c in CATALOG}


def test_conversation_eval_on_a_tiny_dataset(tmp_path: Path) -> None:
    from shortlist.eval._conversations import run_conversation_eval

    data = Path(__file__).parents[1] / "data" / "conv_tiny"
    catalog = tuple(
        Candidate(d["id"], description=d["description"], metadata=d["metadata"])
        for d in map(json.loads, (data / "tools.jsonl").read_text().splitlines())
    )
    sl = Shortlist(catalog, selector=FunctionSelector(by_words))

    def make(policy: Any, co: CoUsage | None) -> ToolSession:
        return ToolSession(sl, policy=policy, k=2, search_k=2, prefetch=2 if policy == "deferred" else 0, co_usage=co)

    report = run_conversation_eval(data, make, histories=(0, 5000), progress=False)
    assert report["conversations"] == 3 and report["turns"] == 7
    rows = report["strategies"]
    assert set(rows) == {"all", "per_turn", "stable", "deferred", "bridge", "oracle"}
    assert rows["all"]["complete_turns"] == 1.0 and rows["all"]["tool_block_changes"] == 0
    assert rows["deferred"]["tool_block_changes"] == 0
    # the bridge decides as deferred does, and pays for call_tool's definition and its wrapper
    for key in ("complete_turns", "turn_recall", "tool_block_changes", "model_calls_per_turn", "searches_per_turn"):
        assert rows["bridge"][key] == rows["deferred"][key]
    assert rows["bridge"]["tool_tokens_per_turn"] > rows["deferred"]["tool_tokens_per_turn"]
    assert rows["bridge"]["cost"]["5000"] > rows["deferred"]["cost"]["5000"]
    assert rows["per_turn"]["model_calls_per_turn"] == 1.0
    for row in rows.values():
        assert row["cost"]["5000"] > row["cost"]["0"] > 0
    # all tools: every call after the first of a conversation reads its prefix from the cache
    assert rows["all"]["cost"]["0"] < 1.25 * report["catalog_tokens"] * 3 + 5000


def test_conversation_eval_bad_input(tmp_path: Path) -> None:
    from shortlist.errors import CatalogError
    from shortlist.eval._conversations import load_conversations, run_conversation_eval

    bad = tmp_path / "conversations.jsonl"
    bad.write_text('{"cid": "x", "turns": [{"user": "hi", "calls": [{"name": "nope"}]}]}\n')
    with pytest.raises(CatalogError, match="nope"):
        load_conversations(bad, ["cd"])
    bad.write_text("not json\n")
    with pytest.raises(CatalogError, match="not a conversation"):
        load_conversations(bad)
    data = Path(__file__).parents[1] / "data" / "conv_tiny"
    with pytest.raises(ConfigError, match="unknown strategy"):
        run_conversation_eval(data, lambda p, c: ToolSession(shortlist()), strategies=["sometimes"], progress=False)


def test_stable_offers_the_whole_catalog_when_narrowing_would_cost_more() -> None:
    events: list[Event] = []
    short = ToolSession(shortlist(), policy="stable", k=1).offer("weather in Oslo", prefix_tokens=0)
    assert short.block == ("get_weather", "memory__recall") and short.reason == "first_turn"
    long = ToolSession(shortlist(), policy="stable", k=1).offer("weather in Oslo", prefix_tokens=100_000)
    assert set(long.block) == {c.id for c in CATALOG} and long.reason == "whole_catalog_cheaper"
    s = ToolSession(shortlist(events), policy="stable", k=1, search_k=1)
    s.offer("weather in Oslo", prefix_tokens=0)
    s.search("book a flight", prefix_tokens=100_000)  # a forced change at a long prefix: make it the last
    assert set(s.state.block) == {c.id for c in CATALOG}
    assert [e.reason for e in events if isinstance(e, OfferChanged)] == ["whole_catalog_cheaper"]


def test_deferred_by_default_fixes_a_block_of_pins_and_prefetches_from_the_first_turn() -> None:
    s = ToolSession(shortlist(), policy="deferred", k=2)
    first = s.offer("weather in Oslo")
    assert first.block == ("memory__recall",) and first.search_tool and first.reason == "first_turn"
    assert first.prefetched == ("get_weather",) and "get_weather" in first.available
    second = s.offer("book a flight")
    assert second.block == first.block and not second.changed and second.prefetched == ("book_flight",)
    with pytest.raises(ConfigError):
        ToolSession(shortlist(), hot=-1)


MCP_CATALOG = tuple(
    Candidate(i, description=d)
    for i, d in [
        ("mcp__weather__get_weather", "weather forecast for a city"),
        ("mcp__travel__book_flight", "book a flight"),
        ("mcp__mail__send_email", "send an email"),
        ("memory__recall", "recall a memory"),
    ]
)


def test_a_hosts_mcp_tools_are_ranked_by_the_offer_not_pinned() -> None:
    """Tools named as MCP hosts name them (``mcp__server__tool``) are what a big catalog is made of:
    every offer path ranks them, where narrowing's default policy pins the ``mcp`` namespace."""
    sl = Shortlist(MCP_CATALOG, selector=FunctionSelector(by_words))
    assert len(sl.select("weather in Oslo").pinned) == 4  # narrowing's documented default, unchanged
    per_turn = ToolSession(sl, policy="per_turn", k=1).offer("weather in Oslo")
    assert per_turn.block == ("mcp__weather__get_weather", "memory__recall") and per_turn.reason == "first_turn"
    deferred = ToolSession(sl, policy="deferred", k=1)
    first = deferred.offer("weather in Oslo")
    assert first.block == ("memory__recall",) and first.prefetched == ("mcp__weather__get_weather",)
    assert set(first.deferred) == {"mcp__travel__book_flight", "mcp__mail__send_email"}
    assert [c.id for c in deferred.search("send an email")] == ["mcp__mail__send_email"]
    state = decide_offer(sl, OfferState(), "book a flight", policy="deferred", k=1).state
    assert [c.id for c in search_tools(sl, state, "send an email", policy="deferred", k=1).found] == [
        "mcp__mail__send_email"
    ]
    # one live sibling per binding, sharing its enriched catalogs; a policy that is already live is its own
    live = sl.for_tools()
    assert live is sl.for_tools() and live.policy == sl.tool_policy()
    assert live.for_tools() is live and sl.derive(kind="tool").for_tools() is not live
    sl.policy = replace(sl.policy, on_abstain="pins")  # a replaced policy: the sibling follows it
    assert sl.for_tools() is not live and sl.for_tools().policy == sl.tool_policy()


#: Two servers' ``read_file`` (variants: one tool) and a tool of another name that shares its words.
READ_FILES = (
    Candidate("mcp__files__read_file", description="read the contents of a file"),
    Candidate("mcp__desktop__read_file", description="read the contents of a file or a url"),
    Candidate("mcp__files__write_file", description="write the contents of a file"),
)


def test_neither_a_search_nor_the_prefetch_brings_a_variant_of_what_the_model_has() -> None:
    """Another server's ``read_file`` adds nothing to the one the model can call: a search pages past it
    and the prefetch leaves it out; a same-named tool that does something else is still found."""
    catalog = (
        *READ_FILES,
        Candidate("mcp__bio__search", description="search the medical papers of a file"),
        Candidate("mcp__news__search", description="search the news stories"),
    )
    sl = Shortlist(catalog, selector=FunctionSelector(by_words))
    s = ToolSession(sl, policy="deferred", k=1, search_k=1, prefetch=0)
    assert s.offer("write the contents").available == ()
    assert [c.id for c in s.search("read the contents of a file or a url")] == ["mcp__desktop__read_file"]
    found = [c.id for c in s.search("read the contents of a file")]
    assert found == ["mcp__files__write_file"]  # not files' read_file, though it shares more words
    assert [c.id for c in s.search("search the news stories")] == ["mcp__news__search"]
    assert [c.id for c in s.search("search the medical papers")] == ["mcp__bio__search"]  # another tool
    assert without_variants(catalog, ()) == catalog

    # the prefetch: a variant of a loaded tool is left out; a loaded tool of another name leaves it in
    def prefetched(loaded: str) -> tuple[str, ...]:
        state = OfferState(loaded=(loaded,), turns=1)
        return decide_offer(sl, state, "read the contents of a file", policy="deferred", k=1, prefetch=2).prefetched

    assert "mcp__files__read_file" not in prefetched("mcp__desktop__read_file")
    assert "mcp__desktop__read_file" in prefetched("mcp__files__write_file")  # the better-ranked of the two


def test_variants_side_by_side_in_a_ranking_take_one_place_in_a_prefetch_and_a_search_page() -> None:
    """A ranking that does not collapse variants (as BM25 or an exec selector) puts three servers'
    ``read_file`` first: the prefetch loads one of them (its likely tools, each once) and a search page
    holds ``k`` distinct tools."""
    catalog = (
        *READ_FILES,
        Candidate("mcp__cloud__read_file", description="read the contents of a stored file"),
        Candidate("mcp__files__list_files", description="list the files of a folder"),
    )
    sl = Shortlist(catalog, selector=FunctionSelector(by_words))
    query = "read the contents of a file"
    ranked = by_words(Query(query), catalog)
    assert ranked[:3] == ["mcp__cloud__read_file", "mcp__desktop__read_file", "mcp__files__read_file"]
    offer = decide_offer(sl, OfferState(), query, policy="deferred", k=1, prefetch=3)
    assert offer.prefetched == ("mcp__cloud__read_file",)
    s = ToolSession(sl, policy="deferred", k=1, search_k=3, prefetch=0)
    found = [c.id for c in s.search(query)]
    assert found == ["mcp__cloud__read_file", "mcp__files__write_file", "mcp__files__list_files"]
    # a variant is one tool: a page after it still never brings another server's copy
    assert not {"mcp__files__read_file", "mcp__cloud__read_file"} & {c.id for c in s.search("read a file")}


def test_a_catalog_that_lost_a_tool_repairs_the_state_with_an_event() -> None:
    from shortlist.offer._state import OfferStateRepaired

    events: list[Event] = []
    state = OfferState(block=("memory__recall", "gone"), loaded=("book_flight", "also_gone"), turns=1)
    offer = decide_offer(shortlist(events), state, "weather", policy="deferred", prefetch=0)
    assert offer.block == ("memory__recall",) and offer.changed and offer.reason == "catalog_changed"
    assert offer.state.loaded == ("book_flight",)
    repaired = [e for e in events if isinstance(e, OfferStateRepaired)]
    assert repaired and repaired[0].dropped == ("gone", "also_gone")


class _Scored(Selector):
    """Ranks by fixed scores (highest first), as a ranker would."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.name = "scored"
        self.scores = scores

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        ids = sorted((c.id for c in candidates if c.id in self.scores), key=lambda i: -self.scores[i])[: query.k or 10]
        return Selection(tuple(ids), scores=tuple(self.scores[i] for i in ids))


_SUITES = (
    *(Candidate(f"fs_{n}", description="files", metadata={"suite": "FileSystem"}) for n in ("cd", "ls", "cat")),
    *(Candidate(f"web_{n}", description="web", metadata={"suite": "Web"}) for n in ("get", "post", "put", "head")),
)


def test_the_servers_a_conversation_called_weigh_in_the_prefetch_and_the_search() -> None:
    scores = {"web_get": 0.6, "web_post": 0.59, "web_put": 0.58, "web_head": 0.3, "fs_cat": 0.45, "fs_ls": 0.1}
    sl = Shortlist(_SUITES, selector=_Scored(scores))
    plain = ToolSession(sl, suite_boost=0, prefetch=3, prefetch_max=3, prefetch_cold=0)
    assert plain.offer("show the file").prefetched == ("web_get", "web_post", "web_put")
    used = ToolSession(sl, prefetch_max=3, state=OfferState(called=("fs_cd",)))  # the default boost
    assert used.offer("show the file").prefetched[0] == "fs_cat"  # 0.45 + boost beats 0.6
    called = OfferState(turns=1, called=("fs_cd",))
    found = search_tools(sl, called, "list the files", policy="deferred", k=1, suite_boost=0.3).found
    assert [c.id for c in found] == ["fs_cat"]
    unboosted = ToolSession(sl, state=called)  # no boost by default, and a page's first result is the ranking's
    assert [c.id for c in unboosted.search("list the files", k=1)] == ["web_get"]


def test_a_search_keeps_slots_for_the_servers_the_conversation_called() -> None:
    scores = {"web_get": 0.6, "web_post": 0.59, "web_put": 0.58, "web_head": 0.57, "fs_cat": 0.45, "fs_ls": 0.1}
    sl = Shortlist(_SUITES, selector=_Scored(scores))
    fresh = ToolSession(sl)  # nothing called yet: the ranking's page
    assert [c.id for c in fresh.search("show the file", k=3)] == ["web_get", "web_post", "web_put"]
    called = OfferState(turns=1, called=("fs_cd",))
    found = ToolSession(sl, state=called).search("show the file", k=3)
    assert [c.id for c in found] == ["web_get", "fs_cat", "fs_ls"]  # the last two slots: the file system's best
    one = search_tools(sl, called, "show the file", policy="deferred", k=3, suite_slots=1).found
    assert [c.id for c in one] == ["web_get", "web_post", "fs_cat"]
    off = ToolSession(sl, state=called, suite_slots=0).search("show the file", k=3)
    assert [c.id for c in off] == ["web_get", "web_post", "web_put"]
    only_one_tool = OfferState(turns=1, called=("fs_cd",), loaded=("fs_ls",))  # the slot left unused is filled
    found = search_tools(sl, only_one_tool, "show the file", policy="deferred", k=4).found
    assert [c.id for c in found] == ["web_get", "web_post", "fs_cat", "web_put"]
    with pytest.raises(ConfigError):
        ToolSession(sl, suite_slots=-1)


def test_a_flat_top_prefetches_deeper_up_to_the_cap() -> None:
    flat = {"web_get": 0.60, "web_post": 0.59, "web_put": 0.58, "web_head": 0.57, "fs_cat": 0.56, "fs_ls": 0.2}
    sl = Shortlist(_SUITES, selector=_Scored(flat))
    assert ToolSession(sl, prefetch=3, prefetch_flat=0.05, prefetch_max=6, prefetch_cold=0).offer("x").prefetched == (
        "web_get",
        "web_post",
        "web_put",
        "web_head",
        "fs_cat",
    )  # fs_ls is 0.4 below the top: not flat
    assert (
        len(ToolSession(sl, prefetch=3, prefetch_flat=0.05, prefetch_max=4, prefetch_cold=0).offer("x").prefetched) == 4
    )
    assert (
        len(ToolSession(sl, prefetch=3, prefetch_flat=0.0, prefetch_max=6, prefetch_cold=0).offer("x").prefetched) == 3
    )
    with pytest.raises(ConfigError):
        ToolSession(sl, suite_boost=-1)


def test_the_first_turn_prefetch_reads_as_deep_as_later_turns_whatever_k() -> None:
    """The first turn's ranking also fixes the block (pins and ``hot``): asked only ``k`` deep, its
    flat top could prefetch no deeper than ``k`` while every later turn read 20 deep."""
    flat = {"web_get": 0.60, "web_post": 0.59, "web_put": 0.58, "web_head": 0.57, "fs_cat": 0.56, "fs_ls": 0.2}
    sl = Shortlist(_SUITES, selector=_Scored(flat))
    first = ToolSession(sl, k=2, prefetch_flat=0.05, prefetch_max=6).offer("x")
    assert first.prefetched == ("web_get", "web_post", "web_put", "web_head", "fs_cat")
    assert first.block == ()  # hot=0: the ranking's depth never reaches the fixed block
    later = ToolSession(sl, k=2, prefetch_flat=0.05, prefetch_max=6, state=OfferState(turns=1)).offer("x")
    assert later.prefetched == first.prefetched
    hot = ToolSession(sl, k=2, hot=1, prefetch_flat=0.05, prefetch_max=6).offer("x")
    assert hot.block == ("web_get",) and hot.prefetched == ("web_post", "web_put", "web_head", "fs_cat")


def test_a_search_finds_the_called_servers_tools_deep_in_the_ranking() -> None:
    """A tool of the server in use ranked 150th by a vague query still takes a slot."""
    words = [a + b for a in "abcdefghijklm" for b in "nopqrstuvwxyz"]  # distinct tools, not versions of one
    many = tuple(Candidate(f"noise_{w}", description="noise", metadata={"suite": "Noise"}) for w in words[:160])
    scores = {c.id: 1.0 - i / 1000 for i, c in enumerate(many)} | {"fs_cat": 0.5}
    sl = Shortlist((*_SUITES, *many), selector=_Scored(scores))
    found = ToolSession(sl, state=OfferState(turns=1, called=("fs_cd",))).search("what's inside", k=3)
    assert [c.id for c in found] == ["noise_an", "fs_cat", "noise_ao"]


def test_a_state_read_back_has_no_repeated_ids() -> None:
    state = OfferState.from_dict(
        {"block": ["get_weather"] * 5000, "loaded": ["send_email", "book_flight", "send_email"], "called": ["a", "a"]}
    )
    assert state.block == ("get_weather",) and state.loaded == ("send_email", "book_flight")
    assert state.called == ("a",)
    offer = decide_offer(shortlist(), state, "weather", policy="stable", k=1)
    assert offer.state.to_dict()["block"].count("get_weather") == 1


@pytest.mark.parametrize("policy", ["per_turn", "stable", "deferred"])
def test_counters_stay_within_the_accepted_maximum(policy: str) -> None:
    top = OfferState(block=("get_weather",), turns=MAX_STATE_COUNT, changes=MAX_STATE_COUNT)
    offer = decide_offer(shortlist(), top, "book a flight", policy=policy, k=1)  # type: ignore[arg-type]
    assert offer.state.turns == MAX_STATE_COUNT and offer.state.changes == MAX_STATE_COUNT
    assert OfferState.from_dict(offer.state.to_dict()) == offer.state
    with pytest.raises(ConfigError, match="at most"):
        OfferState.from_dict({"turns": MAX_STATE_COUNT + 1})


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), -0.5])
def test_prices_are_finite_and_non_negative(bad: float) -> None:
    with pytest.raises(ConfigError, match="finite"):
        Prices(cache_write=bad)
    with pytest.raises(ConfigError, match="finite"):
        Prices(cache_read=bad)


def test_a_search_weighs_the_servers_of_tools_the_conversation_can_already_call() -> None:
    """The called tool is loaded, so the search's pool no longer holds it: its server must still count."""
    scores = {"web_get": 0.6, "web_post": 0.59, "fs_cat": 0.45, "fs_ls": 0.1}
    sl = Shortlist(_SUITES, selector=_Scored(scores))
    state = OfferState(loaded=("fs_cd",), called=("fs_cd",), turns=1)
    found = search_tools(sl, state, "list the files", policy="deferred", k=1, suite_boost=0.3).found
    assert [c.id for c in found] == ["fs_cat"]


class _ByQuery(Selector):
    """Ranks by fixed scores per query text (an unknown query ranks nothing)."""

    def __init__(self, scores: dict[str, dict[str, float]]) -> None:
        self.name = "by-query"
        self.scores = scores
        self.asked: list[str] = []

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.asked.append(query.text)
        table = self.scores.get(query.text, {})
        ids = sorted((c.id for c in candidates if c.id in table), key=lambda i: -table[i])[: query.k or 10]
        return Selection(tuple(ids), scores=tuple(table[i] for i in ids))


def test_a_search_is_ranked_with_the_turns_message_as_a_second_query() -> None:
    message = "what is inside the report file?"
    selector = _ByQuery(
        {
            "what is inside": {"web_get": 0.6, "web_post": 0.5, "fs_cat": 0.2},  # a vague query
            message: {"fs_cat": 0.9, "web_get": 0.3},
            "fs ls": {"fs_ls": 5.0, "fs_cat": 0.4},  # a precise one (a named tool scores high)
        }
    )
    sl = Shortlist(_SUITES, selector=selector)
    session = ToolSession(sl, prefetch=0)
    session.offer([{"role": "user", "content": message}, {"role": "assistant", "content": ""}])
    found = session.search("what is inside", k=2)
    assert [c.id for c in found] == ["fs_cat", "web_get"]  # 0.9 - 0.05 beats the query's 0.6
    assert [c.id for c in ToolSession(sl, prefetch=0, state=OfferState(turns=1)).search("fs ls", k=1)] == ["fs_ls"]
    session = ToolSession(sl, prefetch=0)
    session.offer(message)
    assert [c.id for c in session.search("fs ls", k=2)] == ["fs_ls", "fs_cat"]  # the precise query still first
    penalised = search_tools(
        sl, OfferState(), "what is inside", policy="deferred", k=2, context=message, context_penalty=0.5
    )
    assert [c.id for c in penalised.found] == ["web_get", "web_post"]  # 0.9 - 0.5 loses to 0.5
    selector.asked.clear()
    search_tools(sl, OfferState(), message, policy="deferred", k=2, context=message)
    assert selector.asked == [message]  # the message as the query: ranked once
    off = ToolSession(sl, prefetch=0, search_context=False)
    off.offer(message)
    assert [c.id for c in off.search("what is inside", k=2)] == ["web_get", "web_post"]


def test_a_log_that_cannot_be_read_costs_the_turn_its_examples_and_companions_never_the_turn(
    tmp_path: Path,
) -> None:
    from shortlist.feedback import FeedbackStore

    log = FeedbackStore(tmp_path / "fb.db")
    log.record("book a trip", used=["book_flight", "convert_currency"])
    events: list[Event] = []
    sl = Shortlist(CATALOG, selector=FunctionSelector(by_words), examples=log, on_event=events.append)
    log.close()  # the log breaks (a database that went away)
    turn = sl.select("book a flight")
    assert turn.fallback is None and turn.ranked[0] == "book_flight"  # answered, without examples
    assert sl.co_usage() is None
    s = ToolSession(sl, policy="deferred", k=1, prefetch=1, prefetch_max=1, prefetch_cold=0)
    assert s.co_usage is None and s.offer("book a flight").prefetched == ("book_flight",)
    broken = [e for e in events if e.name == "selection.feedback_unavailable"]
    assert {e.what for e in broken} == {"examples", "co_usage"}  # type: ignore[attr-defined]
    assert all("closed" in e.error for e in broken)  # type: ignore[attr-defined]
