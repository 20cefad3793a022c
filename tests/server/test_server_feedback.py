"""``POST /v1/feedback``: a client in any language teaches the service's bound feedback log, and every
replica on that log ranks and offers with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from server_helpers import EXAMPLE_CATALOG

from shortlist.feedback import FeedbackStore

CATALOGS = {"example": str(EXAMPLE_CATALOG)}
OFFER = {"catalog": "example", "query": "search flights to Rome", "k": 2, "prefetch": 1, "prefetch_max": 1}
OFFER |= {"prefetch_cold": 0, "format": "anthropic"}


def _empty_log(tmp_path: Path) -> Path:
    path = tmp_path / "feedback.db"
    FeedbackStore(path).close()  # the service refuses a log file that does not exist (a mistyped path)
    return path


def test_a_recorded_turn_teaches_every_replica_on_the_log(tmp_path: Path, app_factory: Any) -> None:
    log = _empty_log(tmp_path)
    with (
        app_factory(catalogs=CATALOGS, selector="bm25", examples_path=str(log)) as a,
        app_factory(catalogs=CATALOGS, selector="bm25", examples_path=str(log)) as b,
        a.client() as ca,
        b.client() as cb,
    ):
        before = cb.post("/v1/offer", json=OFFER).json()
        assert before["prefetched"] == ["search_flights"] and before["companions"] == []
        turn = {"query": "fly to Rome and pay in euros", "used": ["search_flights", "convert_currency"]}
        r = ca.post("/v1/feedback", json=turn | {"selected": ["search_flights"]})
        assert r.status_code == 200, r.text
        assert r.json()["recorded"] is True and isinstance(r.json()["turn"], int)
        after = cb.post("/v1/offer", json=OFFER).json()  # the other replica reads the grown log
        assert after["prefetched"] == ["search_flights", "convert_currency"]
        assert after["companions"] == ["convert_currency"]
    with FeedbackStore(log) as store:  # the message is now an example of each tool the turn used
        assert store.examples() == {
            "search_flights": ["fly to Rome and pay in euros"],
            "convert_currency": ["fly to Rome and pay in euros"],
        }
        assert [sorted(s) for s in store.used_sets()] == [["convert_currency", "search_flights"]]


def test_the_logs_co_usage_is_counted_at_start_up_not_by_the_first_offer(tmp_path: Path, app_factory: Any) -> None:
    log = tmp_path / "feedback.db"
    with FeedbackStore(log) as writer:
        writer.record("fly and pay", used=["search_flights", "convert_currency"])
    with app_factory(catalogs=CATALOGS, selector="bm25", examples_path=str(log)) as srv:
        store = srv.app.state.service.shortlist.examples  # no request made yet
        assert "tool" in store._co_usage and store._co_usage["tool"].table.turns == 2


def test_a_recorded_turns_example_reaches_the_ranking_without_a_request_waiting(
    tmp_path: Path, app_factory: Any
) -> None:
    """The service indexes a log's new examples on a thread (``examples_refresh="background"``): every
    request is answered meanwhile, and the ranking then uses the new example."""
    import time

    log = _empty_log(tmp_path)
    query = {"catalog": "example", "query": "zorblat the quarterly figures", "k": 1}
    with app_factory(catalogs=CATALOGS, selector="bm25", examples_path=str(log)) as srv, srv.client() as c:
        assert srv.app.state.service.shortlist._enriched.mode == "background"
        before = c.post("/v1/select", json=query).json()
        assert before["ranked"] != ["convert_currency"]  # no tool says "zorblat"
        turn = {"query": "zorblat the quarterly figures into euros", "used": ["convert_currency"]}
        assert c.post("/v1/feedback", json=turn).status_code == 200
        deadline = time.monotonic() + 20
        while True:
            r = c.post("/v1/select", json=query)
            assert r.status_code == 200 and r.json()["fallback"] is None
            if r.json()["ranked"] == ["convert_currency"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.json()["ranked"] == ["convert_currency"]  # the logged message is now its example


def test_the_replica_that_records_a_turn_indexes_it_before_its_next_request(tmp_path: Path, app_factory: Any) -> None:
    """The replica that wrote the turn starts indexing its example at once: its first ranking request
    after the refresh uses it (the other replicas find the change at their next request)."""
    from shortlist.selection._refresh import ExamplesRefreshed

    log = _empty_log(tmp_path)
    query = {"catalog": "example", "query": "zorblat the quarterly figures", "k": 1}
    with app_factory(catalogs=CATALOGS, selector="bm25", examples_path=str(log)) as srv, srv.client() as c:
        service = srv.app.state.service
        events: list[Any] = []
        service.shortlist._enriched._hooks = (events.append,)
        assert c.post("/v1/select", json=query).json()["ranked"] != ["convert_currency"]
        turn = {"query": "zorblat the quarterly figures into euros", "used": ["convert_currency"]}
        assert c.post("/v1/feedback", json=turn).status_code == 200
        assert service.shortlist._enriched.wait(20)
        first = c.post("/v1/select", json=query).json()
        assert first["ranked"] == ["convert_currency"]  # the first request after the write: no stale turn
        (refreshed,) = [e for e in events if isinstance(e, ExamplesRefreshed)]
        assert refreshed.reason == "write" and refreshed.stale_turns == 0
        again = {"query": "zorblat the yearly figures", "used": ["convert_currency"], "external_id": "t1"}
        assert c.post("/v1/feedback", json=again).status_code == 200
        assert c.post("/v1/feedback", json=again).json()["recorded"] is False  # not recorded: nothing to index
        assert service.shortlist._enriched.wait(20)
        assert len([e for e in events if isinstance(e, ExamplesRefreshed)]) == 2


def test_a_retried_turn_is_recorded_once(tmp_path: Path, app_factory: Any) -> None:
    log = _empty_log(tmp_path)
    turn = {"query": "book a hotel in Rome", "used": ["book_hotel"], "external_id": "conv-7/turn-2", "kind": "tool"}
    with app_factory(catalogs=CATALOGS, examples_path=str(log)) as srv, srv.client() as c:
        first = c.post("/v1/feedback", json=turn).json()
        again = c.post("/v1/feedback", json=turn).json()
    assert first["recorded"] is True and again == {"recorded": False, "turn": None}
    with FeedbackStore(log) as store:
        assert store.stats()["turns"] == 1


def test_without_a_bound_log_the_route_says_how_to_bind_one(app_factory: Any) -> None:
    with app_factory(catalogs=CATALOGS) as srv, srv.client() as c:
        r = c.post("/v1/feedback", json={"query": "hello", "used": ["web_search"]})
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "no_feedback_log" and "--examples" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"used": ["web_search"]}, "query"),
        ({"query": "", "used": ["web_search"]}, "query"),
        ({"query": "hi", "used": "web_search"}, "used"),
        ({"query": "hi", "used": [""]}, "used"),
        ({"query": "hi", "used": ["web_search"], "kind": "Tools!"}, "kind"),
        ({"query": "hi", "used": ["web_search"], "external_id": ""}, "external_id"),
        ({"query": "hi", "used": ["web_search"], "ranked": ["x"]}, "ranked"),
        ({"query": "hi", "used": [f"t{i}" for i in range(5001)]}, "used"),
    ],
)
def test_bad_turns_are_refused_and_nothing_is_written(
    tmp_path: Path, app_factory: Any, body: dict[str, Any], says: str
) -> None:
    log = _empty_log(tmp_path)
    with app_factory(catalogs=CATALOGS, examples_path=str(log)) as srv, srv.client() as c:
        r = c.post("/v1/feedback", json=body)
    assert r.status_code == 422 and says in r.json()["error"]["message"]
    with FeedbackStore(log) as store:
        assert store.stats()["turns"] == 0


def test_with_api_keys_a_turn_needs_one(tmp_path: Path, app_factory: Any) -> None:
    from shortlist.server._settings import KeyPolicy, hash_key

    log = _empty_log(tmp_path)
    keys = {hash_key("k1"): KeyPolicy(label="agent")}
    with (
        app_factory(catalogs=CATALOGS, examples_path=str(log), api_keys=keys) as srv,
        srv.client() as anonymous,
        srv.client("k1") as agent,
    ):
        assert anonymous.post("/v1/feedback", json={"query": "hi", "used": ["web_search"]}).status_code == 401
        r = agent.post("/v1/feedback", json={"query": "hi", "used": ["web_search"]})
        assert r.status_code == 200, r.text
    with FeedbackStore(log) as store:
        assert store.stats()["turns"] == 1


@pytest.mark.slow  # a PostgreSQL server, stopped and started again
def test_a_log_that_goes_down_costs_companions_and_refuses_turns_until_it_is_back(
    pg_dsn: str, postgres: Any, server_factory: Any
) -> None:
    import time

    pytest.importorskip("psycopg")
    with server_factory(catalogs=CATALOGS, selector="bm25", examples_path=pg_dsn) as srv, srv.client() as c:
        turn = {"query": "fly to Rome and pay in euros", "used": ["search_flights", "convert_currency"]}
        assert c.post("/v1/feedback", json=turn).status_code == 200
        assert c.post("/v1/offer", json=OFFER).json()["companions"] == ["convert_currency"]
        postgres.stop("fast")
        try:
            time.sleep(1.2)  # past the log's refresh interval: the next request asks the database
            down = c.post("/v1/offer", json=OFFER)
            assert down.status_code == 200, down.text  # answered without the log's companions
            assert down.json()["prefetched"][0] == "search_flights" and down.json()["companions"] == []
            refused = c.post("/v1/feedback", json=turn)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "unavailable"
        finally:
            postgres.start()
        assert c.post("/v1/feedback", json=turn).status_code == 200
        time.sleep(1.2)
        assert c.post("/v1/offer", json=OFFER).json()["companions"] == ["convert_currency"]
