"""LlamaIndex: ``ShortlistToolRetriever`` as a FunctionAgent's ``tool_retriever``, on the real llama-index-core."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("llama_index.core")

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
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.objects.base import ObjectRetriever
from llama_index.core.tools import FunctionTool

from shortlist.integrations._core import ToolNarrower
from shortlist.integrations.llamaindex import ShortlistToolRetriever
from shortlist.testing import FailingSelector

# llama-index-workflows builds an agent's steps with inspect.getmembers() over the agent, a pydantic model: that reads
# every deprecated pydantic attribute (``__fields__``, ``__fields_set__``, instance ``model_computed_fields``...),
# a warning from their code on every FunctionAgent built (nothing of ours uses pydantic in this module).
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


class Scripted:
    """A MockFunctionCallingLLM response generator: answers from a script, records the tools of each call."""

    def __init__(self, *steps: ChatMessage) -> None:
        self.steps = list(steps)
        self.seen: list[list[str]] = []

    def __call__(self, messages: Any, **kwargs: Any) -> ChatMessage:
        self.seen.append([t.metadata.name for t in kwargs.get("tools") or []])
        return self.steps.pop(0)


def call(name: str, args: dict[str, Any], cid: str) -> ChatMessage:
    block = ToolCallBlock(tool_call_id=cid, tool_name=name, tool_kwargs=args)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def text(answer: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[TextBlock(text=answer)])


def tools() -> list[FunctionTool]:
    return [FunctionTool.from_defaults(fn=f) for f in FUNCTIONS]


def agent(script: Scripted, retriever: ShortlistToolRetriever) -> FunctionAgent:
    return FunctionAgent(
        llm=MockFunctionCallingLLM(response_generator=script), tool_retriever=retriever, streaming=False
    )


async def test_agent_calls_the_model_with_the_narrowed_tools_and_find_tools_reaches_the_rest() -> None:
    events = Events()
    script = Scripted(
        call("get_weather", {"city": "Paris"}, "c1"),
        text("Sunny."),
        call("find_tools", {"query": "convert money into another currency"}, "c2"),
        call("convert_currency", {"amount": 5.0, "currency": "CHF"}, "c3"),
        text("Booked; 5 CHF."),
    )
    retriever = ShortlistToolRetriever(tools(), ToolNarrower(selector="bm25", k=3, on_event=events, policy="per_turn"))
    assert isinstance(retriever, ObjectRetriever)
    memory = ChatMemoryBuffer.from_defaults()
    a = agent(script, retriever)

    first = await a.run(user_msg="what is the weather forecast in Paris?", memory=memory)
    assert str(first) == "Sunny."
    s1, s2 = script.seen
    assert "get_weather" in s1 and "find_tools" in s1 and len(s1) <= 4 and s1 == s2

    second: Any = await a.run(user_msg="book a flight ticket to Rome", memory=memory)
    assert str(second) == "Booked; 5 CHF."
    s3, s4, s5 = script.seen[2:]
    assert "book_flight" in s3 and "convert_currency" not in s3
    assert "convert_currency" in s4 and "convert_currency" in s5
    results = [t.tool_output.content for t in second.tool_calls if t.tool_name == "convert_currency"]
    assert results == ["5.0 CHF"]
    assert retriever.found[0] == "convert_currency"
    assert not events.named("selection.fallback")
    retriever.reset()
    assert retriever.found == ()


async def test_a_failing_selector_leaves_the_agent_with_every_tool() -> None:
    events = Events()
    script = Scripted(call("stock_price", {"ticker": "ACME"}, "c1"), text("100"))
    retriever = ShortlistToolRetriever(tools(), selector=FailingSelector(), on_event=events)
    out: Any = await agent(script, retriever).run(user_msg="price of ACME shares")
    assert str(out) == "100"
    assert [set(s) for s in script.seen] == [set(NAMES), set(NAMES)]
    assert [t.tool_output.content for t in out.tool_calls] == ["ACME: 100"]
    [fallback] = events.named("selection.fallback")
    assert fallback["reason"] == "error"


def test_retrieve_is_a_drop_in_object_retriever() -> None:
    from llama_index.core.schema import QueryBundle

    retriever = ShortlistToolRetriever(tools(), selector="bm25", k=2)
    got = [t.metadata.name for t in retriever.retrieve(QueryBundle("find a cooking recipe for lasagna"))]
    assert got[0] == "find_recipe" and got[-1] == "find_tools" and len(got) <= 3
    assert [t.metadata.name for t in retriever.retrieve("send_email")] == ["send_email"]  # the agent's lookup by name


async def test_stable_offers_the_same_tools_every_turn_and_grows_only_by_what_find_tools_found() -> None:
    events = Events()
    script = Scripted(
        text("Sunny."),
        text("Booked."),
        call("find_tools", {"query": "convert money into another currency"}, "c1"),
        call("convert_currency", {"amount": 5.0, "currency": "CHF"}, "c2"),
        text("5 CHF."),
        text("Playing."),
    )
    narrower = ToolNarrower(selector="bm25", k=3, search_k=1, horizon=1, on_event=events)
    retriever = ShortlistToolRetriever(tools(), narrower, system_prompt=SYSTEM)
    memory = ChatMemoryBuffer.from_defaults()
    a = agent(script, retriever)
    for turn in TURNS:
        out = await a.run(user_msg=turn, memory=memory)
    assert str(out) == "Playing."
    t1, t2, t3, t4, t5, t6 = script.seen
    assert "get_weather" in t1 and "find_tools" in t1 and len(t1) <= 4
    assert t1 == t2 == t3 and "book_flight" not in t2
    assert t4 == t5 == t6 and set(t4) - set(t1) == {"convert_currency"} and set(t1) <= set(t4)
    assert not events.named("selection.fallback") and not events.named("selection.offer_changed")


def test_per_turn_re_selects_on_every_query() -> None:
    retriever = ShortlistToolRetriever(tools(), selector="bm25", k=3, policy="per_turn")
    t1, t2 = ([t.metadata.name for t in retriever.retrieve(q)] for q in (TURNS[0], TURNS[1]))
    assert "get_weather" in t1 and "book_flight" in t2 and t1 != t2


async def test_find_tools_leaves_out_what_the_turn_was_offered_and_pages_on() -> None:
    script = Scripted(
        call("find_tools", {"query": TRAVEL_SEARCH}, "c1"),
        call("find_tools", {"query": TRAVEL_SEARCH}, "c2"),
        text("done"),
    )
    retriever = ShortlistToolRetriever(tools(), ToolNarrower(selector="bm25", k=2, search_k=2, policy="per_turn"))
    result: Any = await agent(script, retriever).run(user_msg=TRAVEL, memory=ChatMemoryBuffer.from_defaults())
    results = [str(t.tool_output.content) for t in result.tool_calls if t.tool_name == "find_tools"]
    assert_searches_page_past_the_offer([n for n in script.seen[0] if n != "find_tools"], results)
