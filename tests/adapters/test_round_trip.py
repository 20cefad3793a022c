"""Tool definitions read from a host format come back out exactly as they went in.

The definitions are built with the official SDKs' types (``openai``, ``anthropic``, ``mcp``)
and the rendered output is validated by the same SDKs, so a field the SDK knows is never lost
and nothing the SDK rejects is produced.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shortlist import Shortlist
from shortlist._types import Candidate
from shortlist.adapters import (
    candidates_from_tools,
    render_tools,
    to_anthropic_tool,
    to_mcp_tool,
    to_openai_responses_tool,
    to_openai_tool,
)

openai_chat = pytest.importorskip("openai.types.chat")
openai_responses = pytest.importorskip("openai.types.responses")
anthropic_types = pytest.importorskip("anthropic.types")
mcp_types = pytest.importorskip("mcp.types")

PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _openai_chat_tool() -> dict[str, Any]:
    tool: Any = openai_chat.ChatCompletionFunctionToolParam(
        type="function",
        function={"name": "get_weather", "description": "Weather for a city", "parameters": PARAMS, "strict": True},
    )
    tool["x_vendor"] = {"team": "travel"}  # a field no SDK knows
    tool["function"]["x_inner"] = [1, 2]
    return dict(tool)


def _anthropic_tool() -> dict[str, Any]:
    tool: Any = anthropic_types.ToolParam(
        name="get_weather",
        description="Weather for a city",
        input_schema=PARAMS,
        cache_control={"type": "ephemeral", "ttl": "1h"},
        strict=True,
        defer_loading=True,
        input_examples=[{"city": "Paris"}],
    )
    tool["x_vendor"] = "kept"
    return dict(tool)


def _mcp_tool() -> dict[str, Any]:
    tool = mcp_types.Tool(
        name="get_weather",
        title="Weather",
        description="Weather for a city",
        input_schema=PARAMS,
        output_schema={"type": "object", "properties": {"forecast": {"type": "string"}}},
        annotations=mcp_types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        _meta={"io.example/owner": "travel"},
    )
    out: dict[str, Any] = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    out["x_vendor"] = True
    return out


def test_openai_chat_tool_round_trips_exactly() -> None:
    tool = _openai_chat_tool()
    before = json.dumps(tool, sort_keys=True)
    (cand,) = candidates_from_tools([tool])
    out = to_openai_tool(cand)
    assert out == tool
    assert out["function"]["strict"] is True and out["x_vendor"] == {"team": "travel"}
    assert json.dumps(tool, sort_keys=True) == before  # the input is not mutated
    out["function"]["parameters"]["properties"]["city"]["type"] = "integer"
    assert to_openai_tool(cand) == tool  # nor shared with what was rendered
    without_vendor = {k: v for k, v in out.items() if k != "x_vendor"}
    openai_chat.ChatCompletionFunctionTool.model_validate(without_vendor)


def test_openai_responses_tool_round_trips_exactly() -> None:
    tool: Any = openai_responses.FunctionToolParam(
        type="function", name="get_weather", description="Weather", parameters=PARAMS, strict=True
    )
    (cand,) = candidates_from_tools([dict(tool)])
    assert to_openai_responses_tool(cand) == dict(tool)
    chat = to_openai_tool(cand)  # the chat shape keeps what it has: strict
    assert chat == {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather", "parameters": PARAMS, "strict": True},
    }
    openai_responses.FunctionTool.model_validate(to_openai_responses_tool(cand))


def test_anthropic_tool_round_trips_exactly() -> None:
    tool = _anthropic_tool()
    (cand,) = candidates_from_tools([tool])
    out = to_anthropic_tool(cand)
    assert out == tool
    assert out["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert list(out) == list(tool)  # key order too


def test_mcp_tool_round_trips_exactly() -> None:
    tool = _mcp_tool()
    (cand,) = candidates_from_tools({"tools": [tool]})
    out = to_mcp_tool(cand)
    assert out == tool
    back = mcp_types.Tool.model_validate(out)
    assert back.annotations is not None and back.annotations.read_only_hint is True
    assert back.output_schema == tool["outputSchema"] and back.meta == {"io.example/owner": "travel"}


def test_cross_format_carries_only_what_the_target_has() -> None:
    (anth,) = candidates_from_tools([_anthropic_tool()])
    assert to_openai_tool(anth) == {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather for a city", "parameters": PARAMS},
    }
    (mcp,) = candidates_from_tools([_mcp_tool()])
    assert to_anthropic_tool(mcp) == {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": PARAMS,
    }
    (chat,) = candidates_from_tools([_openai_chat_tool()])
    assert to_mcp_tool(chat) == {"name": "get_weather", "description": "Weather for a city", "inputSchema": PARAMS}
    mcp_types.Tool.model_validate(to_mcp_tool(chat))


def test_an_edited_candidate_renders_as_edited_and_keeps_the_rest() -> None:
    (cand,) = candidates_from_tools([_anthropic_tool()])
    edited = Candidate(cand.id, cand.name, "Better description", cand.metadata, cand.parameters)
    out = to_anthropic_tool(edited)
    assert out["description"] == "Better description"
    assert out["cache_control"] == {"type": "ephemeral", "ttl": "1h"} and out["x_vendor"] == "kept"


def test_absent_optional_fields_stay_absent() -> None:
    tool = {"type": "function", "function": {"name": "ping"}}
    (cand,) = candidates_from_tools([tool])
    assert to_openai_tool(cand) == tool
    (mcp,) = candidates_from_tools([{"name": "ping", "inputSchema": {"type": "object"}}])
    assert to_mcp_tool(mcp) == {"name": "ping", "inputSchema": {"type": "object"}}


def test_plain_candidates_render_with_a_default_schema() -> None:
    c = Candidate("lookup", description="Look it up")
    assert to_openai_tool(c) == {
        "type": "function",
        "function": {"name": "lookup", "description": "Look it up", "parameters": {"type": "object", "properties": {}}},
    }
    assert to_mcp_tool(c)["inputSchema"] == {"type": "object", "properties": {}}


def test_render_tools_turns_a_turn_into_the_requests_tools() -> None:
    tools = [
        _openai_chat_tool(),
        {"type": "function", "function": {"name": "book_flight", "description": "Book a flight"}},
    ]
    sl = Shortlist(candidates_from_tools(tools), selector="bm25")
    turn = sl.select("book a flight to Rome", k=1)
    assert turn.ids == ("book_flight",)
    assert render_tools(sl.catalog, turn.ids) == [tools[1]]
    assert render_tools(sl.catalog, ["get_weather", "book_flight"], "openai") == tools
    assert render_tools(sl.catalog, ["get_weather"], "anthropic")[0]["input_schema"] == PARAMS


def test_render_tools_refuses_unknown_ids_and_formats() -> None:
    catalog = candidates_from_tools([_anthropic_tool()])
    with pytest.raises(KeyError, match="nope"):
        render_tools(catalog, ["nope"])
    with pytest.raises(ValueError, match="unknown tool format 'gemini'"):
        render_tools(catalog, ["get_weather"], "gemini")  # type: ignore[arg-type]


def test_the_definition_survives_the_exec_protocol_encoding() -> None:
    from shortlist.exec._encode import _candidate_dict

    (cand,) = candidates_from_tools([_anthropic_tool()])
    encoded = json.loads(json.dumps(_candidate_dict(cand)))
    assert encoded["metadata"]["definition"] == _anthropic_tool()
