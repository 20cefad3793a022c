"""Offer policies end to end: a scripted model behind real HTTP drives multi-turn conversations.

The Anthropic conversation goes through the official SDK (``AsyncAnthropic.messages.create``)
to a loopback Messages server, and every request it received is checked against the SDK's
request types: deferred tools, the ``find_tools`` escape hatch, a tool it found, the cache
breakpoints, the prefix that survives from turn to turn, and the feedback log.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import anthropic
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from sdk_shapes import check

from shortlist._types import Selection
from shortlist.errors import ConfigError
from shortlist.feedback import FeedbackStore
from shortlist.runtime import ChatModel, Conversation, OpenAIChatModel, Pack, Tool
from shortlist.selection._base import FunctionSelector


def get_weather(city: str) -> dict[str, str]:
    """Get the weather forecast for a city."""
    return {"city": city, "forecast": "sunny"}


def send_email(to: str, body: str) -> str:
    """Send an email message to a recipient."""
    return f"sent to {to}"


def convert_currency(amount: float, to: str) -> str:
    """Convert money amounts between currencies."""
    return "42"


def book_flight(origin: str, destination: str) -> str:
    """Book a flight ticket between two airports."""
    return "booked"


TOOLS = [Tool.from_function(f) for f in (get_weather, send_email, convert_currency, book_flight)]


class SDKModel(ChatModel):
    """The official Anthropic SDK as the runtime's model: it serialises what the runtime built."""

    def __init__(self, url: str) -> None:
        self.model = "claude-test"
        self.client = anthropic.AsyncAnthropic(base_url=url, api_key="test-key", max_retries=0)

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        message = await self.client.messages.create(**request)
        return message.model_dump(mode="json")

    async def aclose(self) -> None:
        await self.client.close()


