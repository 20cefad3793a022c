"""The OpenAI Agents SDK: ``ShortlistModel`` narrows each model call's tools, MCP servers' tools included (real SDK)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner, Usage, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model, ModelProvider
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
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from shortlist.integrations._core import ToolNarrower, found_in
from shortlist.integrations.openai_agents import ShortlistModel, ShortlistModelProvider
from shortlist.testing import FailingSelector


@pytest.fixture(autouse=True)
def _no_trace_export() -> Any:
    """The SDK exports traces to OpenAI by default: never from the tests."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def call(name: str, args: dict[str, Any], cid: str) -> list[Any]:
    return [
        ResponseFunctionToolCall(
            type="function_call", name=name, arguments=json.dumps(args), call_id=cid, id=f"fc_{cid}"
        )
    ]


def text(answer: str) -> list[Any]:
    content = ResponseOutputText(type="output_text", text=answer, annotations=[])
    return [ResponseOutputMessage(type="message", id="m", role="assistant", status="completed", content=[content])]


class ScriptedModel(Model):
    """An SDK Model double: answers from a script and records the tool names of every call."""

    def __init__(self, *steps: list[Any]) -> None:
        self.steps = list(steps)
        self.seen: list[list[str]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.seen.append([t.name for t in tools])
        return ModelResponse(output=self.steps.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def tools() -> list[FunctionTool]:
    return [function_tool(f) for f in FUNCTIONS]


async def test_each_model_call_gets_the_narrowed_tools_and_find_tools_reaches_the_rest() -> None:
    events = Events()
    inner = ScriptedModel(
        call("get_weather", {"city": "Paris"}, "c1"),
        text("Sunny."),
        call("find_tools", {"query": "convert money into another currency"}, "c2"),
        call("convert_currency", {"amount": 2.0, "currency": "GBP"}, "c3"),
        text("Booked; 2 GBP."),
    )
    model = ShortlistModel(inner, ToolNarrower(selector="bm25", k=3, on_event=events, policy="per_turn"))
    agent = Agent(name="travel", model=model, tools=[*tools(), model.find_tools])

    first = await Runner.run(agent, "what is the weather forecast in Paris?")
    assert first.final_output == "Sunny."
    a, b = inner.seen
    assert "get_weather" in a and "find_tools" in a and len(a) <= 4 and a == b

    second = await Runner.run(
        agent, [*first.to_input_list(), {"role": "user", "content": "book a flight ticket to Rome"}]
    )
    assert second.final_output == "Booked; 2 GBP."
    c, d, e = inner.seen[2:]
    assert "book_flight" in c and "convert_currency" not in c
    assert "convert_currency" in d and "convert_currency" in e
    outputs = [dict(i)["output"] for i in second.to_input_list() if i.get("type") == "function_call_output"]
    assert "2.0 GBP" in outputs
    assert next(ev["found"] for ev in events.named("selection.tool_searched"))[0] == "convert_currency"
    assert not events.named("selection.fallback")


async def test_a_failing_selector_leaves_the_agent_with_every_tool() -> None:
    events = Events()
    inner = ScriptedModel(call("stock_price", {"ticker": "ACME"}, "c1"), text("100"))
    model = ShortlistModel(inner, selector=FailingSelector(), on_event=events)
    agent = Agent(name="a", model=model, tools=[*tools(), model.find_tools])
    assert (await Runner.run(agent, "price of ACME shares")).final_output == "100"
    assert [set(s) for s in inner.seen] == [set(NAMES), set(NAMES)]  # find_tools only when something is left out
    [fallback] = events.named("selection.fallback")
    assert fallback["reason"] == "error"


async def test_the_provider_wraps_every_model_of_a_run() -> None:
    inner = ScriptedModel(text("ok"))

    class Provider(ModelProvider):
        def get_model(self, model_name: str | None) -> Model:
            return inner

    provider = ShortlistModelProvider(Provider(), selector="bm25", k=2)
    agent = Agent(name="a", model="any-model", tools=[*tools(), provider.find_tools_for("any-model")])
    out = await Runner.run(agent, "play a song by Queen", run_config=RunConfig(model_provider=provider))
    assert out.final_output == "ok"
    [seen] = inner.seen
    assert "play_music" in seen and "find_tools" in seen and len(seen) <= 3


@pytest.mark.slow
async def test_tools_of_an_attached_mcp_server_are_narrowed_and_callable() -> None:
    from agents.mcp import MCPServerStdio

    exe = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
    inner = ScriptedModel(
        call("get_current_time", {"timezone": "Europe/Paris"}, "c1"),
        text("It is late."),
    )
    model = ShortlistModel(inner, selector="bm25", k=2)
    async with MCPServerStdio(
        params={"command": exe, "args": ["--local-timezone", "UTC"]}, client_session_timeout_seconds=30
    ) as server:
        agent = Agent(name="a", model=model, tools=[*tools(), model.find_tools], mcp_servers=[server])
        out = await Runner.run(agent, "what is the current time in Paris?")
    assert out.final_output == "It is late."
    first = inner.seen[0]
    assert (
        "get_current_time" in first
        and len(first) <= 3
        and set(first) < {*NAMES, "get_current_time", "convert_time", "find_tools"}
    )
    outputs = [dict(i)["output"] for i in out.to_input_list() if i.get("type") == "function_call_output"]
    assert "Europe/Paris" in json.dumps(outputs[0])  # the real server answered


async def test_stable_offers_the_same_tools_every_turn_and_grows_only_by_what_find_tools_found() -> None:
    events = Events()
    inner = ScriptedModel(
        text("Sunny."),
        text("Booked."),
        call("find_tools", {"query": "convert money into another currency"}, "c1"),
        call("convert_currency", {"amount": 2.0, "currency": "GBP"}, "c2"),
        text("2 GBP."),
        text("Playing."),
    )
    model = ShortlistModel(inner, ToolNarrower(selector="bm25", k=3, search_k=1, horizon=1, on_event=events))
    agent = Agent(name="travel", instructions=SYSTEM, model=model, tools=[*tools(), model.find_tools])
    items: list[Any] = []
    for turn in TURNS:
        result = await Runner.run(agent, [*items, {"role": "user", "content": turn}])
        items = result.to_input_list()
    assert result.final_output == "Playing."
    t1, t2, t3, t4, t5, t6 = inner.seen
    assert "get_weather" in t1 and "find_tools" in t1 and len(t1) <= 4
    assert t1 == t2 == t3 and "book_flight" not in t2
    assert t4 == t5 == t6 and set(t4) - set(t1) == {"convert_currency"} and set(t1) <= set(t4)
    assert not events.named("selection.fallback") and not events.named("selection.offer_changed")


async def test_per_turn_re_selects_on_every_user_message() -> None:
    inner = ScriptedModel(text("a"), text("b"), text("c"))
    model = ShortlistModel(inner, selector="bm25", k=3, policy="per_turn")
    agent = Agent(name="a", instructions=SYSTEM, model=model, tools=[*tools(), model.find_tools])
    items: list[Any] = []
    for turn in (TURNS[0], TURNS[1], TURNS[3]):
        items = (await Runner.run(agent, [*items, {"role": "user", "content": turn}])).to_input_list()
    t1, t2, t3 = inner.seen
    assert "get_weather" in t1 and "book_flight" in t2 and "play_music" in t3
    assert t1 != t2 != t3


async def test_find_tools_leaves_out_what_the_model_call_was_offered_and_pages_on() -> None:
    inner = ScriptedModel(
        call("find_tools", {"query": TRAVEL_SEARCH}, "c1"),
        call("find_tools", {"query": TRAVEL_SEARCH}, "c2"),
        text("done"),
    )
    model = ShortlistModel(inner, ToolNarrower(selector="bm25", k=2, search_k=2, policy="per_turn"))
    agent = Agent(name="travel", model=model, tools=[*tools(), model.find_tools])
    result = await Runner.run(agent, TRAVEL)
    results = [str(dict(i)["output"]) for i in result.to_input_list() if i.get("type") == "function_call_output"]
    assert_searches_page_past_the_offer([n for n in inner.seen[0] if n != "find_tools"], results)


class ByConversation(Model):
    """An SDK Model double serving concurrent runs: each answers from its own script (keyed by its first user
    message), and every run's first call returns only once all have started."""

    def __init__(self, scripts: dict[str, list[list[Any]]]) -> None:
        self.scripts = scripts
        self.seen: dict[str, list[list[str]]] = {}

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        key = input if isinstance(input, str) else next(i["content"] for i in input if i.get("role") == "user")
        first = key not in self.seen
        self.seen.setdefault(key, []).append([t.name for t in tools])
        while first and len(self.seen) < len(self.scripts):
            await asyncio.sleep(0.01)
        return ModelResponse(output=self.scripts[key].pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def test_concurrent_runs_each_search_past_their_own_offer() -> None:
    weather = "what is the weather forecast in Paris?"
    query = "the weather forecast, or book a flight ticket and a hotel room"  # each one's offer ranks first
    inner = ByConversation(
        {
            TRAVEL: [call("find_tools", {"query": query}, "t1"), text("ok")],
            weather: [call("find_tools", {"query": query}, "w1"), text("ok")],
        }
    )
    model = ShortlistModel(inner, ToolNarrower(selector="bm25", k=2, search_k=2, policy="per_turn"))
    agent = Agent(name="a", model=model, tools=[*tools(), model.find_tools])
    runs = await asyncio.gather(Runner.run(agent, TRAVEL), Runner.run(agent, weather))
    offers = {key: {n for n in inner.seen[key][0] if n != "find_tools"} for key in (TRAVEL, weather)}
    assert offers[TRAVEL] != offers[weather]
    for key, run in zip((TRAVEL, weather), runs, strict=True):
        [result] = [str(dict(i)["output"]) for i in run.to_input_list() if i.get("type") == "function_call_output"]
        found = found_in(result)
        assert found and not set(found) & offers[key], (key, offers, found)  # its own offer, not the other's
