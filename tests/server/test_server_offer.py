"""``/v1/offer`` and ``/v1/offer/search`` over real HTTP: stateless, so any replica answers the same."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from server_helpers import EXAMPLE_CATALOG

from shortlist._events import Event, add_event_hook, remove_event_hook
from shortlist.offer import OfferPolicy, OfferState, ToolSession
from shortlist.offer._bridge import offer_json
from shortlist.selection._facade import Shortlist

CATALOGS = {"example": str(EXAMPLE_CATALOG)}

#: One conversation: each turn's user message, and what the model searches for after it (or None).
SCRIPT: list[tuple[str, str | None]] = [
    ("what is the weather forecast in Paris tomorrow", "send an email message to a recipient"),
    ("and the air quality there?", None),
    ("book a hotel room in Rome for two nights", "translate text to another language"),
    ("now send the booking to alice by email", None),
]


def _without_timing(offer: dict[str, Any]) -> dict[str, Any]:
    out = dict(offer)
    if out.get("selection") is not None:
        out["selection"] = {k: v for k, v in out["selection"].items() if k != "elapsed_ms"}
    return out


@pytest.mark.parametrize("policy", ["per_turn", "stable", "deferred"])
def test_two_replicas_alternating_turns_match_a_local_tool_session(app_factory: Any, policy: OfferPolicy) -> None:
    local = ToolSession(
        Shortlist(str(EXAMPLE_CATALOG), selector="bm25"),
        policy=policy,
        k=3,
        search_k=2,
        prefetch=1,
    )
    with (
        app_factory(catalogs=CATALOGS, selector="bm25") as a,
        app_factory(catalogs=CATALOGS, selector="bm25") as b,
        a.client() as ca,
        b.client() as cb,
    ):
        replicas = [ca, cb]
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel assistant."}]
        state: dict[str, Any] | None = None
        calls = 0
        for turn, (text, search) in enumerate(SCRIPT):
            messages.append({"role": "user", "content": text})
            prefix = 400 * (turn + 1)
            body = {
                "catalog": "example",
                "messages": messages,
                "policy": policy,
                "k": 3,
                "prefetch": 1,
                "prefix_tokens": prefix,
                "state": state,
            }
            r = replicas[calls % 2].post("/v1/offer", json=body)
            calls += 1
            assert r.status_code == 200, r.text
            answer = r.json()
            expected = offer_json(local.offer(messages, prefix_tokens=prefix), "openai")  # the route's default format
            assert _without_timing(answer) == _without_timing(expected)
            state = answer["state"]
            if search is not None:
                r = replicas[calls % 2].post(
                    "/v1/offer/search",
                    json={
                        "catalog": "example",
                        "query": search,
                        "policy": policy,
                        "k": 2,
                        "state": state,
                        "context": text,
                    },
                )
                calls += 1
                assert r.status_code == 200, r.text
                found = r.json()
                local_found = local.search(search, k=2)
                assert [t["id"] for t in found["tools"]] == [c.id for c in local_found]
                assert found["state"] == local.state.to_dict()
                state = found["state"]
            messages.append({"role": "assistant", "content": f"done with turn {turn}"})
        assert OfferState.from_dict(state).turns == len(SCRIPT)


def test_search_loads_under_deferred_and_grows_the_block_under_stable(app_factory: Any) -> None:
    with app_factory(catalogs=CATALOGS, selector="bm25") as srv, srv.client() as c:
        body = {"catalog": "example", "query": "weather in Paris", "k": 2, "hot": 2, "format": "anthropic"}
        first = c.post("/v1/offer", json=body).json()
        assert first["policy"] == "deferred" and first["search_tool"] is True and first["reason"] == "first_turn"
        assert "get_weather_forecast" in first["block"] and "memory__recall" in first["block"]  # pinned
        assert "send_email" in first["deferred"]
        found = c.post(
            "/v1/offer/search",
            json={
                "catalog": "example",
                "query": "send an email",
                "k": 1,
                "state": first["state"],
                "policy": "deferred",
            },
        ).json()
        assert [t["id"] for t in found["tools"]] == ["send_email"] and found["fallback"] is None
        tool = found["tools"][0]
        assert tool["name"] == "send_email" and "email" in tool["description"]
        assert tool["parameters"]["type"] == "object"
        assert found["state"]["loaded"] == ["send_email"] and found["state"]["block"] == first["state"]["block"]
        nxt = c.post(
            "/v1/offer",
            json={"catalog": "example", "query": "thanks", "state": found["state"], "k": 2, "format": "anthropic"},
        ).json()
        assert nxt["changed"] is False and nxt["loaded"] == ["send_email"] and "send_email" not in nxt["deferred"]
        again = c.post(  # what is already available is never found again
            "/v1/offer/search",
            json={"catalog": "example", "query": "send an email", "k": 1, "state": nxt["state"], "format": "anthropic"},
        ).json()
        assert "send_email" not in [t["id"] for t in again["tools"]]
        stable = c.post(
            "/v1/offer/search",
            json={"catalog": "example", "query": "send an email", "policy": "stable", "k": 1, "state": first["state"]},
        ).json()
        assert stable["state"]["block"] == [*first["state"]["block"], "send_email"]
        assert stable["state"]["changes"] == 1


def test_offer_events_reach_the_hooks_and_the_metrics(app_factory: Any) -> None:
    events: list[Event] = []
    add_event_hook(events.append)
    try:
        with app_factory(catalogs=CATALOGS, selector="bm25") as srv, srv.client() as c:
            first = c.post("/v1/offer", json={"catalog": "example", "query": "weather in Paris"}).json()
            c.post(
                "/v1/offer/search",
                json={"catalog": "example", "query": "send an email", "policy": "stable", "state": first["state"]},
            )
            empty = c.post("/v1/offer", json={"catalog": "example", "query": "", "policy": "per_turn"}).json()
            assert empty["reason"] == "fallback:empty_query"
            metrics = c.get("/metrics").text
    finally:
        remove_event_hook(events.append)
    names = [e.name for e in events]
    searched = [e for e in events if e.name == "selection.tool_searched"]
    assert searched and "send_email" in searched[-1].found  # type: ignore[attr-defined]
    assert "selection.offer_changed" in names and "selection.fallback" in names
    assert 'shortlist_http_requests_total{method="POST",route="/v1/offer",status="200"} 2.0' in metrics
    assert 'shortlist_selections_total{kind="tool",outcome="narrowed",selector="bm25"}' in metrics
    assert 'shortlist_selection_fallbacks_total{reason="empty_query",selector="bm25"} 1.0' in metrics


def test_messages_and_query_text_decide_the_same(app_factory: Any) -> None:
    with app_factory(catalogs=CATALOGS) as srv, srv.client() as c:
        text = "send an email to bob about the invoice"
        by_text = c.post("/v1/offer", json={"catalog": "example", "query": text, "policy": "per_turn"}).json()
        by_messages = c.post(
            "/v1/offer",
            json={
                "catalog": "example",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": text},
                ],
                "policy": "per_turn",
            },
        ).json()
        assert by_text["block"] == by_messages["block"] and "send_email" in by_text["block"]
        inline = c.post(
            "/v1/offer",
            json={
                "candidates": [{"id": "a", "description": "send an email"}, {"id": "b", "description": "weather"}],
                "query": "email",
                "k": 1,
                "hot": 1,
                "selector": "lexical",
            },
        ).json()
        assert inline["block"] == ["a"] and inline["deferred"] == ["b"]


def test_a_hosts_mcp_tools_are_ranked_not_pinned(app_factory: Any) -> None:
    """``mcp__server__tool`` names (an MCP host's tools) are offered as the runtime offers them: ranked."""
    tools = [
        {"id": "mcp__mail__send_email", "description": "send an email"},
        {"id": "mcp__weather__forecast", "description": "weather forecast"},
        {"id": "mcp__travel__book_flight", "description": "book a flight"},
        {"id": "memory__recall", "description": "recall a memory"},
    ]
    with app_factory(selector="lexical") as srv, srv.client() as c:
        body = {"candidates": tools, "query": "send an email", "k": 1, "policy": "per_turn"}
        per_turn = c.post("/v1/offer", json=body).json()
        assert per_turn["block"] == ["mcp__mail__send_email", "memory__recall"]
        deferred = c.post("/v1/offer", json={**body, "policy": "deferred"}).json()
        assert deferred["block"] == ["memory__recall"] and deferred["prefetched"] == ["mcp__mail__send_email"]
        found = c.post(
            "/v1/offer/search",
            json={
                "candidates": tools,
                "query": "weather forecast",
                "k": 1,
                "policy": "deferred",
                "state": deferred["state"],
            },
        ).json()
        assert [t["id"] for t in found["tools"]] == ["mcp__weather__forecast"]
        # /v1/select keeps narrowing's configured pins (the mcp namespace by default)
        pinned = c.post("/v1/select", json={"candidates": tools, "query": "send an email", "k": 1}).json()
        assert set(pinned["pinned"]) == {t["id"] for t in tools}


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ({"block": "send_email"}, "state.block"),
        ({"turns": -1}, "state.turns"),
        ({"turns": True}, "state.turns"),
        ({"block": [1]}, "state.block.0"),
        ({"surprise": 1}, "state.surprise"),
        (["send_email"], "state must be the JSON object"),
        ("abc", "state must be the JSON object"),
    ],
)
def test_a_bad_state_answers_400_with_the_field(app_factory: Any, state: Any, says: str) -> None:
    with app_factory(catalogs=CATALOGS, selector="lexical") as srv, srv.client() as c:
        for path in ("/v1/offer", "/v1/offer/search"):
            r = c.post(path, json={"catalog": "example", "query": "email", "state": state})
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "invalid_state" and says in r.json()["error"]["message"]


