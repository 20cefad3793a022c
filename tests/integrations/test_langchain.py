"""LangChain v1 agent middleware, a LangGraph ``bind_tools`` node, bigtool's retrieve_tools, on the real libraries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

from integration_helpers import (
    FUNCTIONS,
    NAMES,
    SYSTEM,
    TRAVEL,
    TRAVEL_SEARCH,
    TURNS,
    Events,
    assert_searches_page_past_the_offer,
)
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_fakes import RecordingModel, ScriptsByConversation, call

from shortlist.integrations._core import ToolNarrower, found_in
from shortlist.integrations.langchain import (
    ShortlistMiddleware,
    find_tools_tool,
    narrowed_tools,
    retrieve_tools_functions,
)
from shortlist.testing import FailingSelector


def tools() -> list[BaseTool]:
    return [StructuredTool.from_function(f) for f in FUNCTIONS]


def test_middleware_narrows_every_model_call_and_find_tools_reaches_the_rest() -> None:
    script = [
        call("get_weather", {"city": "Paris"}, "c1"),
        AIMessage(content="Sunny in Paris."),
        call("find_tools", {"query": "convert money into another currency"}, "c2"),
        call("convert_currency", {"amount": 10.0, "currency": "EUR"}, "c3"),
        AIMessage(content="Booked; 10 EUR."),
    ]
    model = RecordingModel(messages=iter(script))
    events = Events()
    middleware = ShortlistMiddleware(selector="bm25", k=3, on_event=events, policy="per_turn")
    agent = create_agent(model, tools=tools(), middleware=[middleware])

    state = agent.invoke({"messages": [HumanMessage("what is the weather forecast in Paris?")]})
    first, second = model.seen
    assert "get_weather" in first and "find_tools" in first
    assert len(first) <= 4 and set(first) < {*NAMES, "find_tools"}
    assert second == first  # the tool round of one turn reuses the turn's selection

    state["messages"].append(HumanMessage("book a flight ticket to Rome"))
    state = agent.invoke(state)  # type: ignore[arg-type]
    third, fourth, fifth = model.seen[2:]
    assert "book_flight" in third and "convert_currency" not in third
    assert "convert_currency" in fourth and "convert_currency" in fifth  # found by find_tools, callable now
    assert state["messages"][-1].content == "Booked; 10 EUR."
    assert [m.content for m in state["messages"] if m.type == "tool" and m.name == "convert_currency"] == ["10.0 EUR"]
    assert next(e["found"] for e in events.named("selection.tool_searched"))[0] == "convert_currency"
    assert not events.named("selection.fallback")


def test_a_failing_selector_leaves_the_agent_with_every_tool() -> None:
    model = RecordingModel(messages=iter([call("stock_price", {"ticker": "ACME"}, "c1"), AIMessage(content="100")]))
    events = Events()
    agent = create_agent(
        model, tools=tools(), middleware=[ShortlistMiddleware(selector=FailingSelector(), on_event=events)]
    )
    state = agent.invoke({"messages": [HumanMessage("price of ACME shares")]})
    assert all(set(seen) == set(NAMES) for seen in model.seen) and len(model.seen) == 2
    assert state["messages"][-1].content == "100"
    [fallback] = events.named("selection.fallback")
    assert fallback["reason"] == "error" and fallback["selector"] == "failing"


async def test_middleware_async_path() -> None:
    model = RecordingModel(messages=iter([AIMessage(content="ok")]))
    agent = create_agent(model, tools=tools(), middleware=[ShortlistMiddleware(selector="bm25", k=2)])
    state = await agent.ainvoke({"messages": [HumanMessage("translate this text into Spanish")]})
    assert state["messages"][-1].content == "ok"
    [seen] = model.seen
    assert "translate_text" in seen and len(seen) <= 3


def test_provider_tool_dicts_are_kept_and_a_tool_named_find_tools_is_not_narrowed_away() -> None:
    model = RecordingModel(messages=iter([AIMessage(content="ok")]))
    middleware = ShortlistMiddleware(selector="bm25", k=1)
    provider_tool = {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}
    agent = create_agent(model, tools=[*tools(), provider_tool], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("play a song by Queen")]})
    [seen] = model.seen
    assert seen[0] == "play_music" and "web_search" in seen and "find_tools" in seen


def _hand_wired_graph(narrower: ToolNarrower, model: RecordingModel) -> Any:
    """The LangGraph of docs/integrations/langchain.md: a model node binding the narrowed tools, a ToolNode."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    all_tools = tools()
    search = find_tools_tool(narrower, all_tools)

    def model_node(state: MessagesState) -> dict[str, Any]:
        bound = model.bind_tools(narrowed_tools(narrower, all_tools, state["messages"], search_tool=search))
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model_node)
    graph.add_node("tools", ToolNode([*all_tools, search]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def test_langgraph_model_node_binds_the_narrowed_tools() -> None:
    model = RecordingModel(
        messages=iter(
            [
                call("find_tools", {"query": "send an email message"}, "c1"),
                call("send_email", {"to": "a", "body": "b"}, "c2"),
                AIMessage(content="done"),
            ]
        )
    )
    app = _hand_wired_graph(ToolNarrower(selector="bm25", k=2), model)
    out = app.invoke({"messages": [HumanMessage("reserve a hotel room in Lisbon")]})
    assert out["messages"][-1].content == "done"
    first, second, _ = model.seen
    assert "book_hotel" in first and "send_email" not in first and "find_tools" in first
    assert "send_email" in second


async def test_bigtool_retrieve_tools_ranks_the_registry() -> None:
    # langgraph-bigtool 0.0.3 (the latest) no longer runs on langgraph 1.x (ToolNode.inject_tool_args is gone), so
    # this builds its retrieve_tools tool the way its create_agent does and calls it both ways.
    registry: dict[str, Any] = {f"id-{f.__name__}": f for f in FUNCTIONS}
    events = Events()
    retrieve, aretrieve = retrieve_tools_functions(registry, selector="bm25", search_k=2, on_event=events)
    tool = StructuredTool.from_function(func=retrieve, coroutine=aretrieve)
    assert tool.name == "retrieve_tools" and set(tool.args) == {"query"}
    assert tool.invoke({"query": "what is the weather forecast"})[0] == "id-get_weather"
    assert (await tool.ainvoke({"query": "stock market price"}))[0] == "id-stock_price"
    assert len(retrieve("book a hotel room")) == 2
    assert [e["found"][0] for e in events.named("selection.tool_searched")] == [
        "id-get_weather",
        "id-stock_price",
        "id-book_hotel",
    ]


def test_stable_offers_the_same_tools_every_turn_and_grows_only_by_what_find_tools_found() -> None:
    script = [
        AIMessage(content="Sunny."),
        AIMessage(content="Booked."),
        call("find_tools", {"query": "convert money into another currency"}, "c1"),
        call("convert_currency", {"amount": 10.0, "currency": "EUR"}, "c2"),
        AIMessage(content="10 EUR."),
        AIMessage(content="Playing."),
    ]
    model = RecordingModel(messages=iter(script))
    events = Events()
    middleware = ShortlistMiddleware(selector="bm25", k=3, search_k=1, horizon=1, on_event=events)  # stable: default
    agent = create_agent(model, tools=tools(), system_prompt=SYSTEM, middleware=[middleware])
    state: Any = {"messages": []}
    for turn in TURNS:
        state["messages"].append(HumanMessage(turn))
        state = agent.invoke(state)
    t1, t2, t3, t4, t5, t6 = model.seen
    assert "get_weather" in t1 and "find_tools" in t1 and len(t1) <= 4
    assert t1 == t2 == t3 and "book_flight" not in t2  # the second turn's request did not re-select
    assert t4 == t5 == t6 and set(t4) - set(t1) == {"convert_currency"} and set(t1) <= set(t4)
    assert state["messages"][-1].content == "Playing."
    assert not events.named("selection.fallback") and not events.named("selection.offer_changed")


def test_per_turn_re_selects_on_every_user_message() -> None:
    model = RecordingModel(messages=iter([AIMessage(content="a"), AIMessage(content="b"), AIMessage(content="c")]))
    middleware = ShortlistMiddleware(selector="bm25", k=3, policy="per_turn")
    agent = create_agent(model, tools=tools(), system_prompt=SYSTEM, middleware=[middleware])
    state: Any = {"messages": []}
    for turn in (TURNS[0], TURNS[1], TURNS[3]):
        state["messages"].append(HumanMessage(turn))
        state = agent.invoke(state)
    t1, t2, t3 = model.seen
    assert "get_weather" in t1 and "book_flight" in t2 and "play_music" in t3
    assert t1 != t2 != t3


def test_find_tools_leaves_out_what_the_model_call_was_offered_and_pages_on() -> None:
    script = [
        call("find_tools", {"query": TRAVEL_SEARCH}, "c1"),
        call("find_tools", {"query": TRAVEL_SEARCH}, "c2"),
        AIMessage(content="done"),
    ]
    model = RecordingModel(messages=iter(script))
    middleware = ShortlistMiddleware(selector="bm25", k=2, search_k=2, policy="per_turn")
    agent = create_agent(model, tools=tools(), middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage(TRAVEL)]})
    results = [str(m.content) for m in state["messages"] if m.type == "tool" and m.name == "find_tools"]
    assert_searches_page_past_the_offer([n for n in model.seen[0] if n != "find_tools"], results)


