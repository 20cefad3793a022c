"""The ring of recent decisions and ``GET /decisions`` / ``GET /v1/decisions`` (in-thread uvicorn)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from server_helpers import EXAMPLE_CATALOG, serve

from shortlist._tokens import tool_tokens
from shortlist._types import Candidate, Query
from shortlist.errors import SelectorError
from shortlist.rankers._breaker import BreakerSelector
from shortlist.rankers._wrappers import FallbackSelector
from shortlist.selection._narrowing import TurnSelection
from shortlist.server import ServerSettings
from shortlist.server._decisions import MAX_QUERY_CHARS, DecisionLog, breaker_states, render_page
from shortlist.server._settings import KeyPolicy, hash_key
from shortlist.testing import FailingSelector, StaticSelector

CANDS = (Candidate("a", description="alpha tool"), Candidate("b", description="beta"), Candidate("c"))


def _turn(ids: tuple[str, ...], fallback: str | None = None) -> TurnSelection:
    by_id = {c.id: c for c in CANDS}
    surfaced = tuple(by_id.get(i) or Candidate(i) for i in ids)
    return TurnSelection(
        Query("q"), surfaced, ranked=ids, scores={i: 0.5 for i in ids}, fallback=fallback, reason="r", selector="s"
    )


def test_ring_is_bounded_newest_first_and_counts_tokens() -> None:
    log = DecisionLog(capacity=2, catalogs={"cat": CANDS})
    for n in range(3):
        log.record("/v1/select", f"q{n}", CANDS, _turn(("a",)))
    assert [d.query for d in log.recent()] == ["q2", "q1"] and log.total == 3
    d = log.recent()[0]
    assert d.tokens_all == tool_tokens(CANDS)
    assert d.tokens_selected == tool_tokens(CANDS[:1]) and d.tokens_saved == d.tokens_all - d.tokens_selected
    body = d.to_json()
    assert body["selected"] == [{"id": "a", "score": 0.5}] and body["tokens"]["saved"] == d.tokens_saved
    inline = [Candidate("x", description="x" * 400)]  # not a loaded catalog: counted per request
    assert log.record("/v1/select", "q", inline, _turn(("x",))).tokens_all == tool_tokens(inline[:1])
    long = log.record("/v1/select", "z" * 1000, CANDS, _turn(()))
    assert len(long.query) == MAX_QUERY_CHARS and long.query.endswith("…")
    with pytest.raises(ValueError, match="capacity"):
        DecisionLog(capacity=0)


def test_breaker_states_walk_wrappers_and_fallbacks() -> None:
    broken = BreakerSelector(FailingSelector(SelectorError("down")), failures=1, cooldown_s=600, name="broken")
    chain = FallbackSelector(StaticSelector(["a"]), broken)
    assert breaker_states([chain, broken]) == [
        {"selector": "broken", "state": "closed", "failures": 0, "threshold": 1, "cooldown_s": 600}
    ]
    with pytest.raises(SelectorError):
        broken.select(Query("q"), CANDS)
    assert breaker_states([chain])[0]["state"] == "open"


def test_page_escapes_untrusted_text() -> None:
    log = DecisionLog()
    log.record("/v1/select", "<img src=x onerror=alert(1)>", CANDS, _turn(("a",), fallback="error"))
    page = render_page(log.recent(), [], total=1, capacity=200)
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'data-fallback="error"' in page


@pytest.mark.slow
def test_select_and_offer_are_recorded_and_the_page_needs_the_key(tmp_path: Path) -> None:
    settings = ServerSettings(
        catalogs={"example": str(EXAMPLE_CATALOG)},
        selector="bm25",
        api_keys={hash_key("secret"): KeyPolicy(label="ops")},
    )
    with serve(settings) as srv, srv.client("secret") as client, srv.client() as anonymous:
        r = client.post("/v1/select", json={"query": "weather in Paris tomorrow", "catalog": "example", "k": 3})
        assert r.status_code == 200
        r = client.post("/v1/offer", json={"query": "book a flight", "catalog": "example", "policy": "per_turn"})
        assert r.status_code == 200, r.text
        block = r.json()["block"]
        body = client.get("/v1/decisions").json()
        assert body["total"] == 2 and body["capacity"] == 200
        offer, select = body["decisions"]
        assert select["route"] == "/v1/select" and select["query"] == "weather in Paris tomorrow"
        assert select["selected"][0] == {"id": "get_weather_forecast", "score": select["selected"][0]["score"]}
        assert select["fallback"] is None and select["tokens"]["saved"] > 0 and select["eligible"] == 38
        assert offer["route"] == "/v1/offer" and offer["offered"] == block
        assert anonymous.get("/v1/decisions").status_code == 401
        page = anonymous.get("/decisions")
        assert page.status_code == 401 and page.headers["www-authenticate"].startswith("Basic")
        basic = base64.b64encode(b"anyone:secret").decode()
        page = anonymous.get("/decisions", headers={"Authorization": f"Basic {basic}"})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert page.text.count('class="decision"') == 2
        wrong = base64.b64encode(b"anyone:nope").decode()
        assert anonymous.get("/decisions", headers={"Authorization": f"Basic {wrong}"}).status_code == 401
        assert client.get("/decisions?refresh=1").status_code == 422
        assert '<meta http-equiv="refresh" content="5">' in client.get("/decisions?refresh=5").text


def test_a_scoped_key_sees_only_its_own_decisions() -> None:
    log = DecisionLog()
    alice = KeyPolicy(label="alice", scopes=({"user_id": "alice"},))
    bob = KeyPolicy(label="bob", scopes=({"user_id": "bob"},))
    admin = KeyPolicy(label="admin")
    log.record("/v1/select", "alice's secret", CANDS, _turn(("a",)), key=alice)
    log.record("/v1/select", "bob's secret", CANDS, _turn(("a",)), key=bob)
    log.record("/v1/select", "admin query", CANDS, _turn(("a",)), key=admin)
    assert [d.query for d in log.recent(alice)] == ["alice's secret"]
    assert [d.query for d in log.recent(bob)] == ["bob's secret"]
    assert [d.query for d in log.recent(admin)] == ["admin query", "bob's secret", "alice's secret"]
    assert log.visible_total(alice) == 1 and log.visible_total(admin) == 3


@pytest.mark.slow
def test_the_routes_show_a_scoped_key_only_its_own_queries() -> None:
    settings = ServerSettings(
        catalogs={"example": str(EXAMPLE_CATALOG)},
        selector="bm25",
        api_keys={
            hash_key("k-alice"): KeyPolicy(label="alice", scopes=({"user_id": "alice"},)),
            hash_key("k-bob"): KeyPolicy(label="bob", scopes=({"user_id": "bob"},)),
            hash_key("k-admin"): KeyPolicy(label="admin"),
        },
    )
    with (
        serve(settings) as srv,
        srv.client("k-alice") as alice,
        srv.client("k-bob") as bob,
        srv.client("k-admin") as admin,
    ):
        assert alice.post("/v1/select", json={"query": "alice weather", "catalog": "example"}).status_code == 200
        r = bob.post("/v1/offer", json={"query": "bob flight", "catalog": "example", "policy": "per_turn"})
        assert r.status_code == 200, r.text
        body = alice.get("/v1/decisions").json()
        assert [d["query"] for d in body["decisions"]] == ["alice weather"] and body["total"] == 1
        assert [d["query"] for d in bob.get("/v1/decisions").json()["decisions"]] == ["bob flight"]
        page = alice.get("/decisions").text
        assert "alice weather" in page and "bob flight" not in page
        queries = [d["query"] for d in admin.get("/v1/decisions").json()["decisions"]]
        assert queries == ["bob flight", "alice weather"]
