"""An upstream tool's name is data, never a pattern; names outside MCP's charset are refused with an event."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shortlist._events import Event, event_hooks
from shortlist._types import Query
from shortlist.mcp import select_mcp_tools
from shortlist.mcp._tools import MCPToolRefused, mcp_tool_candidate, valid_tool_name
from shortlist.testing import StaticSelector

SERVER = str(Path(__file__).with_name("bad_names_server.py"))


def test_valid_tool_name_is_mcp_charset_and_length() -> None:
    assert valid_tool_name("get_weather") and valid_tool_name("a.b-c_9") and valid_tool_name("x" * 128)
    for bad in ("", "*", "get_*", "a?", "[a]", "bad\nname", "x" * 129, "<b>hi</b>", "a b", "é"):
        assert not valid_tool_name(bad), bad


@pytest.mark.parametrize("pattern", ["*", "get_*"])
def test_a_tool_named_like_a_pattern_is_not_a_wildcard(pattern: str) -> None:
    names = [f"get_tool_{n}" for n in range(34)] + [pattern]
    tools = [mcp_tool_candidate("up", {"name": n, "description": f"tool {n}"}) for n in names]
    events: list[Event] = []
    with event_hooks(events.append):
        picked = select_mcp_tools(StaticSelector(["mcp__up__get_tool_3"]), Query("weather", k=1), tools)
    assert picked.ids == ("mcp__up__get_tool_3",)
    refused = [e for e in events if isinstance(e, MCPToolRefused)]
    assert [(e.server, e.tool) for e in refused] == [("up", repr(pattern))]


@pytest.mark.slow  # starts an MCP server over stdio
async def test_the_client_refuses_hostile_upstream_names() -> None:
    from shortlist.mcp import MCPClient, MCPServerSpec

    events: list[Event] = []
    with event_hooks(events.append):
        async with MCPClient([MCPServerSpec(name="up", command=(sys.executable, SERVER))]) as client:
            ids = [c.id for c in await client.list_candidates()]
    assert ids == ["mcp__up__ok_tool", "mcp__up__dotted.name-1"]
    refused = [e for e in events if isinstance(e, MCPToolRefused)]
    assert len(refused) == 5 and all(e.server == "up" for e in refused)
    assert max(len(e.tool) for e in refused) <= 100 and not any("\n" in e.tool for e in refused)
