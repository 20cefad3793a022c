"""The HTTP models send what the official SDKs send, and read what a real server answers.

Each test sends the runtime's request twice to one recording loopback server: through the SDK
client (``anthropic.AsyncAnthropic`` / ``openai.AsyncOpenAI`` with ``base_url`` on loopback)
and through our model; the path, the body and the headers that matter must be the same. The
server's answers are validated by the SDK's own response models before they are sent, and what
our models return is validated by them again (and read by the runtime's ``parse_response``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from model_servers import (
    ModelServer,
    Reply,
    Script,
    anthropic_answer,
    chat_answer,
    responses_answer,
    responses_call,
    responses_text,
    servers,
)
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from sdk_shapes import check

from loopback import starts_processes
from shortlist.errors import ModelError
from shortlist.runtime import Conversation, Pack, Tool
from shortlist.runtime._formats import FIND_TOOLS, ToolDef, build_request, parse_response, search_result_content
from shortlist.runtime._model import AnthropicMessagesModel, OpenAIChatModel, OpenAIResponsesModel
from shortlist.runtime._responses import from_responses_answer, to_responses_request

KEY = "sk-loopback-test"
WEATHER = ToolDef("get_weather", "Get the weather.", {"type": "object", "properties": {"city": {"type": "string"}}})
EMAIL = ToolDef("send_email", "Send an email.", {"type": "object", "properties": {"to": {"type": "string"}}})


def history(fmt: str) -> list[dict[str, Any]]:
    """A turn with a prefetched search and a tool call, as the runtime keeps it."""
    return [
        {"role": "user", "content": "weather in Oslo"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "p1", "type": "function", "function": {"name": "find_tools", "arguments": '{"query": "x"}'}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "p1",
            "content": search_result_content(fmt, [EMAIL], mode="references" if fmt == "anthropic" else "definitions"),  # type: ignore[arg-type]
        },
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
        messages=history("anthropic"),
        tools=[WEATHER, FIND_TOOLS],
        deferred=[EMAIL],
    )


def chat_request() -> dict[str, Any]:
    return build_request(
        "openai",
        model="gpt-test",
        system="You are terse.",
        messages=history("openai"),
        tools=[WEATHER, FIND_TOOLS, EMAIL],
    )


@pytest.fixture
@starts_processes
def serve() -> Iterator[Callable[[Script], ModelServer]]:
    yield from servers()


def same_request(server: ModelServer, headers: tuple[str, ...]) -> None:
    """The last two requests (the SDK's, then ours) have one path, one body and the same ``headers``."""
    sdk, ours = server.requests[-2:]
    assert ours.path == sdk.path
    assert ours.body == sdk.body
    for name in headers:
        assert ours.headers.get(name) == sdk.headers.get(name), name


# -- Anthropic Messages ----------------------------------------------------------------------

ANTHROPIC_BLOCKS = [
    {"type": "text", "text": "checking"},
    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
]


def anthropic_reply(r: Any) -> Reply:
    return Reply(Message.model_validate(anthropic_answer(ANTHROPIC_BLOCKS)).model_dump(mode="json"))


def test_anthropic_model_sends_what_the_sdk_sends(
    serve: Callable[[Script], ModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = serve(anthropic_reply)
    req = anthropic_request()
    check(req, MessageCreateParamsNonStreaming)

    async def run() -> Any:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key=KEY, max_retries=0)
        await client.messages.create(**req)
        await client.close()
        sdk_version = server.requests[-1].headers["anthropic-version"]  # 2026-10-21 in anthropic 2.15
        # the SDK's auth and version, then the defaults (x-api-key, 2023-06-01)
        model = AnthropicMessagesModel("claude-test", base_url=server.url, auth="bearer", version=sdk_version)
        default = AnthropicMessagesModel("claude-test", base_url=server.url)
        try:
            await default.acomplete(req)
            return await model.acomplete(req)
        finally:
            await model.aclose()
            await default.aclose()

    answer = asyncio.run(run())
    sdk, default, ours = server.requests
    assert sdk.path == default.path == ours.path == "/v1/messages"
    assert sdk.body == default.body == ours.body
    for name in ("authorization", "x-api-key", "anthropic-version", "content-type", "anthropic-beta"):
        assert ours.headers.get(name) == sdk.headers.get(name), name
    assert "anthropic-beta" not in ours.headers  # no feature asked for one
    assert default.headers["x-api-key"] == KEY and "authorization" not in default.headers
    assert default.headers["anthropic-version"] == "2023-06-01"
    Message.model_validate(answer)
    turn = parse_response("anthropic", answer)
    assert turn.text == "checking" and [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("toolu_1", "get_weather", {"city": "Oslo"})
    ]


def test_anthropic_betas_go_in_one_header_as_the_sdks_beta_client_sends_them(
    serve: Callable[[Script], ModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = serve(anthropic_reply)
    req = anthropic_request()

    async def run() -> None:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key=KEY, max_retries=0)
        await client.beta.messages.create(betas=["flag-a-2026-01-01", "flag-b-2026-02-02"], **req)
        await client.close()
        sdk_version = server.requests[-1].headers["anthropic-version"]
        # one flag from the constructor, one carried by the request (removed from the body)
        model = AnthropicMessagesModel(
            "claude-test", base_url=server.url, betas=["flag-a-2026-01-01"], auth="bearer", version=sdk_version
        )
        try:
            await model.acomplete({**req, "betas": ["flag-b-2026-02-02", "flag-a-2026-01-01"]})
        finally:
            await model.aclose()

    asyncio.run(run())
    same_request(server, ("authorization", "x-api-key", "anthropic-version", "anthropic-beta"))
    assert server.requests[-1].headers["anthropic-beta"] == "flag-a-2026-01-01,flag-b-2026-02-02"
    assert "betas" not in server.requests[-1].body


def test_a_bad_betas_value_in_the_request_is_a_model_error(serve: Callable[[Script], ModelServer]) -> None:
    server = serve(anthropic_reply)
    model = AnthropicMessagesModel("claude-test", base_url=server.url, api_key_env=None)
    with pytest.raises(ModelError, match="betas must be a list of non-empty strings"):
        asyncio.run(model.acomplete({**anthropic_request(), "betas": [3]}))
    assert server.requests == []


# -- OpenAI chat completions -----------------------------------------------------------------


def test_openai_chat_model_sends_what_the_sdk_sends(
    serve: Callable[[Script], ModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}]
    server = serve(lambda r: Reply(ChatCompletion.model_validate(chat_answer(None, calls)).model_dump(mode="json")))
    req = chat_request()

    async def run() -> Any:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)
        await client.chat.completions.create(**req)
        await client.close()
        model = OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1")
        try:
            return await model.acomplete(req)
        finally:
            await model.aclose()

    answer = asyncio.run(run())
    same_request(server, ("authorization", "content-type"))
    assert server.requests[-1].path == "/v1/chat/completions"
    ChatCompletion.model_validate(answer)
    assert [c.name for c in parse_response("openai", answer).tool_calls] == ["get_weather"]


# -- OpenAI Responses ------------------------------------------------------------------------


def responses_reply(r: Any) -> Reply:
    body = responses_answer([responses_text("checking"), responses_call("call_9", "get_weather", '{"city":"Oslo"}')])
    return Reply(Response.model_validate(body).model_dump(mode="json"))


def test_the_converted_request_is_accepted_by_the_sdk_types() -> None:
    converted = to_responses_request({**chat_request(), "max_tokens": 99, "tool_choice": "auto", "store": False})
    check(converted, ResponseCreateParamsNonStreaming)
    assert [t["name"] for t in converted["tools"]] == ["get_weather", "find_tools", "send_email"]
    assert all(t["strict"] is False and t["type"] == "function" for t in converted["tools"])
    items = converted["input"]
    assert items[0] == {"type": "message", "role": "system", "content": "You are terse."}  # the prefix stays first
    assert [i["type"] for i in items] == [
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert items[5] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert items[6] == {"type": "function_call_output", "call_id": "c1", "output": '{"forecast": "cold"}'}
    assert converted["max_output_tokens"] == 99 and "max_tokens" not in converted


def test_responses_model_sends_what_the_sdk_sends_and_answers_in_the_chat_shape(
    serve: Callable[[Script], ModelServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = serve(responses_reply)
    req = chat_request()

    async def run() -> Any:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)
        await client.responses.create(**to_responses_request(req), store=False)
        await client.close()
        model = OpenAIResponsesModel("gpt-test", base_url=f"{server.url}/v1")
        try:
            return await model.acomplete(req)
        finally:
            await model.aclose()

    answer = asyncio.run(run())
    same_request(server, ("authorization", "content-type"))
    assert server.requests[-1].path == "/v1/responses"
    assert server.requests[-1].body["store"] is False and "previous_response_id" not in server.requests[-1].body
    ChatCompletion.model_validate(answer)
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    turn = parse_response("openai", answer)
    assert turn.text == "checking"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("call_9", "get_weather", '{"city":"Oslo"}')]


def test_a_responses_request_passes_through_unconverted(serve: Callable[[Script], ModelServer]) -> None:
    server = serve(responses_reply)
    model = OpenAIResponsesModel("gpt-test", base_url=f"{server.url}/v1", api_key_env=None, store=None)
    native = {"input": "hello", "instructions": "be brief"}
    answer = asyncio.run(model.acomplete(native))
    assert server.requests[-1].body == {"model": "gpt-test", **native}  # store=None: not sent
    Response.model_validate(answer)


def test_the_answer_conversion_reads_refusals_incomplete_answers_and_skips_reasoning() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    refusal = {
        "type": "message",
        "id": "m1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    out = from_responses_answer(Response.model_validate(responses_answer([reasoning, refusal])).model_dump(mode="json"))
    msg = out["choices"][0]["message"]
    assert msg["content"] == "I can't help with that." and msg["refusal"] == msg["content"]
    assert "tool_calls" not in msg and out["choices"][0]["finish_reason"] == "stop"
    cut = {**responses_answer([responses_text("partial")], status="incomplete")}
    cut["incomplete_details"] = {"reason": "max_output_tokens"}
    assert from_responses_answer(cut)["choices"][0]["finish_reason"] == "length"
    ChatCompletion.model_validate(from_responses_answer(cut))
    with pytest.raises(ModelError, match="function_call without a name"):
        from_responses_answer(responses_answer([{"type": "function_call", "call_id": "x", "arguments": "{}"}]))


def test_the_request_conversion_covers_parts_choices_and_limits() -> None:
    req = {
        "model": "gpt-test",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
            },
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            },
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "max_completion_tokens": 5,
        "max_tokens": 7,
        "reasoning_effort": "low",
        "prompt_cache_key": "conv-1",
        "temperature": 0.2,
    }
    out = to_responses_request(req)
    check(out, ResponseCreateParamsNonStreaming)
    assert out["input"][1]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,AAAA",
        "detail": "auto",
    }
    assert out["input"][2] == {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'}
    assert out["input"][3]["output"] == "one\ntwo"
    assert out["tool_choice"] == {"type": "function", "name": "f"}
    assert out["max_output_tokens"] == 5 and out["reasoning"] == {"effort": "low"}
    assert out["prompt_cache_key"] == "conv-1" and out["temperature"] == 0.2


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"stream": True}, r"does not support the chat request field\(s\) \['stream'\]"),
        ({"response_format": {"type": "json_object"}, "n": 2}, r"\['n', 'response_format'\]"),
        ({"messages": "hi"}, "needs a `messages` list"),
        ({"messages": [{"role": "function", "content": "x"}]}, "role 'function' cannot be converted"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "'input_audio' cannot be converted"),
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "only function tools"),
        ({"tool_choice": {"type": "allowed_tools"}}, "tool_choice"),
        ({"model": ""}, "needs a `model`"),
    ],
)
def test_what_the_conversion_cannot_carry_is_refused_not_dropped(change: dict[str, Any], match: str) -> None:
    with pytest.raises(ModelError, match=match):
        to_responses_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], **change})