def test_tools_the_catalog_no_longer_holds_are_dropped_from_the_state(app_factory: Any) -> None:
    state = {"block": ["memory__recall", "gone_tool"], "loaded": ["send_email", "x"], "turns": 1}
    with app_factory(catalogs=CATALOGS, selector="lexical") as srv, srv.client() as c:
        r = c.post(
            "/v1/offer",
            json={"catalog": "example", "query": "email", "state": state, "prefetch": 0, "policy": "deferred"},
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["block"] == ["memory__recall"] and body["changed"] and body["reason"] == "catalog_changed"
        assert body["state"]["loaded"] == ["send_email"] and body["state"]["changes"] == 1
        found = c.post("/v1/offer/search", json={"catalog": "example", "query": "weather", "state": state})
        assert found.status_code == 200, found.text
        assert "gone_tool" not in found.json()["state"]["block"] and "x" not in found.json()["state"]["loaded"]


def test_offer_requests_are_validated_strictly(app_factory: Any) -> None:
    with app_factory(catalogs=CATALOGS, max_candidates=3) as srv, srv.client() as c:
        base = {"catalog": "example", "query": "email"}
        for bad in (
            {**base, "policy": "sometimes"},
            {**base, "k": -1},
            {**base, "k": "3"},
            {**base, "prefetch": 51},
            {**base, "prefetch_max": 51},
            {**base, "prefetch_max": -1},
            {**base, "prefetch_cold": 51},
            {**base, "prefetch_cold": -1},
            {**base, "prefetch_tokens": -1},
            {**base, "prefetch_tokens": "250"},
            {**base, "prefix_tokens": -5},
            {**base, "messages": [{"role": "user", "content": "x"}]},  # both query and messages
            {"catalog": "example"},  # neither
            {**base, "unexpected": 1},
            {**base, "candidates": [{"id": "a"}]},  # both sources
        ):
            r = c.post("/v1/offer", json=bad)
            assert r.status_code == 422, (bad, r.text)
        assert c.post("/v1/offer/search", json={**base, "k": 0}).status_code == 422
        assert c.post("/v1/offer/search", json={**base, "k": 51}).status_code == 422
        assert c.post("/v1/offer/search", json={**base, "search_tokens": -1}).status_code == 422
        assert c.post("/v1/offer/search", json={**base, "search_tokens": "300"}).status_code == 422
        assert c.post("/v1/offer/search", json={"catalog": "example"}).status_code == 422
        r = c.post("/v1/offer", json={**base, "catalog": "nope"})
        assert r.status_code == 404 and "example" in r.json()["error"]["message"]
        r = c.post("/v1/offer", json={**base, "selector": "exec:touch /tmp/pwned"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_selector"
        many = [{"id": f"t{i}"} for i in range(4)]
        r = c.post("/v1/offer/search", json={"candidates": many, "query": "x"})
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_candidates"
        doc = c.get("/openapi.json").json()
        assert "/v1/offer" in doc["paths"] and "/v1/offer/search" in doc["paths"]


def test_a_broken_external_selector_falls_back_behind_its_breaker(tmp_path: Path, app_factory: Any) -> None:
    behave = Path(__file__).resolve().parent.parent / "fixtures" / "selectors" / "behave.py"
    config = tmp_path / "runtime.yaml"
    config.write_text(
        f"spec:\n  selectors:\n    broken:\n      command: {sys.executable}\n      args: [{str(behave)!r}, nonzero]\n"
    )
    with app_factory(config_path=str(config), catalogs=CATALOGS) as srv, srv.client() as c:
        body = {"catalog": "example", "query": "weather in Paris", "selector": "broken", "policy": "per_turn"}
        reasons = [c.post("/v1/offer", json=body).json()["reason"] for _ in range(4)]
        assert reasons[0].startswith("fallback:") and len(set(reasons)) == 1  # every turn still answers
        metrics = c.get("/metrics").text
        assert 'shortlist_circuit_breaker_changes_total{selector="broken",state="open"} 1.0' in metrics
        found = c.post(
            "/v1/offer/search", json={"catalog": "example", "query": "weather forecast", "selector": "broken", "k": 2}
        ).json()
        assert found["fallback"] is not None  # ranked lexically instead, never the whole catalog
        assert found["tools"][0]["id"] == "get_weather_forecast" and len(found["tools"]) == 2


def test_one_default_policy_per_format_as_the_runtime_decides(app_factory: Any) -> None:
    """Left at defaults, /v1/offer offers an OpenAI conversation what the runtime offers it."""
    from shortlist.offer._policies import default_policy
    from shortlist.runtime import Conversation, Pack

    messages = [{"role": "user", "content": "what is the weather forecast in Paris tomorrow"}]
    with app_factory(catalogs=CATALOGS, selector="bm25") as srv, srv.client() as c:
        plain = c.post("/v1/offer", json={"catalog": "example", "messages": messages}).json()
        anthropic = c.post("/v1/offer", json={"catalog": "example", "messages": messages, "format": "anthropic"}).json()
        bad = c.post("/v1/offer", json={"catalog": "example", "messages": messages, "format": "gemini"})
    assert plain["policy"] == default_policy("openai") == "deferred"  # chat completions: the call_tool bridge
    assert anthropic["policy"] == default_policy("anthropic") == "deferred"
    assert bad.status_code == 422
    for fmt in ("openai", "anthropic"):
        conversation = Conversation(Pack(), model=lambda request: {}, format=fmt, tool_selector="bm25")
        try:
            assert conversation.session.policy == default_policy(fmt)
        finally:
            conversation.close()


def test_a_repeated_id_in_the_state_is_read_once(app_factory: Any) -> None:
    state = {"block": ["send_email"] * 5000, "loaded": ["get_weather_forecast"] * 3, "called": ["x"] * 5}
    with app_factory(catalogs=CATALOGS, selector="lexical") as srv, srv.client() as c:
        for policy in ("per_turn", "stable", "deferred"):
            r = c.post("/v1/offer", json={"catalog": "example", "query": "email", "state": state, "policy": policy})
            assert r.status_code == 200, r.text
            out = r.json()["state"]
            for field in ("block", "loaded", "called"):
                assert len(out[field]) == len(set(out[field])), (policy, field)
        found = c.post("/v1/offer/search", json={"catalog": "example", "query": "weather", "state": state})
        assert found.status_code == 200, found.text
        assert found.json()["state"]["block"].count("send_email") == 1


def test_every_answer_at_the_counters_maximum_is_a_valid_next_request(app_factory: Any) -> None:
    from shortlist.offer._state import MAX_STATE_COUNT

    state: dict[str, Any] = {"turns": MAX_STATE_COUNT, "changes": MAX_STATE_COUNT, "block": ["send_email"]}
    with app_factory(catalogs=CATALOGS, selector="lexical") as srv, srv.client() as c:
        for policy in ("per_turn", "stable", "deferred"):
            r = c.post("/v1/offer", json={"catalog": "example", "query": "weather", "state": state, "policy": policy})
            assert r.status_code == 200, r.text
            answer = r.json()["state"]
            assert answer["turns"] == MAX_STATE_COUNT and answer["changes"] == MAX_STATE_COUNT
            again = c.post("/v1/offer", json={"catalog": "example", "query": "flight", "state": answer})
            assert again.status_code == 200, again.text
            found = c.post("/v1/offer/search", json={"catalog": "example", "query": "hotel", "state": state})
            assert found.status_code == 200 and found.json()["state"]["changes"] == MAX_STATE_COUNT
        too_many = {"turns": MAX_STATE_COUNT + 1}
        r = c.post("/v1/offer", json={"catalog": "example", "query": "weather", "state": too_many})
        assert r.status_code == 400 and "state.turns" in r.json()["error"]["message"]


def test_the_answer_says_which_fixed_tools_to_offer(app_factory: Any) -> None:
    """A chat-completions client under deferred must offer call_tool: the answer says so and defines it."""
    from shortlist.offer._bridge import CALL_TOOL_PARAMETERS
    from shortlist.offer._search import SEARCH_TOOL_PARAMETERS

    messages = [{"role": "user", "content": "what is the weather forecast in Paris tomorrow"}]
    with app_factory(catalogs=CATALOGS, selector="bm25") as srv, srv.client() as c:

        def ask(**extra: Any) -> dict[str, Any]:
            answer = c.post("/v1/offer", json={"catalog": "example", "messages": messages, **extra})
            assert answer.status_code == 200, answer.text
            body: dict[str, Any] = answer.json()
            return body

        chat = ask()
        anthropic = ask(format="anthropic")
        responses = ask(format="openai-responses")
        stable = ask(policy="stable")
        per_turn = ask(policy="per_turn")
    assert chat["bridge"] is True and [t["name"] for t in chat["fixed_tools"]] == ["find_tools", "call_tool"]
    assert chat["fixed_tools"][1]["parameters"] == CALL_TOOL_PARAMETERS
    assert chat["fixed_tools"][0]["parameters"] == SEARCH_TOOL_PARAMETERS
    for native in (anthropic, responses):  # deferral of their own: no bridge
        assert native["policy"] == "deferred" and native["bridge"] is False
        assert [t["name"] for t in native["fixed_tools"]] == ["find_tools"]
    assert stable["bridge"] is False and [t["name"] for t in stable["fixed_tools"]] == ["find_tools"]
    assert per_turn["bridge"] is False and per_turn["fixed_tools"] == []  # no search tool either


#: Four tools with the same words: every one scores the same for "send a message", a flat top (names that
#: differ in a word: ``send_0`` and ``send_1`` would be versions of one tool, which takes one place).
TIES = [{"id": f"send_{w}", "name": f"send_{w}", "description": "Send a message."} for w in ("a", "b", "c", "d")]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"prefetch_cold": 0}, 4),
        ({"prefetch_max": 2, "prefetch_cold": 0}, 2),
        ({"prefetch_max": 0, "prefetch_cold": 0}, 1),
        ({"prefetch_max": 1}, 3),  # nothing called yet: 2 more, widened 2 further
        ({"prefetch_max": 1, "state": {"called": ["send_d"]}}, 1),  # a tool was called: no cold extra
    ],
)
def test_prefetch_max_and_cold_bound_the_widening_of_a_flat_top(
    app_factory: Any, options: dict[str, Any], expected: int
) -> None:
    body: dict[str, Any] = {"candidates": TIES, "query": "send a message", "policy": "deferred", "k": 1, "prefetch": 1}
    with app_factory(selector="bm25") as srv, srv.client() as c:
        r = c.post("/v1/offer", json={**body, **options})
    assert r.status_code == 200, r.text
    assert len(r.json()["prefetched"]) == expected


