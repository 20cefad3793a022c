"""PydanticAI: the ``ShortlistTools`` capability and the ``prepare_tools`` hook, on the real library (FunctionModel)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

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
from pydantic_ai import Agent
from pydantic_ai.capabilities import PrepareTools
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from shortlist.integrations._core import ToolNarrower
from shortlist.integrations.pydantic_ai import ShortlistTools, find_tools_tool, prepare_tools
from shortlist.testing import FailingSelector


class Scripted:
    """A FunctionModel body: answers from a script and records the tool names of every model request."""

    def __init__(self, *steps: ModelResponse) -> None:
        self.steps = list(steps)
        self.seen: list[list[str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append([t.name for t in info.function_tools])
        return self.steps.pop(0)


def call(name: str, args: dict[str, Any]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, json.dumps(args))])


def text(answer: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(answer)])


async def test_capability_narrows_each_step_and_find_tools_reaches_the_rest() -> None:
    events = Events()
    script = Scripted(
        call("get_weather", {"city": "Paris"}),
        text("Sunny."),
        call("find_tools", {"query": "convert money into another currency"}),
        call("convert_currency", {"amount": 3.0, "currency": "JPY"}),
        text("Booked; 3 JPY."),
    )
    capability = ShortlistTools(ToolNarrower(selector="bm25", k=3, on_event=events, policy="per_turn"))
    agent = Agent(FunctionModel(script), tools=list(FUNCTIONS), capabilities=[capability])

    first = await agent.run("what is the weather forecast in Paris?")
    assert first.output == "Sunny."
    a, b = script.seen
    assert "get_weather" in a and "find_tools" in a and len(a) <= 4 and a == b

    second = await agent.run("book a flight ticket to Rome", message_history=first.all_messages())
    assert second.output == "Booked; 3 JPY."
    c, d, e = script.seen[2:]
    assert "book_flight" in c and "convert_currency" not in c
    assert "convert_currency" in d and "convert_currency" in e
    returns = [
        p.content
        for m in second.all_messages()
        for p in getattr(m, "parts", ())
        if isinstance(p, ToolReturnPart) and p.tool_name == "convert_currency"
    ]
    assert returns == ["3.0 JPY"]
    assert next(ev["found"] for ev in events.named("selection.tool_searched"))[0] == "convert_currency"
    assert not events.named("selection.fallback")


async def test_a_failing_selector_leaves_the_agent_with_every_tool() -> None:
    events = Events()
    script = Scripted(call("stock_price", {"ticker": "ACME"}), text("100"))
    capability = ShortlistTools(ToolNarrower(selector=FailingSelector(), on_event=events))
    agent = Agent(FunctionModel(script), tools=list(FUNCTIONS), capabilities=[capability])
    assert (await agent.run("price of ACME shares")).output == "100"
    assert [set(s) for s in script.seen] == [set(NAMES), set(NAMES)]  # no find_tools: nothing is left out
    [fallback] = events.named("selection.fallback")
    assert fallback["reason"] == "error"


async def test_only_narrows_the_named_tools() -> None:
    script = Scripted(text("ok"))
    capability = ShortlistTools(selector="bm25", k=1, only=frozenset(NAMES[:6]))
    agent = Agent(FunctionModel(script), tools=list(FUNCTIONS), capabilities=[capability])
    await agent.run("translate this text into Spanish")
    [seen] = script.seen
    assert set(NAMES[6:]) <= set(seen) and "translate_text" in seen and not set(NAMES[:5]) & set(seen)


async def test_prepare_tools_function_and_find_tools_tool_without_the_capability() -> None:
    narrower = ToolNarrower(selector="bm25", k=2)
    from shortlist.integrations.pydantic_ai import tool_candidates

    catalog: list[Any] = []
    script = Scripted(call("find_tools", {"query": "play a song"}), call("play_music", {"song": "x"}), text("on"))
    agent = Agent(
        FunctionModel(script),
        tools=[*FUNCTIONS, find_tools_tool(narrower, lambda: catalog[0])],
        capabilities=[PrepareTools(prepare_tools(narrower))],
    )
    from pydantic_ai.tools import Tool

    catalog.append(tool_candidates(narrower, [Tool(f).tool_def for f in FUNCTIONS]))
    assert (await agent.run("reserve a hotel room in Lisbon")).output == "on"
    first, second, _ = script.seen
    assert "book_hotel" in first and "find_tools" in first and "play_music" not in first
    assert "play_music" in second


async def test_stable_offers_the_same_tools_every_turn_and_grows_only_by_what_find_tools_found() -> None:
    events = Events()
    script = Scripted(
        text("Sunny."),
        text("Booked."),
        call("find_tools", {"query": "convert money into another currency"}),
        call("convert_currency", {"amount": 3.0, "currency": "JPY"}),
        text("3 JPY."),
        text("Playing."),
    )
    capability = ShortlistTools(ToolNarrower(selector="bm25", k=3, search_k=1, horizon=1, on_event=events))
    agent = Agent(FunctionModel(script), tools=list(FUNCTIONS), capabilities=[capability], instructions=SYSTEM)
    history: list[ModelMessage] = []
    for turn in TURNS:
        result = await agent.run(turn, message_history=history)
        history = result.all_messages()
    assert result.output == "Playing."
    t1, t2, t3, t4, t5, t6 = script.seen
    assert "get_weather" in t1 and "find_tools" in t1 and len(t1) <= 4
    assert t1 == t2 == t3 and "book_flight" not in t2
    assert t4 == t5 == t6 and set(t4) - set(t1) == {"convert_currency"} and set(t1) <= set(t4)
    assert not events.named("selection.fallback") and not events.named("selection.offer_changed")


async def test_per_turn_re_selects_on_every_user_message() -> None:
    script = Scripted(text("a"), text("b"), text("c"))
    agent = Agent(
        FunctionModel(script),
        tools=list(FUNCTIONS),
        capabilities=[ShortlistTools(selector="bm25", k=3, policy="per_turn")],
        instructions=SYSTEM,
    )
    history: list[ModelMessage] = []
    for turn in (TURNS[0], TURNS[1], TURNS[3]):
        history = (await agent.run(turn, message_history=history)).all_messages()
    t1, t2, t3 = script.seen
    assert "get_weather" in t1 and "book_flight" in t2 and "play_music" in t3
    assert t1 != t2 != t3


async def test_find_tools_leaves_out_what_the_step_was_offered_and_pages_on() -> None:
    script = Scripted(
        call("find_tools", {"query": TRAVEL_SEARCH}),
        call("find_tools", {"query": TRAVEL_SEARCH}),
        text("done"),
    )
    capability = ShortlistTools(ToolNarrower(selector="bm25", k=2, search_k=2, policy="per_turn"))
    agent = Agent(FunctionModel(script), tools=list(FUNCTIONS), capabilities=[capability])
    result = await agent.run(TRAVEL)
    results = [
        str(p.content)
        for m in result.all_messages()
        for p in getattr(m, "parts", ())
        if isinstance(p, ToolReturnPart) and p.tool_name == "find_tools"
    ]
    assert_searches_page_past_the_offer([n for n in script.seen[0] if n != "find_tools"], results)
