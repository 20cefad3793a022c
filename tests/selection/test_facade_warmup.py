"""Shortlist: a ranker's start-up work (model load, index) is kept off the turn's deadline; usage examples."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError
from shortlist.feedback._store import FeedbackStore
from shortlist.rankers._base import Ranker, Scores
from shortlist.selection._facade import Shortlist
from shortlist.selection._narrowing import NarrowingPolicy
from shortlist.testing import SlowSelector

CATALOG = [
    Candidate("get_weather", "get_weather", "Get the weather forecast for a city."),
    Candidate("send_email", "send_email", "Send an email to someone."),
    Candidate("book_flight", "book_flight", "Book a flight to a city."),
]


class ColdRanker(Ranker):
    """Slow the first time it sees a catalog (a model load and an index build), fast after."""

    def __init__(self, cold_s: float) -> None:
        super().__init__(name="cold")
        self.cold_s = cold_s
        self.seen: set[tuple[str, ...]] = set()
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        key = tuple(c.id for c in candidates)
        with self._lock:
            cold = key not in self.seen
            self.seen.add(key)
            self.queries.append(query.text)
        if cold:
            time.sleep(self.cold_s)
        return np.asarray([float("weather" in query.text and "weather" in c.description) for c in candidates])


def test_a_cold_ranker_narrows_under_a_deadline_it_could_not_meet_cold() -> None:
    ranker = ColdRanker(cold_s=0.6)
    sl = Shortlist(CATALOG, selector=ranker, policy=NarrowingPolicy(timeout_s=0.3))
    turn = sl.select("weather in Paris", k=1)
    assert turn.fallback is None and turn.ids == ("get_weather",)
    assert ranker.queries == ["warm up", "weather in Paris"]  # warmed once, outside the deadline
    sl.select("weather in Rome", k=1)
    assert ranker.queries[-1] == "weather in Rome" and ranker.queries.count("warm up") == 1


def test_a_new_catalog_is_warmed_too() -> None:
    ranker = ColdRanker(cold_s=0.6)
    sl = Shortlist(CATALOG, selector=ranker, policy=NarrowingPolicy(timeout_s=0.3))
    sl.select("weather", k=1)
    turn = sl.select("weather", CATALOG[:2], k=1)
    assert turn.fallback is None and ranker.queries.count("warm up") == 2


async def test_aselect_warms_outside_the_deadline_too() -> None:
    ranker = ColdRanker(cold_s=0.6)
    sl = Shortlist(CATALOG, selector=ranker, policy=NarrowingPolicy(timeout_s=0.3))
    turn = await sl.aselect("weather in Paris", k=1)
    assert turn.fallback is None and turn.ids == ("get_weather",)


def test_without_a_deadline_nothing_is_warmed() -> None:
    ranker = ColdRanker(cold_s=0.0)
    Shortlist(CATALOG, selector=ranker).select("weather", k=1)
    assert ranker.queries == ["weather"]


def test_a_selector_that_is_not_a_ranker_still_gets_its_deadline() -> None:
    sl = Shortlist(CATALOG, selector=SlowSelector(2.0, ["get_weather"]), policy=NarrowingPolicy(timeout_s=0.2))
    started = time.perf_counter()
    turn = sl.select("weather", k=1)
    assert turn.fallback == "timeout"
    assert time.perf_counter() - started < 1.5  # no untimed warm-up waited for it


def test_a_ranker_that_is_always_slow_still_times_out() -> None:
    class Slow(ColdRanker):
        def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
            if query.text != "warm up":
                time.sleep(0.8)
            return super().score(query, candidates)

    turn = Shortlist(CATALOG, selector=Slow(0.0), policy=NarrowingPolicy(timeout_s=0.2)).select("weather", k=1)
    assert turn.fallback == "timeout"


def test_warm_builds_and_indexes_on_demand() -> None:
    ranker = ColdRanker(cold_s=0.0)
    sl = Shortlist(CATALOG, selector=ranker)
    sl.warm()
    assert ranker.queries == ["warm up"] and tuple(c.id for c in CATALOG) in ranker.seen


def test_examples_from_a_feedback_log_reach_the_ranker(tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    with FeedbackStore(db) as store:
        store.record("is it going to rain", used=["get_weather"])
    seen: list[Sequence[Candidate]] = []

    class Spy(ColdRanker):
        def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
            seen.append(candidates)
            return super().score(query, candidates)

    with Shortlist(CATALOG, selector=Spy(0.0), examples=db) as sl:
        sl.select("rain tomorrow?", k=1)
    weather = next(c for c in seen[-1] if c.id == "get_weather")
    assert weather.examples == ("is it going to rain",)


def test_config_examples_path_is_relative_to_the_config(tmp_path: Path) -> None:
    with FeedbackStore(tmp_path / "logs" / "feedback.db") as store:
        store.record("is it going to rain", used=["get_weather"])
    config = tmp_path / "runtime.yaml"
    config.write_text("spec:\n  selection:\n    examples: logs/feedback.db\n")
    with Shortlist(CATALOG, selector="bm25", config=config) as sl:
        assert sl.examples is not None
        enriched = sl.enrich(CATALOG, kind="tool")
    assert next(c for c in enriched if c.id == "get_weather").examples == ("is it going to rain",)


def test_a_missing_feedback_log_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such feedback log"):
        Shortlist(CATALOG, examples=tmp_path / "typo.db")
    assert not (tmp_path / "typo.db").exists()


def test_config_cache_section_sets_the_process_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shortlist.embeddings._cache as cache

    monkeypatch.setattr(cache, "_configured_dir", None)
    monkeypatch.setattr(cache, "_configured_max_mb", None)
    config = tmp_path / "runtime.yaml"
    config.write_text(f"spec:\n  cache:\n    dir: {tmp_path / 'c'}\n    max_mb: 7\n")
    Shortlist(CATALOG, selector="bm25", config=config).close()
    assert cache.cache_dir() == tmp_path / "c" and cache.cache_max_mb() == 7
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec:\n  cache:\n    max_mb: 0\n")
    with pytest.raises(ConfigError, match="max_mb"):
        Shortlist(CATALOG, config=bad)


def test_the_service_takes_its_examples_from_the_settings(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from shortlist.server._settings import ServerSettings
    from shortlist.server._state import ServiceState

    db = tmp_path / "feedback.db"
    with FeedbackStore(db) as store:
        store.record("is it going to rain", used=["get_weather"])
    state = ServiceState(ServerSettings(selector="bm25", examples_path=str(db)))
    try:
        enriched = state.shortlist.enrich(CATALOG, kind="tool")
        assert next(c for c in enriched if c.id == "get_weather").examples == ("is it going to rain",)
        from shortlist.server._settings import ENV_SETTINGS

        travelled = ServerSettings.from_env({ENV_SETTINGS: ServerSettings(examples_path=str(db)).to_env()})
        assert travelled.examples_path == str(db)  # to the workers of `serve --workers N`
    finally:
        state.close()
