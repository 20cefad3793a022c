"""A feedback log's new examples: the same enriched catalog from turn to turn, and, for a service, a
refresh in the background that never makes a request wait for the new index."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from shortlist import Shortlist
from shortlist._events import Event
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import UsageError
from shortlist.feedback import FeedbackStore
from shortlist.selection._base import Selector
from shortlist.selection._refresh import EnrichedCatalogs, ExamplesRefresh, ExamplesRefreshed

CATALOG = (
    Candidate("get_weather", description="Current weather for a city"),
    Candidate("send_mail", description="Send an email"),
    Candidate("mcp__files__read", description="Read a file"),  # pinned by the default policy
)


class Recording(Selector):
    """Answers the first candidate; remembers what it was prepared for and asked about; ``gate`` holds prepare."""

    def __init__(self) -> None:
        self.name = "recording"
        self.prepared: list[tuple[Candidate, ...]] = []
        self.seen: list[tuple[Candidate, ...]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def prepare(self, candidates: Sequence[Candidate]) -> None:
        self.entered.set()
        assert self.gate.wait(10)
        self.prepared.append(tuple(candidates))

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.seen.append(tuple(candidates))
        return Selection((candidates[0].id,))


def examples_of(cands: Sequence[Candidate], tool: str) -> tuple[str, ...]:
    return next(c.examples for c in cands if c.id == tool)


def test_an_unchanged_log_hands_out_the_same_enriched_catalog(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.db")
    store.record("rain in Oslo?", used=["get_weather"])
    sel = Recording()
    sl = Shortlist(CATALOG, selector=sel, examples=store)
    sl.select("weather")
    sl.select("weather again")
    assert sel.seen[0] is sel.seen[1]  # the same rankable tuple: every index is found by identity
    assert examples_of(sel.seen[0], "get_weather") == ("rain in Oslo?",)
    store.record("sunny in Rome?", used=["get_weather"])
    sl.select("weather")  # sync (the default): this turn already ranks with the new example
    assert examples_of(sel.seen[2], "get_weather") == ("rain in Oslo?", "sunny in Rome?")
    sl.select("weather")
    assert sel.seen[3] is sel.seen[2]


def bound_to_log(
    tmp_path: Path, refresh: ExamplesRefresh = "background"
) -> tuple[FeedbackStore, Recording, list[Event], Shortlist]:
    """A log with one example, a recording selector and a binding that refreshes ``refresh``-wise."""
    store = FeedbackStore(tmp_path / "fb.db")
    store.record("rain in Oslo?", used=["get_weather"])
    sel = Recording()
    events: list[Event] = []
    sl = Shortlist(CATALOG, selector=sel, examples=store, examples_refresh=refresh, on_event=events.append)
    return store, sel, events, sl


def refresh_held(store: FeedbackStore, sel: Recording, sl: Shortlist) -> None:
    """One turn ranked, then a write whose refresh (asked for at the write) is held inside ``prepare``."""
    sl.select("weather")
    sel.gate.clear()
    store.record("sunny in Rome?", used=["get_weather"])
    assert sl.refresh_examples() is True
    assert sel.entered.wait(10)


def test_a_service_refreshes_in_the_background_and_never_waits(tmp_path: Path) -> None:
    store, sel, events, sl = bound_to_log(tmp_path)
    sl.warm()
    assert [c.id for c in sel.prepared[-1]] == ["get_weather", "send_mail"]  # what a turn hands it: no pinned tool
    first = sl.select("weather")
    assert first.fallback is None and examples_of(sel.seen[-1], "get_weather") == ("rain in Oslo?",)

    sel.gate.clear()  # the next preparation (the refresh) blocks until released
    store.record("sunny in Rome?", used=["get_weather"])
    answered = threading.Event()

    def turn() -> None:
        sl.select("weather now")
        sl.select("and tomorrow")
        answered.set()

    t = threading.Thread(target=turn)
    t.start()
    assert sel.entered.wait(10)
    assert answered.wait(5), "a request waited for the background index build"
    assert examples_of(sel.seen[-1], "get_weather") == ("rain in Oslo?",)  # the previous examples meanwhile
    sel.gate.set()
    assert sl._enriched.wait(10)
    sl.select("weather later")
    assert examples_of(sel.seen[-1], "get_weather") == ("rain in Oslo?", "sunny in Rome?")
    assert sel.prepared[-1] == sel.seen[-1]  # the turn ranks exactly what the refresh prepared
    (refreshed,) = [e for e in events if isinstance(e, ExamplesRefreshed)]
    assert refreshed.kind == "tool" and refreshed.candidates == 3 and refreshed.stale_turns == 2
    assert refreshed.error == "" and refreshed.seconds >= 0


def test_a_failed_refresh_is_reported_and_the_new_examples_still_arrive(tmp_path: Path) -> None:
    store, sel, events, sl = bound_to_log(tmp_path)
    sl.select("weather")

    def broken(candidates: Sequence[Candidate]) -> None:
        raise RuntimeError("index build failed")

    sel.prepare = broken  # type: ignore[method-assign]
    store.record("sunny in Rome?", used=["get_weather"])
    sl.select("weather")
    assert sl._enriched.wait(10)
    sl.select("weather")
    assert examples_of(sel.seen[-1], "get_weather") == ("rain in Oslo?", "sunny in Rome?")
    (refreshed,) = [e for e in events if isinstance(e, ExamplesRefreshed)]
    assert "index build failed" in refreshed.error


def test_inline_candidates_and_bad_modes() -> None:
    calls: list[tuple[tuple[Candidate, ...], str]] = []
    cats = EnrichedCatalogs(lambda c, k: calls.append((c, k)), mode="background", slots=2)
    lists = [list(CATALOG) for _ in range(4)]  # a request's inline candidates: a new list each time
    for source in lists:
        assert cats.serve("tool", source, source) == CATALOG  # first sight: handed out as they are
    assert len(cats._served) == 2 and not calls
    with pytest.raises(UsageError, match="examples_refresh"):
        EnrichedCatalogs(lambda c, k: None, mode="later")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="examples_refresh"):
        Shortlist(CATALOG, examples_refresh="eventually")  # type: ignore[arg-type]


def test_a_turn_under_a_deadline_does_not_wait_for_another_catalogs_warm_up() -> None:
    """A selector under a deadline is prepared once per catalog; a turn on a prepared catalog does not
    wait while the same selector is prepared for another one (a background refresh)."""
    from shortlist.rankers import TimeoutSelector

    sel = Recording()
    timed = TimeoutSelector(sel, 5.0)
    old, new = CATALOG[:2], tuple(c.with_examples(["an example"]) for c in CATALOG[:2])
    timed.prepare(old)
    sel.gate.clear()
    warming = threading.Thread(target=timed.prepare, args=(new,))
    warming.start()
    assert sel.entered.wait(10)
    answered = threading.Event()

    def turn() -> None:
        timed.select(Query("weather"), old)
        answered.set()

    threading.Thread(target=turn).start()
    assert answered.wait(5), "a turn on a prepared catalog waited for another catalog's warm-up"
    sel.gate.set()
    warming.join(10)


def test_a_prepared_catalogs_key_is_remembered_not_hashed_every_turn() -> None:
    from shortlist.rankers import _timeout

    prepared = _timeout._Prepared()
    cats = tuple(Candidate(f"t{i}", description=f"tool {i}") for i in range(50))
    key = prepared.key(cats)
    assert prepared._keys.get(cats) == key
    assert prepared.key(cats) == key == prepared.key(list(cats))  # a list is hashed, to the same key
    changed = (*cats[:-1], cats[-1].with_examples(["new"]))
    assert prepared.key(changed) != key
    for i in range(20):
        prepared.key(tuple(cats[:i]))
    assert len(prepared._keys) == _timeout._KEYS_KEPT


def test_a_write_refreshes_at_once_and_the_next_turn_finds_the_index_built(tmp_path: Path) -> None:
    """A process that wrote to the log asks for the refresh at once (the runtime does after each turn it
    records): the next turn ranks exactly what the refresh prepared, with the new example."""
    store, sel, events, sl = bound_to_log(tmp_path, "sync")  # the library's default
    sl.select("weather")
    assert sl.refresh_examples() is False  # nothing changed: nothing to prepare
    store.record("sunny in Rome?", used=["get_weather"])
    assert sl.refresh_examples() is True
    assert sl._enriched.wait(10)
    prepared = sel.prepared[-1]
    assert examples_of(prepared, "get_weather") == ("rain in Oslo?", "sunny in Rome?")
    sl.select("weather now")
    assert sel.seen[-1] is prepared  # found by identity: the turn builds nothing
    assert sl.refresh_examples() is False  # handed out already
    (refreshed,) = [e for e in events if isinstance(e, ExamplesRefreshed)]
    assert refreshed.reason == "write" and refreshed.stale_turns == 0 and refreshed.error == ""


def test_a_write_refreshes_the_offers_binding_too_which_ranks_the_mcp_tools(tmp_path: Path) -> None:
    """``POST /v1/feedback`` refreshes the service's binding; its offers narrow with ``for_tools()`` (the
    ``mcp__`` tool ranked, not pinned): that sibling's next turn finds its own catalog prepared."""
    from shortlist.offer import OfferState, decide_offer

    store, sel, _events, sl = bound_to_log(tmp_path, "background")
    offers = sl.for_tools()
    decide_offer(sl, OfferState(), "weather", policy="per_turn")
    store.record("sunny in Rome?", used=["get_weather"])
    assert sl.refresh_examples() is True
    assert sl._enriched.wait(10) and offers._enriched.wait(10)
    prepared = sel.prepared[-1]
    assert [c.id for c in prepared] == [c.id for c in CATALOG]  # the offer's rankable part: mcp__ in it
    assert examples_of(prepared, "get_weather") == ("rain in Oslo?", "sunny in Rome?")
    decide_offer(sl, OfferState(), "weather now", policy="per_turn")
    assert sel.seen[-1] is prepared  # found by identity: the offer's turn builds nothing