def test_the_deep_prefetch_slots_leave_long_definitions_unless_told_any_size(app_factory: Any) -> None:
    """The 2nd tool of a flat top, past ``prefetch``, has a long definition: left to a search by
    default, loaded with ``prefetch_tokens: null`` (any size) or a limit it fits."""
    long = "Delivered to its channel with thread, mentions, attachments and formatting options. " * 12
    tools = [{**TIES[0]}, {**TIES[1], "description": "Send a message. " + long}, *TIES[2:]]
    body: dict[str, Any] = {"candidates": tools, "query": "send a message", "policy": "deferred", "k": 1}
    body |= {"prefetch": 1, "prefetch_cold": 0, "prefetch_max": 4}
    with app_factory(selector="bm25") as srv, srv.client() as c:
        default, any_size, roomy = (
            c.post("/v1/offer", json={**body, **extra})
            for extra in ({}, {"prefetch_tokens": None}, {"prefetch_tokens": 100_000})
        )
    for r in (default, any_size, roomy):
        assert r.status_code == 200, r.text
    assert "send_b" not in default.json()["prefetched"] and len(default.json()["prefetched"]) == 3
    assert "send_b" in any_size.json()["prefetched"] and len(any_size.json()["prefetched"]) == 4
    assert roomy.json()["prefetched"] == any_size.json()["prefetched"]


