"""MCP tools loaded with langchain-mcp-adapters keep working under ShortlistMiddleware.

langchain-mcp-adapters (0.3.x, the latest) needs ``mcp<2`` while the project's main venv has mcp 2.x, so
this file runs in a venv of its own (``.ci/run``: ``.venv-lcmcp``, where ``SHORTLIST_REQUIRE_LCMCP=1``
turns the skip into a failure). A real MCP server (FastMCP, mcp 1.x) runs over stdio; the agent is
LangChain's ``create_agent`` with its fake chat model.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

if os.environ.get("SHORTLIST_REQUIRE_LCMCP") != "1":
    pytest.importorskip("langchain_mcp_adapters")
    pytest.importorskip("langchain")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_fakes import RecordingModel, call
from langchain_mcp_adapters.client import MultiServerMCPClient

from shortlist.integrations.langchain import ShortlistMiddleware

pytestmark = pytest.mark.slow  # starts an MCP server process

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp1_travel_server.py"
NAMES = {"get_weather", "book_flight", "book_hotel", "convert_currency", "stock_price", "translate_text"}


async def test_mcp_tools_are_narrowed_called_on_the_real_server_and_found_by_search() -> None:
    client = MultiServerMCPClient({"travel": {"command": sys.executable, "args": [str(SERVER)], "transport": "stdio"}})
    mcp_tools = await client.get_tools()
    assert {t.name for t in mcp_tools} == NAMES
    script = [
        call("get_weather", {"city": "Paris"}, "c1"),
        call("find_tools", {"query": "convert money into another currency"}, "c2"),
        call("convert_currency", {"amount": 10.0, "currency": "EUR"}, "c3"),
        AIMessage(content="Sunny; 10 EUR."),
    ]
    model = RecordingModel(messages=iter(script))
    agent = create_agent(model, tools=mcp_tools, middleware=[ShortlistMiddleware(selector="bm25", k=2)])

    state = await agent.ainvoke({"messages": [HumanMessage("what is the weather forecast in Paris?")]})

    first = model.seen[0]
    assert "get_weather" in first and "find_tools" in first and len(first) <= 3
    assert "convert_currency" not in first
    assert "convert_currency" in model.seen[2]  # found by find_tools, offered from then on
    results = {m.name: m.content for m in state["messages"] if m.type == "tool"}
    assert "sunny in Paris" in str(results["get_weather"])  # answered by the MCP server process
    assert "10.0 EUR" in str(results["convert_currency"])
    assert state["messages"][-1].content == "Sunny; 10 EUR."
