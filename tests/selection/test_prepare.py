"""``Selector.prepare`` is the one warm-up: the facade, the service, the exec daemon and the evaluation call it.

Before, each warmed a selector its own way (five stand-in queries, two stand-in catalogs, some
through the wrappers' deadline, some around it). A recording selector shows each surface now
calls ``prepare`` with what it has (its catalog, or none), and a ranker's ``prepare`` is one
untimed ranking of the one stand-in query.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from shortlist._records import EvalQuery
from shortlist._types import Candidate, Query, Selection
from shortlist.eval._datasets import Dataset
from shortlist.eval._runner import run_eval
from shortlist.rankers._base import WARM_UP_CANDIDATES, WARM_UP_QUERY, Ranker, Scores
from shortlist.rankers._breaker import BreakerSelector
from shortlist.rankers._registry import SelectorRegistry
from shortlist.rankers._timeout import TimeoutSelector
from shortlist.rankers._wrappers import FallbackSelector
from shortlist.selection._base import FunctionSelector, Selector
from shortlist.selection._facade import Shortlist

CATALOG = (
    Candidate("get_weather", "get_weather", "Get the weather forecast for a city."),
    Candidate("send_email", "send_email", "Send an email to someone."),
)


class Recording(Ranker):
    """A ranker that records what it ranked (query text, candidate ids); slow when ``slow_s``."""

    def __init__(self, slow_s: float = 0.0) -> None:
        super().__init__(name="recording")
        self.slow_s = slow_s
        self.ranked: list[tuple[str, tuple[str, ...]]] = []
        self._lock = threading.Lock()

    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        with self._lock:
            self.ranked.append((query.text, tuple(c.id for c in candidates)))
        time.sleep(self.slow_s)
        return np.ones(len(candidates))


IDS = tuple(c.id for c in CATALOG)
STAND_IN = tuple(c.id for c in WARM_UP_CANDIDATES)


def test_a_rankers_prepare_is_one_ranking_of_the_stand_in_query() -> None:
    ranker = Recording()
    ranker.prepare(CATALOG)
    ranker.prepare(())  # no catalog: the model loads on the stand-in catalog
    assert ranker.ranked == [(WARM_UP_QUERY, IDS), (WARM_UP_QUERY, STAND_IN)]


def test_a_plain_selector_prepares_nothing() -> None:
    calls: list[str] = []

    def rank(query: Query, candidates: Sequence[Candidate]) -> list[str]:
        calls.append(query.text)
        return ["get_weather"]

    FunctionSelector(rank).prepare(CATALOG)
    assert calls == []


def test_wrappers_prepare_their_ranker_outside_their_deadline_and_breaker() -> None:
    ranker = Recording(slow_s=0.3)
    chain = FallbackSelector(BreakerSelector(TimeoutSelector(ranker, 0.05), failures=1), Recording())
    chain.prepare(CATALOG)  # no SelectorTimeout: a warm-up is not a turn
    assert ranker.ranked == [(WARM_UP_QUERY, IDS)]


def test_the_facade_warms_through_prepare() -> None:
    ranker = Recording()
    Shortlist(CATALOG, selector=ranker).warm()
    assert ranker.ranked == [(WARM_UP_QUERY, IDS)]


def test_the_service_also_prepares_what_its_offer_ranks_of_a_catalog_of_mcp_tools(tmp_path: Path) -> None:
    """``/v1/select`` pins ``mcp__`` tools by default and ``/v1/offer`` ranks them: both are prepared."""
    pytest.importorskip("fastapi")
    from shortlist.server._settings import ServerSettings
    from shortlist.server._state import ServiceState

    path = tmp_path / "tools.json"
    ids = ("mcp__files__read_file", "send_email")
    path.write_text(json.dumps([{"id": i, "name": i, "description": f"the {i} tool"} for i in ids]))
    state = ServiceState(ServerSettings(selector="recording", catalogs={"mixed": str(path)}))
    ranker = Recording()
    state.shortlist.registry.register("recording", ranker)
    try:
        state.start()
        assert state.ready and not state.warm_up_errors
        # tools (pinned mcp__ left out), the offer's tools (all ranked), skills (the same catalog)
        assert ranker.ranked == [
            (WARM_UP_QUERY, ("send_email",)),
            (WARM_UP_QUERY, ids),
            (WARM_UP_QUERY, ("send_email",)),
        ]
    finally:
        state.close()


def test_the_service_prepares_its_bound_selector_for_each_catalog_or_none() -> None:
    pytest.importorskip("fastapi")
    from shortlist.server._settings import ServerSettings
    from shortlist.server._state import ServiceState

    state = ServiceState(ServerSettings(selector="recording"))
    ranker = Recording()
    state.shortlist.registry.register("recording", ranker)
    try:
        state.start()
        assert state.ready and not state.warm_up_errors
        assert ranker.ranked == [(WARM_UP_QUERY, STAND_IN)] * 2  # tools and skills, no catalog of either
    finally:
        state.close()


def test_the_exec_daemon_prepares_its_default_selector() -> None:
    from shortlist.exec._daemon import ExecDaemon

    ranker = Recording()
    registry = SelectorRegistry(selectors={"recording": ranker})
    try:
        ExecDaemon(registry, default="recording", config=None).warm()
    finally:
        registry.close()
    assert ranker.ranked == [(WARM_UP_QUERY, STAND_IN)]


def test_the_evaluation_prepares_then_ranks_each_query() -> None:
    ranker = Recording()
    dataset = Dataset("tiny", CATALOG, (EvalQuery("q1", "weather in Paris", ("get_weather",)),))
    run_eval(ranker, dataset, k=1, progress=False)
    assert ranker.ranked == [(WARM_UP_QUERY, IDS), ("weather in Paris", IDS)]


class Counting(Selector):
    """Not a ranker: counts its selects (a warm-up must not call it)."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.calls += 1
        return Selection((candidates[0].id,))


def test_the_daemon_does_not_rank_for_a_selector_that_has_nothing_to_prepare() -> None:
    from shortlist.exec._daemon import ExecDaemon

    counting = Counting()
    registry = SelectorRegistry(selectors={"counting": counting})
    try:
        ExecDaemon(registry, default="counting", config=None).warm()
    finally:
        registry.close()
    assert counting.calls == 0