def test_a_search_page_leaves_long_definitions_after_its_first_unless_told_any_size(app_factory: Any) -> None:
    long = "Delivered to its channel with thread, mentions, attachments and formatting options. " * 16
    tools = [{**TIES[0]}, {**TIES[1], "description": "Send a message. " + long}, *TIES[2:]]
    body: dict[str, Any] = {"candidates": tools, "query": "send a message", "policy": "deferred", "k": 4}
    with app_factory(selector="bm25") as srv, srv.client() as c:
        default, any_size = (
            c.post("/v1/offer/search", json={**body, **extra}) for extra in ({}, {"search_tokens": None})
        )
    assert default.status_code == any_size.status_code == 200, default.text + any_size.text
    found = [t["id"] for t in default.json()["tools"]]
    assert "send_b" not in found and len(found) == 3 and default.json()["state"]["loaded"] == found
    assert sorted(t["id"] for t in any_size.json()["tools"]) == [t["id"] for t in TIES]


def test_companions_come_from_the_bound_feedback_log_and_follow_it(tmp_path: Path, app_factory: Any) -> None:
    """A service bound to a feedback log (``--examples``) brings a likely tool's usual companions,
    as a local session on the same log does, and reads the log again when another writer grows it."""
    from shortlist.feedback import FeedbackStore

    log = tmp_path / "feedback.db"
    with FeedbackStore(log) as writer:
        writer.record("fly to Rome and pay in euros", used=["search_flights", "convert_currency"])
    body = {"catalog": "example", "query": "search flights to Rome", "k": 2, "prefetch": 1, "prefetch_max": 1}
    body |= {"prefetch_cold": 0, "format": "anthropic"}
    with Shortlist(str(EXAMPLE_CATALOG), selector="bm25", examples=str(log)) as local_sl:
        local = ToolSession(local_sl, policy="deferred", k=2, prefetch=1, prefetch_max=1, prefetch_cold=0)
        expected = offer_json(local.offer("search flights to Rome"), "anthropic")
    with (
        app_factory(catalogs=CATALOGS, selector="bm25", examples_path=str(log)) as srv,
        app_factory(catalogs=CATALOGS, selector="bm25") as plain,
        srv.client() as c,
        plain.client() as p,
    ):
        first = c.post("/v1/offer", json=body).json()
        assert first["prefetched"] == ["search_flights", "convert_currency"]
        assert first["companions"] == ["convert_currency"]
        assert _without_timing(first) == _without_timing(expected)
        without = p.post("/v1/offer", json=body).json()
        assert without["prefetched"] == ["search_flights"] and without["companions"] == []
        search = {"catalog": "example", "query": "search flights", "k": 1, "format": "anthropic"}
        found = c.post("/v1/offer/search", json=search).json()
        assert [t["id"] for t in found["tools"]] == ["search_flights", "convert_currency"]
        with FeedbackStore(log) as writer:  # another writer teaches the log: the next answer follows
            for _ in range(3):
                writer.record("fly and book", used=["search_flights", "book_hotel"])
        again = c.post("/v1/offer", json=body).json()
        assert again["companions"][0] == "book_hotel"