async def test_concurrent_conversations_each_search_past_their_own_offer() -> None:
    weather = "what is the weather forecast in Paris?"
    query = "the weather forecast, or book a flight ticket and a hotel room"  # each one's offer ranks first
    model = ScriptsByConversation(
        scripts={
            TRAVEL: [call("find_tools", {"query": query}, "t1"), AIMessage(content="ok")],
            weather: [call("find_tools", {"query": query}, "w1"), AIMessage(content="ok")],
        }
    )
    middleware = ShortlistMiddleware(selector="bm25", k=2, search_k=2, policy="per_turn")
    agent = create_agent(model, tools=tools(), middleware=[middleware])
    travel, weathered = await asyncio.gather(
        agent.ainvoke({"messages": [HumanMessage(TRAVEL)]}), agent.ainvoke({"messages": [HumanMessage(weather)]})
    )
    offers = {key: {n for n in model.seen[key][0] if n != "find_tools"} for key in (TRAVEL, weather)}
    assert offers[TRAVEL] != offers[weather]
    for key, state in ((TRAVEL, travel), (weather, weathered)):
        [result] = [str(m.content) for m in state["messages"] if m.type == "tool" and m.name == "find_tools"]
        found = found_in(result)
        assert found and not set(found) & offers[key], (key, offers, found)  # its own offer, not the other's


def test_a_hand_wired_graphs_find_tools_reads_the_conversation_from_the_state() -> None:
    model = RecordingModel(
        messages=iter(
            [
                call("find_tools", {"query": TRAVEL_SEARCH}, "c1"),
                call("find_tools", {"query": TRAVEL_SEARCH}, "c2"),
                AIMessage(content="done"),
            ]
        )
    )
    app = _hand_wired_graph(ToolNarrower(selector="bm25", k=2, search_k=2, policy="per_turn"), model)
    out = app.invoke({"messages": [HumanMessage(TRAVEL)]})
    results = [str(m.content) for m in out["messages"] if m.type == "tool" and m.name == "find_tools"]
    assert_searches_page_past_the_offer([n for n in model.seen[0] if n != "find_tools"], results)