def anthropic_script(req: dict[str, Any]) -> list[dict[str, Any]]:
    """Weather → get_weather; email → find_tools first, then the tool it found; results → answer."""
    last = req["messages"][-1]["content"]
    results = [b for b in last if b.get("type") == "tool_result"]
    if results:
        content = results[-1]["content"]
        if isinstance(content, list) and content and content[0].get("type") == "tool_reference":
            name = content[0]["tool_name"]
            return [
                {
                    "type": "tool_use",
                    "id": f"u{len(req['messages'])}",
                    "name": name,
                    "input": {"to": "bob", "body": "hi"},
                }
            ]
        return [{"type": "text", "text": "done: " + str(content)[:60]}]
    text = " ".join(b.get("text", "") for b in last if b.get("type") == "text")
    if "weather" in text:
        return [{"type": "tool_use", "id": "w1", "name": "get_weather", "input": {"city": "Paris"}}]
    names = {t["name"] for t in req["tools"] if not t.get("defer_loading")}
    loaded = {
        r["tool_name"]
        for m in req["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
        for r in b["content"]
    }
    if "send_email" in names | loaded:
        return [
            {
                "type": "tool_use",
                "id": f"e{len(req['messages'])}",
                "name": "send_email",
                "input": {"to": "al", "body": "x"},
            }
        ]
    return [
        {
            "type": "tool_use",
            "id": f"f{len(req['messages'])}",
            "name": "find_tools",
            "input": {"query": "send an email"},
        }
    ]


def only_weather(q: Any, c: Any) -> list[str]:
    return ["get_weather"]


def test_anthropic_deferred_conversation_over_the_sdk(anthropic_server) -> None:  # type: ignore[no-untyped-def]
    server = anthropic_server(anthropic_script)
    feedback = FeedbackStore()
    conv = Conversation(
        Pack(tools=TOOLS, feedback=feedback),
        model=SDKModel(server.url),
        format="anthropic",
        k=1,
        prefetch=0,
        hot=1,  # keep the first turn's top tool in the fixed block
        tool_selector=FunctionSelector(only_weather, name="weather-only"),
    )
    assert conv.offer_policy == "deferred"  # the Anthropic default
    try:
        r1 = conv.send("what is the weather in Paris")
        r2 = conv.send("email bob to say hi")  # not offered: the model searches, then calls it
        r3 = conv.send("email alice too")  # loaded in turn 2: called directly
    finally:
        conv.close()
    for req in server.requests:
        check(req, MessageCreateParamsNonStreaming)
        tools = {t["name"]: t for t in req["tools"]}
        assert "defer_loading" not in tools["get_weather"] and "defer_loading" not in tools["find_tools"]
        assert all(tools[n]["defer_loading"] is True for n in ("send_email", "convert_currency", "book_flight"))
        assert [t["name"] for t in req["tools"] if "cache_control" in t] == ["find_tools"]
        assert "cache_control" in req["system"][0] and "cache_control" in req["messages"][-1]["content"][-1]
    # the tools block and the system prompt never changed: one cached prefix for the whole conversation
    assert len({json.dumps([r["tools"], r["system"]]) for r in server.requests}) == 1
    assert (r1.report.prefix_cached, r2.report.prefix_cached, r3.report.prefix_cached) == (False, True, True)
    assert r1.answer.startswith("done") and [c.name for c in r1.report.tool_calls] == ["get_weather"]
    assert [c.name for c in r2.report.tool_calls] == ["find_tools", "send_email"]
    assert r2.report.tool_calls[1].ok and "sent to bob" in r2.answer
    assert [s["query"] for s in r2.report.searches] == ["send an email"]
    assert r2.report.searches[0]["found"][0] == "send_email"
    # the search result carried tool_reference blocks
    found = next(
        b for m in server.requests[-1]["messages"] for b in m["content"] if b.get("tool_use_id", "").startswith("f")
    )
    assert {"type": "tool_reference", "tool_name": "send_email"} in found["content"]
    assert [c.name for c in r3.report.tool_calls] == ["send_email"] and r3.report.tool_calls[0].ok
    assert r3.report.offer is not None and r3.report.offer["policy"] == "deferred"
    assert "send_email" in r3.report.offer["loaded"] and r3.report.offer["block"] == ["get_weather"]
    assert r1.report.tool_tokens > 0 and r3.report.tool_tokens > r1.report.tool_tokens  # loaded definitions count
    assert conv.session.state.called == ("get_weather", "send_email")
    assert any(e["name"] == "selection.tool_searched" for e in r2.report.events)
    # the search and every turn are in the feedback log, with the tools the model then called as uses
    assert set(feedback.examples(kind="tool")["send_email"]) == {
        "send an email",
        "email bob to say hi",
        "email alice too",
    }
    assert feedback.examples(kind="tool")["get_weather"] == ["what is the weather in Paris"]
    assert ("send_email",) in feedback.used_sets()


def test_prefetched_tools_arrive_as_a_synthetic_search_pair() -> None:
    requests: list[dict[str, Any]] = []

    def script(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(req)
        return {"content": anthropic_script(req)}

    def rank(q: Any, c: Any) -> list[str]:
        return ["send_email", "get_weather"] if "email" in q.text else ["get_weather"]

    conv = Conversation(Pack(tools=TOOLS), model=script, format="anthropic", k=1, tool_selector=FunctionSelector(rank))
    conv.send("what is the weather in Paris")
    n = len(requests)
    result = conv.send("email bob to say hi")
    first = requests[n]
    check(first, MessageCreateParamsNonStreaming)
    user, call, res = first["messages"][-3:]
    assert user["content"][0]["text"] == "email bob to say hi"
    assert call["content"][0]["type"] == "tool_use" and call["content"][0]["name"] == "find_tools"
    assert res["content"][0]["content"] == [{"type": "tool_reference", "tool_name": "send_email"}]
    assert [c.name for c in result.report.tool_calls] == ["send_email"]  # no search round trip needed
    assert result.report.offer is not None and result.report.offer["prefetched"] == ["send_email"]
    assert result.report.rounds == 2 and result.report.prefix_cached
    assert any(e["name"] == "runtime.tools_prefetched" for e in result.report.events)


def openai_script(req: dict[str, Any]) -> dict[str, Any]:
    last = req["messages"][-1]
    names = [t["function"]["name"] for t in req.get("tools", [])]
    fn = None
    if last["role"] == "user":
        if "weather" in last["content"]:
            fn = {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}
        elif "send_email" in names:
            fn = {"name": "send_email", "arguments": json.dumps({"to": "al", "body": "x"})}
        else:
            fn = {"name": "find_tools", "arguments": json.dumps({"query": "send an email"})}
    elif last["role"] == "tool" and "send_email" in last["content"] and "found" in last["content"]:
        fn = {"name": "send_email", "arguments": json.dumps({"to": "bob", "body": "hi"})}
    if fn is None:
        return {"role": "assistant", "content": "done: " + last["content"][:60]}
    call_id = f"c{len(req['messages'])}"
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}


def test_openai_stable_conversation_over_http(chat_server) -> None:  # type: ignore[no-untyped-def]
    server = chat_server(openai_script)
    conv = Conversation(
        Pack(tools=TOOLS),
        model=OpenAIChatModel("scripted", base_url=server.url, api_key_env=None),
        k=1,
        search_k=1,
        tool_selector=FunctionSelector(only_weather, name="weather-only"),
        offer_policy="stable",
    )
    assert conv.offer_policy == "stable" and conv.tool_loading == "native"
    try:
        r1 = conv.send("what is the weather in Paris")
        r2 = conv.send("email bob to say hi")
        r3 = conv.send("email alice too")
    finally:
        conv.close()
    for req in server.requests:
        check(req, CompletionCreateParamsNonStreaming)
        assert list(req) == ["model", "tools", "messages"]
    tool_lists = [[t["function"]["name"] for t in r["tools"]] for r in server.requests]
    assert tool_lists[0] == ["get_weather", "find_tools"]
    assert tool_lists[-1] == ["get_weather", "send_email", "find_tools"]  # found once, joined the block
    assert [c.name for c in r2.report.tool_calls] == ["find_tools", "send_email"]
    assert r2.report.searches == [{"query": "send an email", "found": ["send_email"]}]
    assert [c.name for c in r3.report.tool_calls] == ["send_email"]
    assert r3.report.offer is not None and r3.report.offer["block"] == ["get_weather", "send_email"]
    assert r3.report.offer["state"]["changes"] == 1
    # the prefix turn 3 sends is the one turn 2's last call cached
    assert (r1.report.prefix_cached, r2.report.prefix_cached, r3.report.prefix_cached) == (False, True, True)
    assert any(e["name"] == "selection.offer_changed" for e in r2.report.events)


def test_openai_deferred_adds_found_tools_and_carries_definitions() -> None:
    requests: list[dict[str, Any]] = []

    def script(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(req)
        return {"choices": [{"message": openai_script(req)}]}

    conv = Conversation(
        Pack(tools=TOOLS),
        model=script,
        offer_policy="deferred",
        tool_loading="native",  # found tools join the tools array (the default for chat is the bridge)
        prefetch=0,
        hot=1,  # keep the first turn's top tool in the fixed block
        k=1,
        search_k=1,
        tool_selector=FunctionSelector(only_weather, name="weather-only"),
    )
    result = conv.send("email bob to say hi")
    search_result = json.loads(requests[1]["messages"][-1]["content"])
    assert search_result["found"][0]["name"] == "send_email" and "parameters" in search_result["found"][0]
    assert [t["function"]["name"] for t in requests[1]["tools"]] == ["get_weather", "find_tools", "send_email"]
    assert [c.name for c in result.report.tool_calls] == ["find_tools", "send_email"]
    assert result.report.offer is not None and result.report.offer["block"] == ["get_weather"]


def test_per_turn_offers_no_search_tool() -> None:
    offered: list[list[str]] = []

    def script(req: dict[str, Any]) -> dict[str, Any]:
        offered.append([t["function"]["name"] for t in req.get("tools", [])])
        return {"role": "assistant", "content": "ok"}

    conv = Conversation(
        Pack(tools=TOOLS), model=script, offer_policy="per_turn", k=1, tool_selector=FunctionSelector(only_weather)
    )
    result = conv.send("anything")
    assert offered == [["get_weather"]] and result.report.offer is not None
    assert result.report.offer["policy"] == "per_turn" and result.report.offer["search_tool"] is False


@pytest.mark.parametrize("name", ["memory__remember", "skill__activate", "find_tools"])
def test_reserved_tool_names_are_refused(name: str) -> None:
    def f(x: str) -> str:
        """A host function."""
        return x

    with pytest.raises(ConfigError, match=f"{name}.*reserved"):
        Conversation(Pack(tools=[Tool.from_function(f, name=name)]), model=lambda r: {})


def test_bad_offer_policy() -> None:
    with pytest.raises(ConfigError, match="offer_policy"):
        Conversation(Pack(), model=lambda r: {}, offer_policy="sometimes")  # type: ignore[arg-type]


def test_two_threads_sending_on_one_conversation_both_complete() -> None:
    inside = threading.Event()

    async def script(req: dict[str, Any]) -> dict[str, Any]:
        inside.set()
        time.sleep(0.05)  # blocks the conversation's loop: the other turn must wait its turn, not deadlock
        return {"role": "assistant", "content": "ok"}

    conv = Conversation(Pack(tools=TOOLS), model=script, tool_selector=None)
    results: list[str] = []
    errors: list[BaseException] = []

    def worker(text: str) -> None:
        try:
            results.append(conv.send(text).answer)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    try:
        assert not errors and results == ["ok", "ok"] and inside.is_set()
        assert [m["role"] for m in conv.history] == ["user", "assistant", "user", "assistant"]
    finally:
        conv.close()
    with pytest.raises(RuntimeError, match="closed"):
        conv.send("after close")


def test_a_packs_feedback_log_teaches_the_prefetch_what_comes_along(tmp_path: Any) -> None:
    feedback = FeedbackStore(tmp_path / "fb.db")
    for text in ("book a flight to Rome and pay in euros", "flight to Oslo, in crowns"):
        feedback.record(text, selected=["book_flight"], used=["book_flight", "convert_currency"])

    def answer(req: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}

    def flights(q: Any, c: Any) -> list[str]:
        return ["book_flight"] if "flight" in q.text else ["get_weather"]

    conv = Conversation(
        Pack(tools=TOOLS, feedback=feedback),
        model=answer,
        format="anthropic",
        k=1,
        tool_selector=FunctionSelector(flights, name="flights"),
    )
    try:
        conv.send("what is the weather in Paris")
        second = conv.send("book a flight to Rome")
    finally:
        conv.close()
    assert second.report.offer is not None
    assert second.report.offer["prefetched"] == ["book_flight", "convert_currency"]  # learned, never named


def answering_ok(rank: Any, **options: Any) -> Conversation:
    """An Anthropic-format conversation over TOOLS ranked by ``rank``, whose model answers "ok" (no tool call)."""
    return Conversation(
        Pack(tools=TOOLS),
        model=lambda req: {"content": [{"type": "text", "text": "ok"}]},
        format="anthropic",
        tool_selector=FunctionSelector(rank),
        **options,
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"prefetch_cold": 0}, 4),  # the default prefetch_max (4)
        ({"prefetch_max": 2, "prefetch_cold": 0}, 2),
        ({"prefetch_max": 0, "prefetch_cold": 0}, 1),  # no widening
        ({"prefetch_max": 1}, 3),  # nothing called yet: 1 + 2 loaded, up to 1 + 2
    ],
)
def test_prefetch_max_and_cold_bound_the_widening_of_a_flat_top(options: dict[str, Any], expected: int) -> None:
    """Four tools scored alike are a flat top: the prefetch widens from ``prefetch`` up to ``prefetch_max``,
    both ``prefetch_cold`` more while the conversation has called nothing."""

    def rank(q: Any, c: Any) -> Selection:
        return Selection(("send_email", "get_weather", "convert_currency", "book_flight"), scores=(1.0,) * 4)

    conv = answering_ok(rank, prefetch=1, **options)
    result = conv.send("email bob")
    assert result.report.offer is not None and len(result.report.offer["prefetched"]) == expected