# -- whole conversations over the new models -------------------------------------------------


def get_weather(city: str) -> dict[str, str]:
    """Get the weather forecast for a city."""
    return {"city": city, "forecast": "cold"}


def test_a_conversation_over_the_anthropic_model(serve: Callable[[Script], ModelServer]) -> None:
    def script(r: Any) -> Reply:
        last = r.body["messages"][-1]["content"]
        if any(b.get("type") == "tool_result" for b in last):
            return Reply(anthropic_answer([{"type": "text", "text": "It is cold in Oslo."}]))
        return Reply(
            anthropic_answer([{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}])
        )

    server = serve(script)
    model = AnthropicMessagesModel("claude-test", base_url=server.url, api_key_env=None)
    conv = Conversation(
        Pack(tools=[Tool.from_function(get_weather)]),
        model=model,
        format="anthropic",
        tool_selector="lexical",
        prefetch=0,
    )
    try:
        result = conv.send("what is the weather in Oslo")
    finally:
        conv.close()
    assert result.answer == "It is cold in Oslo."
    assert [c.name for c in result.report.tool_calls] == ["get_weather"]
    for rec in server.requests:
        check(rec.body, MessageCreateParamsNonStreaming)
        assert rec.path == "/v1/messages" and "anthropic-beta" not in rec.headers


