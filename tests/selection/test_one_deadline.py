"""Deadlines only through ``TimeoutSelector``: the library's policy, the wire route and the exec receiver.

Before, a policy's ``timeout_s`` was applied by ``narrow`` itself (its own pool call or an
``asyncio.wait_for``), the wire route wrapped the call in an ``asyncio.wait_for`` of its own,
and only the facade warmed a ranker outside a deadline, after probing the wrapper chain for a
``TimeoutSelector``. Now each builds a ``TimeoutSelector`` (``with_deadline``), which also keeps
a ranker's start-up work (model load, index) outside the deadline: a cold ranker narrows on
every surface, and a selector that is slow for every query still times out, with the same
``selection.fallback`` (reason ``timeout``) event.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from shortlist._events import Event, SelectionFallback
from shortlist._types import Candidate, Query
from shortlist.errors import SelectorTimeout
from shortlist.exec._server import serve_once
from shortlist.rankers._base import WARM_UP_QUERY, Ranker, Scores
from shortlist.rankers._timeout import TimeoutSelector, with_deadline
from shortlist.selection._narrowing import NarrowingPolicy, anarrow, narrow
from shortlist.testing import SlowSelector

CATALOG = (
    Candidate("get_weather", "get_weather", "Get the weather forecast for a city."),
    Candidate("send_email", "send_email", "Send an email to someone."),
    Candidate("book_flight", "book_flight", "Book a flight to a city."),
)
POLICY = NarrowingPolicy(timeout_s=0.3)


class ColdRanker(Ranker):
    """Slow the first time it sees a catalog (a model load and an index build), fast after."""

    def __init__(self, cold_s: float = 0.8) -> None:
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


def test_with_deadline_is_a_timeout_selector_or_the_selector() -> None:
    slow = SlowSelector(0.0)
    assert with_deadline(slow, None) is slow
    timed = with_deadline(slow, 0.5)
    assert isinstance(timed, TimeoutSelector) and timed.wrapped is slow and timed.name == slow.name


# --- the library -------------------------------------------------------------------------


def test_a_policy_deadline_keeps_a_cold_rankers_start_up_outside_it() -> None:
    ranker = ColdRanker()
    turn = narrow(ranker, Query("weather in Paris", k=1), CATALOG, POLICY)
    assert turn.fallback is None and turn.ids == ("get_weather",)
    narrow(ranker, Query("weather in Rome", k=1), CATALOG, POLICY)
    assert ranker.queries == [WARM_UP_QUERY, "weather in Paris", "weather in Rome"]  # warmed once


async def test_a_policy_deadline_keeps_a_cold_rankers_start_up_outside_it_async() -> None:
    ranker = ColdRanker()
    turn = await anarrow(ranker, Query("weather in Paris", k=1), CATALOG, POLICY)
    assert turn.fallback is None and turn.ids == ("get_weather",)


def _fallbacks(events: list[Event]) -> list[SelectionFallback]:
    return [e for e in events if isinstance(e, SelectionFallback)]


def test_a_slow_selector_through_the_library_times_out_with_one_event() -> None:
    events: list[Event] = []
    started = time.perf_counter()
    turn = narrow(SlowSelector(1.5, ["get_weather"]), Query("weather"), CATALOG, POLICY, hooks=[events.append])
    assert turn.fallback == "timeout" and time.perf_counter() - started < 1.2
    [event] = _fallbacks(events)
    assert event.reason == "timeout" and event.selector == "slow" and event.error.startswith("SelectorTimeout")


async def test_a_slow_native_async_selector_times_out_with_the_wrappers_message() -> None:
    events: list[Event] = []
    turn = await anarrow(SlowSelector(1.5, ["a"]), Query("weather"), CATALOG, POLICY, hooks=[events.append])
    assert turn.fallback == "timeout"
    [event] = _fallbacks(events)
    assert event.reason == "timeout" and "selector 'slow' did not answer within 0.300 s" in event.error


# --- the exec receiver -------------------------------------------------------------------


def _request(text: str) -> bytes:
    return json.dumps(
        {"query": {"text": text, "k": 1}, "candidates": [{"id": c.id, "description": c.description} for c in CATALOG]}
    ).encode()


def _serve(selector: object, raw: bytes) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    code = serve_once(selector, io.BytesIO(raw), out, err)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue()


def test_the_exec_receiver_keeps_a_cold_rankers_start_up_outside_its_deadline() -> None:
    code, out, err = _serve(TimeoutSelector(ColdRanker(), 0.3), _request("weather in Paris"))
    assert code == 0, err
    assert json.loads(out)["selected"] == ["get_weather"]


def test_a_slow_selector_through_the_exec_receiver_times_out() -> None:
    code, out, err = _serve(with_deadline(SlowSelector(1.5, ["a"]), 0.2), _request("weather"))
    assert code == 1 and out == b""
    assert json.loads(err)["error"].startswith(f"{SelectorTimeout.__name__}: ")


# --- the wire route ----------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[object, ColdRanker]]:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from shortlist.server import ServerSettings, create_app
    from shortlist.server._state import ServiceState

    config = tmp_path / "runtime.yaml"
    config.write_text("spec:\n  selection:\n    timeout_ms: 300\n")
    settings = ServerSettings(selector="bm25", config_path=str(config))
    state = ServiceState(settings)
    cold = ColdRanker()
    state.shortlist.registry.register("cold", cold)
    state.shortlist.registry.register("slow", SlowSelector(1.5, ["get_weather"]))
    with TestClient(create_app(settings, service=state), client=("127.0.0.1", 5000)) as c:
        yield c, cold


def test_the_route_keeps_a_cold_rankers_start_up_outside_the_policy_deadline(
    client: tuple[object, ColdRanker],
) -> None:
    c, cold = client
    r = c.post("/v1/selectors/cold:select", content=_request("weather in Paris"))  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    assert r.json()["selected"] == ["get_weather"] and cold.queries == [WARM_UP_QUERY, "weather in Paris"]


def test_a_slow_selector_through_the_route_is_a_504(client: tuple[object, ColdRanker]) -> None:
    c, _ = client
    started = time.perf_counter()
    r = c.post("/v1/selectors/slow:select", content=_request("weather"))  # type: ignore[attr-defined]
    assert r.status_code == 504 and time.perf_counter() - started < 1.2
    assert "selector 'slow' did not answer within 0.300 s" in r.json()["error"]
    metrics = c.get("/metrics").text  # type: ignore[attr-defined]
    assert 'shortlist_selections_total{kind="tool",outcome="fallback",selector="slow"} 1.0' in metrics