def test_a_ranking_without_scores_prefetches_its_own_top_in_its_own_order() -> None:
    """Ids without scores say nothing about flatness, and a boost in score units must not reorder them."""

    def rank(q: Any, c: Any) -> list[str]:
        return ["convert_currency", "book_flight", "send_email", "get_weather"]

    conv = answering_ok(rank, prefetch=2)
    conv.session.record_calls(["get_weather"])  # a server in use would lift its tools on scores
    result = conv.send("anything")
    assert result.report.offer is not None
    assert result.report.offer["prefetched"] == ["convert_currency", "book_flight"]


def test_the_servers_in_use_reorder_a_scored_ranking_but_never_an_unscored_one() -> None:
    from shortlist._types import Candidate, Query, TurnSelection
    from shortlist.offer._policies import suite_reranked

    tools = [
        Candidate(id=i, name=i, description=i, metadata={"server": s}) for i, s in (("a", "x"), ("b", "y"), ("c", "y"))
    ]
    by_id = {c.id: c for c in tools}
    scored = TurnSelection(Query("q"), tuple(tools), ranked=("a", "b", "c"), scores={"a": 1.0, "b": 0.9, "c": 0.5})
    order, boosted = suite_reranked(scored, by_id, ["b"], 0.3)
    assert order == ["b", "a", "c"] and boosted["b"] == pytest.approx(1.2)  # server y is in use
    unscored = TurnSelection(Query("q"), tuple(tools), ranked=("a", "b", "c"))
    order, _ = suite_reranked(unscored, by_id, ["b"], 0.3)
    assert order == ["a", "b", "c"]  # the selector's own order: no scores to add a boost to


def test_the_prefetch_event_names_the_co_usage_companions() -> None:
    from shortlist.selection._cousage import CoUsage

    taught = CoUsage(min_count=1)
    taught.observe(["send_email", "get_weather"])

    def rank(q: Any, c: Any) -> Selection:
        return Selection(("send_email", "book_flight"), scores=(2.0, 1.0))

    conv = answering_ok(rank, prefetch=1, prefetch_cold=0, co_usage=taught)
    result = conv.send("email bob")
    assert result.report.offer is not None
    assert result.report.offer["prefetched"] == ["send_email", "get_weather"]
    assert result.report.offer["companions"] == ["get_weather"]
    (event,) = [e for e in result.report.events if e["name"] == "runtime.tools_prefetched"]
    assert list(event["tools"]) == ["send_email", "get_weather"] and list(event["companions"]) == ["get_weather"]