def test_a_conversation_over_the_responses_model(serve: Callable[[Script], ModelServer]) -> None:
    def script(r: Any) -> Reply:
        outputs = [i for i in r.body["input"] if i.get("type") == "function_call_output"]
        if outputs:
            return Reply(
                responses_answer([responses_text(f"Forecast: {json.loads(outputs[-1]['output'])['forecast']}")])
            )
        return Reply(responses_answer([responses_call("call_1", "get_weather", '{"city": "Oslo"}')]))

    server = serve(script)
    model = OpenAIResponsesModel("gpt-test", base_url=f"{server.url}/v1", api_key_env=None)
    conv = Conversation(
        Pack(tools=[Tool.from_function(get_weather)]),
        model=model,
        format="openai",
        tool_selector="lexical",
        offer_policy="stable",
    )
    try:
        result = conv.send("what is the weather in Oslo")
    finally:
        conv.close()
    assert result.answer == "Forecast: cold"
    assert len(server.requests) == 2
    for rec in server.requests:
        check(rec.body, ResponseCreateParamsNonStreaming)
    second = server.requests[1].body["input"]
    assert second[-2]["type"] == "function_call" and second[-2]["call_id"] == "call_1"
    assert second[-1]["type"] == "function_call_output" and second[-1]["call_id"] == "call_1"