def test_a_sync_turn_waits_for_the_refresh_under_way_rather_than_build_the_index_twice(tmp_path: Path) -> None:
    store, sel, _, sl = bound_to_log(tmp_path, "sync")
    refresh_held(store, sel, sl)
    answered = threading.Event()

    def turn() -> None:
        sl.select("weather now")
        answered.set()

    threading.Thread(target=turn).start()
    assert not answered.wait(0.3), "the sync turn did not wait for the refresh preparing its examples"
    sel.gate.set()
    assert answered.wait(10)
    assert len(sel.prepared) == 1 and sel.seen[-1] is sel.prepared[0]  # prepared once, ranked as prepared
    assert examples_of(sel.seen[-1], "get_weather") == ("rain in Oslo?", "sunny in Rome?")


def test_a_background_turn_during_a_write_refresh_ranks_the_previous_examples(tmp_path: Path) -> None:
    store, sel, events, sl = bound_to_log(tmp_path)
    refresh_held(store, sel, sl)
    sl.select("weather now")  # does not wait
    assert examples_of(sel.seen[-1], "get_weather") == ("rain in Oslo?",)
    sel.gate.set()
    assert sl._enriched.wait(10)
    sl.select("weather later")
    assert sel.seen[-1] is sel.prepared[-1]
    (refreshed,) = [e for e in events if isinstance(e, ExamplesRefreshed)]
    assert refreshed.reason == "write" and refreshed.stale_turns == 1


