"""Tool changes that never touch the cached prefix, per provider (issue 28, item 2).

Anthropic ``tool_addition`` (beta), the Responses API's client ``tool_search`` with namespaces
and deferred functions, and the fixed ``find_tools`` + ``call_tool`` bridge for chat
completions: in each, a tool found mid-conversation becomes callable while the ``tools`` array
stays byte-identical. Every request shape is checked against the installed SDK's request types
(``sdk_shapes.check``) and sent through the SDK client to a loopback server the test starts.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming as BetaCreateParams
from model_servers import ModelServer, Reply, Script, responses_answer, responses_call, responses_text, servers
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses import Response
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from sdk_shapes import ShapeError, check

from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError, ModelError
from shortlist.offer._bridge import CALL_TOOL_NAME, check_bridge_call
from shortlist.runtime import Conversation, Pack, Tool
from shortlist.runtime._formats import TOOL_ADDITION_BETA
from shortlist.runtime._model import AnthropicMessagesModel, OpenAIChatModel, OpenAIResponsesModel
from shortlist.selection._base import FunctionSelector

CALLS: list[tuple[str, dict[str, Any]]] = []


def _tool(name: str, description: str, params: dict[str, Any]) -> Tool:
    def run(**kwargs: Any) -> str:
        CALLS.append((name, kwargs))
        return f"{name} done"

    schema = {"type": "object", "properties": params, "required": sorted(params)}
    return Tool(name, description, run, schema)


TOOLS = [
    _tool("weather__forecast", "weather forecast for a city", {"city": {"type": "string"}}),
    _tool("weather__alerts", "weather alerts for a region", {"region": {"type": "string"}}),
    _tool("mail__send_email", "send an email to someone", {"to": {"type": "string"}, "body": {"type": "string"}}),
    _tool("mail__read_inbox", "read the email inbox", {"folder": {"type": "string"}}),
    _tool("convert_currency", "convert money between currencies", {"amount": {"type": "number"}}),
]


def by_words(q: Query, cands: Sequence[Candidate]) -> list[str]:
    words = set(q.text.lower().split())
    scored = [(len(words & set(c.description.split())), c.id) for c in cands]
    return [i for s, i in sorted(scored, key=lambda t: (-t[0], t[1])) if s > 0]


def _conversation(model: Any, **kw: Any) -> Conversation:
    kw.setdefault("prefetch", 0)
    return Conversation(
        Pack(system_prompt="You are terse.", tools=TOOLS),
        model=model,
        tool_selector=FunctionSelector(by_words),
        skills_selector=None,
        **kw,
    )


def _same_tools(requests: Sequence[dict[str, Any]]) -> None:
    assert len(requests) > 1
    first = json.dumps(requests[0].get("tools"), sort_keys=True)
    assert all(json.dumps(r.get("tools"), sort_keys=True) == first for r in requests)


def _events(result: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in result.report.events if e["name"] == name]


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ModelServer]]:
    yield from servers()


# -- Anthropic tool_addition -----------------------------------------------------------------


def _anthropic_script() -> Callable[[dict[str, Any]], dict[str, Any]]:
    answers = iter(
        [
            [{"type": "tool_use", "id": "t1", "name": "find_tools", "input": {"query": "send an email"}}],
            [{"type": "tool_use", "id": "t2", "name": "mail__send_email", "input": {"to": "bo", "body": "hi"}}],
            [{"type": "text", "text": "sent"}],
            [{"type": "text", "text": "bye"}],
        ]
    )

    def model(req: dict[str, Any]) -> dict[str, Any]:
        return {"content": next(answers)}

    return model


def _record(inner: Callable[[dict[str, Any]], dict[str, Any]], into: list[dict[str, Any]]) -> Any:
    def model(req: dict[str, Any]) -> dict[str, Any]:
        into.append(json.loads(json.dumps(req)))
        return inner(req)

    return model


def test_anthropic_tool_addition_adds_found_tools_in_the_history_not_the_tools_array() -> None:
    requests: list[dict[str, Any]] = []
    conv = _conversation(_record(_anthropic_script(), requests), format="anthropic", tool_loading="addition")
    assert conv.offer_policy == "deferred"
    first = conv.send("please send an email to bo")
    second = conv.send("thanks")
    conv.close()
    assert first.answer == "sent" and second.answer == "bye"
    assert CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    _same_tools(requests)
    assert conv.prefix.breaks == 0
    for req in requests:
        assert req["betas"] == [TOOL_ADDITION_BETA]
        check(req, BetaCreateParams)
    # the find_tools result is a text; the addition follows it as a system message
    msgs = requests[1]["messages"]
    result = msgs[-2]["content"][0]
    assert result["type"] == "tool_result" and result["content"][0]["type"] == "text"
    assert msgs[-1]["role"] == "system"
    assert msgs[-1]["content"][0]["tool"] == {"type": "tool_reference", "name": "mail__send_email"}
    assert msgs[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}  # the last block's breakpoint
    deferred = {t["name"] for t in requests[0]["tools"] if t.get("defer_loading")}
    assert "mail__send_email" in deferred  # named by the addition: declared in tools[] with defer_loading
    # later requests keep the addition where it was (stateless API): the messages only grow
    later = [m for m in requests[-1]["messages"] if m["role"] == "system"]
    assert later and later[0]["content"][0]["tool"]["name"] == "mail__send_email"


def test_anthropic_addition_with_a_prefetch_adds_the_prefetched_tools() -> None:
    requests: list[dict[str, Any]] = []

    def model(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(json.loads(json.dumps(req)))
        return {"content": [{"type": "text", "text": "ok"}]}

    conv = _conversation(model, format="anthropic", tool_loading="addition", prefetch=2)
    conv.send("weather forecast for oslo")
    conv.close()
    system = [m for m in requests[0]["messages"] if m["role"] == "system"]
    assert [b["tool"]["name"] for b in system[0]["content"]] == ["weather__forecast", "weather__alerts"]
    check(requests[0], BetaCreateParams)


def test_the_checker_refuses_a_misspelt_tool_addition() -> None:
    requests: list[dict[str, Any]] = []
    conv = _conversation(_record(_anthropic_script(), requests), format="anthropic", tool_loading="addition")
    conv.send("please send an email to bo")
    conv.close()
    req = requests[1]
    req["messages"][-1]["content"][0]["tool"]["tool_name"] = req["messages"][-1]["content"][0]["tool"].pop("name")
    with pytest.raises(ShapeError):
        check(req, BetaCreateParams)


@pytest.mark.slow
def test_anthropic_addition_through_the_sdk_and_our_model(anthropic_server: Any) -> None:  # type: ignore[no-untyped-def]
    script = iter(
        [
            [{"type": "tool_use", "id": "t1", "name": "find_tools", "input": {"query": "send an email"}}],
            [{"type": "tool_use", "id": "t2", "name": "mail__send_email", "input": {"to": "bo", "body": "hi"}}],
            [{"type": "text", "text": "sent"}],
        ]
    )
    server = anthropic_server(lambda body: next(script))
    conv = _conversation(
        AnthropicMessagesModel("claude-test", base_url=server.url, api_key_env=None),
        format="anthropic",
        tool_loading="addition",
    )
    result = conv.send("please send an email to bo")
    conv.close()
    assert result.answer == "sent" and CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    assert all(h.get("anthropic-beta") == TOOL_ADDITION_BETA for h in server.headers)
    assert all("betas" not in body for body in server.requests)  # a header, not a body field
    ours = [dict(body) for body in server.requests]
    # the SDK sends the same request (betas as the header) for each of ours
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    server.script = lambda body: [{"type": "text", "text": "ok"}]
    try:
        for body in ours:
            client.beta.messages.create(**body, betas=[TOOL_ADDITION_BETA])
    finally:
        client.close()
    assert server.requests[len(ours) :] == ours
    assert all(h.get("anthropic-beta") == TOOL_ADDITION_BETA for h in server.headers[len(ours) :])


# -- OpenAI Responses: client tool_search, namespaces, deferred functions ----------------------


def _responses_script() -> Iterator[dict[str, Any]]:
    search = {
        "type": "tool_search_call",
        "id": "tsc_1",
        "call_id": "ts1",
        "execution": "client",
        "arguments": {"query": "send an email"},
        "status": "completed",
    }
    call = responses_call("c1", "mail__send_email", json.dumps({"to": "bo", "body": "hi"}))
    call["namespace"] = "mail"
    for items in ([search], [call], [responses_text("sent")], [responses_text("bye")]):
        yield Response.model_validate(responses_answer(items)).model_dump(mode="json", exclude_none=True)


def test_responses_format_searches_on_the_client_and_keeps_the_tools_array() -> None:
    requests: list[dict[str, Any]] = []
    answers = _responses_script()
    conv = _conversation(_record(lambda req: next(answers), requests), format="openai-responses")
    assert conv.offer_policy == "deferred"
    first = conv.send("please send an email to bo")
    second = conv.send("thanks")
    conv.close()
    assert first.answer == "sent" and second.answer == "bye"
    assert CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    _same_tools(requests)
    assert conv.prefix.breaks == 0
    for req in requests:
        check(req, ResponseCreateParamsNonStreaming)
        assert req["prompt_cache_key"] == requests[0]["prompt_cache_key"] == conv.prompt_cache_key
        assert req["input"][0] == {"type": "message", "role": "system", "content": "You are terse."}
    for before, after in itertools.pairwise(requests):
        assert after["input"][: len(before["input"])] == before["input"]  # append-only
    tools = {t.get("name", t["type"]): t for t in requests[0]["tools"]}
    assert tools["tool_search"]["execution"] == "client" and tools["tool_search"]["parameters"]["required"] == ["query"]
    assert tools["mail"]["type"] == "namespace" and tools["weather"]["type"] == "namespace"
    assert [t["name"] for t in tools["mail"]["tools"]] == ["mail__send_email", "mail__read_inbox"]
    assert all(t["defer_loading"] is True for t in tools["mail"]["tools"])
    assert tools["convert_currency"]["type"] == "function" and tools["convert_currency"]["defer_loading"] is True
    items = requests[1]["input"]
    assert items[-2] == {
        "type": "tool_search_call",
        "call_id": "ts1",
        "execution": "client",
        "arguments": {"query": "send an email"},
        "status": "completed",
    }
    out = items[-1]
    assert out["type"] == "tool_search_output" and out["call_id"] == "ts1" and out["execution"] == "client"
    loaded = {t["name"]: t for space in out["tools"] for t in space.get("tools", [space])}
    assert "mail__send_email" in loaded and "defer_loading" not in loaded["mail__send_email"]
    assert loaded["mail__send_email"]["parameters"]["required"] == ["body", "to"]
    called = requests[2]["input"][-2]
    assert called["type"] == "function_call" and called["namespace"] == "mail"


def test_responses_prefetch_is_a_tool_search_pair_and_a_bad_key_is_refused() -> None:
    requests: list[dict[str, Any]] = []

    def model(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(json.loads(json.dumps(req)))
        return responses_answer([responses_text("ok")])

    conv = _conversation(model, format="openai-responses", prefetch=2, prompt_cache_key="tenant-7")
    conv.send("weather forecast for oslo")
    conv.close()
    kinds = [i["type"] for i in requests[0]["input"]]
    assert kinds[-2:] == ["tool_search_call", "tool_search_output"]
    assert requests[0]["prompt_cache_key"] == "tenant-7"
    check(requests[0], ResponseCreateParamsNonStreaming)
    with pytest.raises(ConfigError, match="prompt_cache_key"):
        _conversation(model, format="openai-responses", prompt_cache_key="")


@pytest.mark.slow
def test_responses_format_through_the_sdk_and_our_model(serve: Callable[[Script], ModelServer]) -> None:
    answers = _responses_script()
    server = serve(lambda rec: Reply(next(answers)))
    conv = _conversation(
        OpenAIResponsesModel("gpt-test", base_url=server.url, api_key_env=None), format="openai-responses"
    )
    result = conv.send("please send an email to bo")
    conv.close()
    assert result.answer == "sent" and CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    ours = [r.body for r in server.requests]
    assert [r.path for r in server.requests] == ["/responses"] * 3
    assert all(body["store"] is False for body in ours)
    server.script = lambda rec: Reply(responses_answer([responses_text("ok")]))

    async def via_sdk() -> None:
        client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
        try:
            for body in ours:
                await client.responses.create(**body)
        finally:
            await client.close()

    asyncio.run(via_sdk())
    assert [r.body for r in server.requests[len(ours) :]] == ours


# -- chat completions: the fixed find_tools + call_tool surface ----------------------------------


def _bridge_script(*calls: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    script: list[dict[str, Any]] = [
        {"tool_calls": [_chat_call("s1", "find_tools", {"query": "send an email"})]},
        *({"tool_calls": [c]} for c in calls),
        {"content": "done"},
    ]
    answers = iter(script)

    def model(req: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "", **next(answers)}

    return model


def _chat_call(call_id: str, name: str, args: Any) -> dict[str, Any]:
    text = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def test_bridge_runs_a_found_tool_with_valid_arguments_and_never_changes_the_tools_array() -> None:
    requests: list[dict[str, Any]] = []
    good = _chat_call("c1", CALL_TOOL_NAME, {"name": "mail__send_email", "arguments": {"to": "bo", "body": "hi"}})
    conv = _conversation(_record(_bridge_script(good), requests), format="openai", tool_loading="bridge")
    assert conv.offer_policy == "deferred"
    result = conv.send("please send an email to bo")
    conv.close()
    assert result.answer == "done" and CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    _same_tools(requests)
    assert conv.prefix.breaks == 0
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["find_tools", CALL_TOOL_NAME]
    found = json.loads(requests[1]["messages"][-1]["content"])["found"]
    assert {"name", "description", "parameters"} <= set(found[0])  # the definitions travel in the result
    assert requests[2]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "mail__send_email done"}
    assert [c.name for c in result.report.tool_calls] == ["find_tools", "mail__send_email"]
    for req in requests:
        check(req, CompletionCreateParamsNonStreaming)


@pytest.mark.parametrize(
    ("call", "reason", "says"),
    [
        ({"name": "mail__send_email", "arguments": {"to": "bo"}}, "invalid_arguments", "'body' is a required"),
        ({"name": "mail__send_email", "arguments": {"to": 3, "body": "x"}}, "invalid_arguments", "to: 3 is not"),
        ({"name": "weather__alerts", "arguments": {"region": "x"}}, "not_found", "has not been found yet"),
        ({"name": "no_such_tool", "arguments": {}}, "not_found", "has not been found yet"),
        ({"arguments": {}}, "bad_call", "needs"),
        ("{not json", "bad_call", "JSON object"),
        ({"name": "mail__send_email", "arguments": "[1]"}, "bad_call", "must be an object"),
    ],
)
def test_a_refused_bridge_call_is_a_tool_error_and_an_event(call: Any, reason: str, says: str) -> None:
    requests: list[dict[str, Any]] = []
    bad = _chat_call("c1", CALL_TOOL_NAME, call)
    conv = _conversation(_record(_bridge_script(bad), requests), format="openai", tool_loading="bridge")
    result = conv.send("please send an email to bo")
    conv.close()
    assert CALLS == []  # nothing ran
    error = json.loads(requests[-1]["messages"][-1]["content"])["error"]
    assert says in error
    events = _events(result, "runtime.bridge_call_refused")
    assert [e["reason"] for e in events] == [reason] and events[0]["error"] == error
    assert result.report.tool_calls[-1].ok is False


def test_bridge_arguments_may_arrive_as_json_text() -> None:
    checked = check_bridge_call(
        json.dumps({"name": "t", "arguments": json.dumps({"a": 1})}), {"t": {"type": "object", "properties": {}}}
    )
    assert checked.error is None and checked.arguments == {"a": 1}
    broken = check_bridge_call({"name": "t", "arguments": {}}, {"t": {"type": "nonsense"}})
    assert broken.reason == "invalid_schema" and "invalid parameters schema" in (broken.error or "")


def test_chat_completions_default_to_the_bridge_and_the_others_to_native_deferral() -> None:
    defaults = {}
    for fmt in ("openai", "anthropic", "openai-responses"):
        conv = _conversation(lambda req: {}, format=fmt)
        defaults[fmt] = (conv.offer_policy, conv.tool_loading)
        conv.close()
    assert defaults == {
        "openai": ("deferred", "bridge"),
        "anthropic": ("deferred", "native"),
        "openai-responses": ("deferred", "native"),
    }
    stable = _conversation(lambda req: {}, format="openai", offer_policy="stable")
    assert stable.tool_loading == "native"  # the old behaviour, when asked for
    stable.close()


def test_the_bridge_on_the_responses_api_keeps_find_tools_a_plain_function() -> None:
    requests: list[dict[str, Any]] = []
    call = json.dumps({"name": "mail__send_email", "arguments": {"to": "bo", "body": "hi"}})
    answers = iter(
        [
            responses_answer([responses_call("s1", "find_tools", '{"query": "send an email"}')]),
            responses_answer([responses_call("c1", CALL_TOOL_NAME, call)]),
            responses_answer([responses_text("sent")]),
        ]
    )
    conv = _conversation(_record(lambda req: next(answers), requests), format="openai-responses", tool_loading="bridge")
    result = conv.send("please send an email to bo")
    conv.close()
    assert result.answer == "sent" and CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    _same_tools(requests)
    assert [t["name"] for t in requests[0]["tools"]] == ["find_tools", CALL_TOOL_NAME]
    assert [i["type"] for i in requests[1]["input"][-2:]] == ["function_call", "function_call_output"]
    for req in requests:
        check(req, ResponseCreateParamsNonStreaming)


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"format": "openai", "tool_loading": "addition"}, "needs format='anthropic'"),
        ({"format": "openai", "tool_loading": "bridge", "offer_policy": "stable"}, "needs offer_policy='deferred'"),
        ({"format": "anthropic", "tool_loading": "teleport"}, "tool_loading must be one of"),
        ({"format": "gemini"}, "format must be one of"),
    ],
)
def test_bad_tool_loading_is_a_config_error(kw: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        _conversation(lambda req: {}, **kw)


def test_each_http_model_refuses_a_request_in_another_format() -> None:
    responses_request = {"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}]}
    chat = OpenAIChatModel("m", base_url="http://127.0.0.1:9", api_key_env=None)
    claude = AnthropicMessagesModel("m", base_url="http://127.0.0.1:9", api_key_env=None)
    try:
        with pytest.raises(ModelError, match="openai-responses"):
            asyncio.run(chat.acomplete(responses_request))
        with pytest.raises(ModelError, match="Responses requests"):
            asyncio.run(claude.acomplete(responses_request))
    finally:
        asyncio.run(chat.aclose())
        asyncio.run(claude.aclose())


def test_call_tool_is_a_reserved_name() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        Conversation(Pack(tools=[Tool("call_tool", "x")]), model=lambda req: {})


@pytest.mark.slow
def test_bridge_through_the_sdk_and_our_model(chat_server: Any) -> None:  # type: ignore[no-untyped-def]
    good = _chat_call("c1", CALL_TOOL_NAME, {"name": "mail__send_email", "arguments": {"to": "bo", "body": "hi"}})
    script = _bridge_script(good)
    server = chat_server(script)
    conv = _conversation(
        OpenAIChatModel("gpt-test", base_url=server.url, api_key_env=None), format="openai", tool_loading="bridge"
    )
    result = conv.send("please send an email to bo")
    conv.close()
    assert result.answer == "done" and CALLS == [("mail__send_email", {"to": "bo", "body": "hi"})]
    ours = list(server.requests)
    server.script = lambda body: {"role": "assistant", "content": "ok"}
    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    try:
        for body in ours:
            client.chat.completions.create(**body)
    finally:
        client.close()
    assert server.requests[len(ours) :] == ours
