"""Every request shape the runtime emits, checked against the official SDKs' request types.

The strongest proof is the SDK itself: ``client.messages.create(**request)`` against a loopback
server started by the test (the SDK rejects unknown top-level arguments, serialises, and the
server receives exactly what a provider would). The nested shapes (``defer_loading``,
``tool_reference``, ``cache_control``) are checked field by field against the SDK's TypedDicts
(``sdk_shapes.check``), which admit no unknown key.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from sdk_shapes import ShapeError, check

from shortlist.runtime._formats import EPHEMERAL, FIND_TOOLS, MAX_CACHE_BREAKPOINTS, ToolDef, build_request
from shortlist.runtime._formats import search_result_content as result_content

WEATHER = ToolDef("get_weather", "Get the weather.", {"type": "object", "properties": {"city": {"type": "string"}}})
EMAIL = ToolDef("send_email", "Send an email.", {"type": "object", "properties": {"to": {"type": "string"}}})
PDF = ToolDef("read_pdf", "Read a PDF.", {"type": "object", "properties": {"path": {"type": "string"}}})

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Oslo"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "p1", "type": "function", "function": {"name": "find_tools", "arguments": '{"query": "x"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "p1", "content": result_content("anthropic", [EMAIL], mode="references")},
    {
        "role": "assistant",
        "content": "let me check",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"forecast": "cold"}'},
]


def anthropic_request() -> dict[str, Any]:
    return build_request(
        "anthropic",
        model="claude-test",
        system="You are terse.",
        messages=HISTORY,
        tools=[WEATHER, FIND_TOOLS],
        deferred=[EMAIL, PDF],
    )


def breakpoints(req: dict[str, Any]) -> list[str]:
    out = [f"tools[{i}]" for i, t in enumerate(req.get("tools", [])) if "cache_control" in t]
    system = req["system"]
    if isinstance(system, list):
        out += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, m in enumerate(req["messages"]):
        out += [f"messages[{i}][{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


def test_anthropic_deferred_request_is_accepted_by_the_sdk_types() -> None:
    req = anthropic_request()
    check(req, MessageCreateParamsNonStreaming)
    tools = {t["name"]: t for t in req["tools"]}
    assert tools["send_email"]["defer_loading"] is True and tools["read_pdf"]["defer_loading"] is True
    assert "defer_loading" not in tools["get_weather"] and "defer_loading" not in tools["find_tools"]
    # the prefetched tools arrive as tool_reference blocks in a find_tools result
    assert req["messages"][2]["content"][0]["content"] == [{"type": "tool_reference", "tool_name": "send_email"}]


def test_anthropic_cache_breakpoints_after_the_block_the_system_and_the_last_block() -> None:
    req = anthropic_request()
    last = len(req["messages"]) - 1
    assert breakpoints(req) == ["tools[1]", "system[0]", f"messages[{last}][0]"]
    assert req["tools"][1]["cache_control"] == EPHEMERAL  # the last tool of the block, not a deferred one


def test_host_breakpoints_are_trimmed_to_the_api_limit() -> None:
    history = [
        {"role": "user", "content": [{"type": "text", "text": f"part {i}", "cache_control": EPHEMERAL}]}
        for i in range(4)
    ]
    req = build_request("anthropic", model="m", system="s", messages=history, tools=[WEATHER])
    assert len(breakpoints(req)) == MAX_CACHE_BREAKPOINTS
    assert breakpoints(req)[-1] == "messages[3][0]"  # the newest survive
    check(req, MessageCreateParamsNonStreaming)


def test_the_checker_refuses_a_misspelt_field() -> None:
    req = anthropic_request()
    req["tools"][2]["defer_loadin"] = req["tools"][2].pop("defer_loading")
    with pytest.raises(ShapeError, match="defer_loadin"):
        check(req, MessageCreateParamsNonStreaming)


def test_the_anthropic_sdk_sends_the_request_unchanged(anthropic_server) -> None:  # type: ignore[no-untyped-def]
    server = anthropic_server(lambda req: [{"type": "text", "text": "ok"}])
    req = anthropic_request()
    client = anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0)
    try:
        message = client.messages.create(**req)
    finally:
        client.close()
    assert message.content[0].type == "text"
    assert server.requests == [json.loads(json.dumps(req))]
    assert "anthropic-beta" not in server.headers[0]  # the GA types carry every field; no beta flag


def test_openai_chat_request_is_accepted_by_the_sdk_types(chat_server) -> None:  # type: ignore[no-untyped-def]
    plain = [m for m in HISTORY if m["role"] != "tool"] + [
        {"role": "tool", "tool_call_id": "p1", "content": result_content("openai", [EMAIL], mode="definitions")},
        {"role": "tool", "tool_call_id": "c1", "content": '{"forecast": "cold"}'},
    ]
    req = build_request(
        "openai", model="gpt-test", system="You are terse.", messages=plain, tools=[WEATHER, FIND_TOOLS]
    )
    check(req, CompletionCreateParamsNonStreaming)
    assert list(req) == ["model", "tools", "messages"]  # the prefix order: tools, system, history
    assert req["messages"][0] == {"role": "system", "content": "You are terse."}
    server = chat_server(lambda body: {"role": "assistant", "content": "ok"})
    client = openai.OpenAI(base_url=server.url, api_key="test-key", max_retries=0)
    try:
        done = client.chat.completions.create(**req)
    finally:
        client.close()
    assert done.choices[0].message.content == "ok"
    assert server.requests == [json.loads(json.dumps(req))]
    found = json.loads(req["messages"][-2]["content"])["found"]
    assert found == [{"name": "send_email", "description": "Send an email.", "parameters": dict(EMAIL.parameters)}]