def test_writes_during_a_refresh_are_prepared_after_it_in_order(tmp_path: Path) -> None:
    store, sel, events, sl = bound_to_log(tmp_path)
    refresh_held(store, sel, sl)
    store.record("snow in Oslo?", used=["get_weather"])
    assert sl.refresh_examples() is False  # one under way: the newer one is prepared after it
    store.record("storm in Bergen?", used=["get_weather"])
    assert sl.refresh_examples() is False
    sel.gate.set()
    assert sl._enriched.wait(10)
    sl.select("weather")
    newest = ("rain in Oslo?", "sunny in Rome?", "snow in Oslo?", "storm in Bergen?")
    assert examples_of(sel.seen[-1], "get_weather") == newest and sel.seen[-1] is sel.prepared[-1]
    assert len(sel.prepared) == 2  # the first write's, then only the newest
    assert [e.reason for e in events if isinstance(e, ExamplesRefreshed)] == ["write", "turn"]


def test_a_sync_turn_newer_than_the_refresh_is_not_overwritten_by_it(tmp_path: Path) -> None:
    store, sel, _, sl = bound_to_log(tmp_path, "sync")
    refresh_held(store, sel, sl)
    store.record("snow in Oslo?", used=["get_weather"])
    sl.select("weather now")  # newer than what the refresh prepares: the turn ranks it at once
    newest = ("rain in Oslo?", "sunny in Rome?", "snow in Oslo?")
    assert examples_of(sel.seen[-1], "get_weather") == newest
    sel.gate.set()  # the refresh ends after the turn handed out the newer tuple
    handed = sel.seen[-1]
    assert sl._enriched.wait(10)
    sl.select("weather again")
    assert sel.seen[-1] is handed  # never swapped back to the refresh's older tuple (and its index built anew)


def test_refresh_without_a_log_or_with_a_broken_one_changes_nothing(tmp_path: Path) -> None:
    events: list[Event] = []
    assert Shortlist(CATALOG, selector=Recording()).refresh_examples() is False
    store = FeedbackStore(tmp_path / "fb.db")
    sel = Recording()
    sl = Shortlist(CATALOG, selector=sel, examples=store, on_event=events.append)
    assert sl.refresh_examples(()) is False  # nothing to rank
    store.close()  # the log breaks
    assert sl.refresh_examples() is False
    assert [e.what for e in events if e.name == "selection.feedback_unavailable"] == ["examples"]  # type: ignore[attr-defined]
    assert sel.prepared == [] and sl.select("weather").fallback is None
