"""Every HTTP model is bounded: a whole-call deadline, an answer-size cap, a tool-call cap, and a
chat answer must carry ``choices``. Each endpoint here misbehaves for real on loopback."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
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

from loopback import starts_processes
from shortlist.errors import ConfigError, ModelError, ModelRequestBlocked
from shortlist.runtime import Conversation, Pack, Tool
from shortlist.runtime._model import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_TOOL_CALLS,
    AnthropicMessagesModel,
    CallableModel,
    HTTPChatModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
)

CHAT_REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_REQUEST: dict[str, Any] = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
@starts_processes
def serve() -> Iterator[Callable[[Script], ModelServer]]:
    yield from servers()


def make(kind: str, url: str, **limits: Any) -> HTTPChatModel:
    if kind == "chat":
        return OpenAIChatModel("m", base_url=f"{url}/v1", api_key_env=None, **limits)
    if kind == "anthropic":
        return AnthropicMessagesModel("m", base_url=url, api_key_env=None, **limits)
    return OpenAIResponsesModel("m", base_url=f"{url}/v1", api_key_env=None, **limits)


def request_for(kind: str) -> dict[str, Any]:
    return ANTHROPIC_REQUEST if kind == "anthropic" else CHAT_REQUEST


def text_answer(kind: str, text: str) -> dict[str, Any]:
    if kind == "chat":
        return chat_answer(text)
    if kind == "anthropic":
        return anthropic_answer([{"type": "text", "text": text}])
    return responses_answer([responses_text(text)])


def calls_answer(kind: str, n: int) -> dict[str, Any]:
    if kind == "chat":
        return chat_answer(
            None,
            [{"id": f"c{i}", "type": "function", "function": {"name": "ping", "arguments": "{}"}} for i in range(n)],
        )
    if kind == "anthropic":
        return anthropic_answer([{"type": "tool_use", "id": f"c{i}", "name": "ping", "input": {}} for i in range(n)])
    return responses_answer([responses_call(f"c{i}", "ping", "{}") for i in range(n)])


async def complete(model: HTTPChatModel, request: dict[str, Any], *, bound: float = 10.0) -> Any:
    """One call, bounded by the test itself so a model without a deadline fails instead of hanging."""
    try:
        return await asyncio.wait_for(model.acomplete(request), bound)
    finally:
        await model.aclose()


KINDS = ["chat", "anthropic", "responses"]


# -- the whole-call deadline -----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_trickling_one_byte_at_a_time_is_cut_at_the_deadline(
    kind: str, serve: Callable[[Script], ModelServer]
) -> None:
    # a valid answer, one byte every 50 ms: no single read ever waits long, the whole takes minutes
    data = json.dumps(text_answer(kind, "x" * 4000)).encode()
    server = serve(lambda r: Reply(raw=data, chunk=1, delay=0.05))
    t = time.monotonic()
    with pytest.raises(ModelError, match=r"did not answer within timeout_s=0\.5 s"):
        asyncio.run(complete(make(kind, server.url, timeout_s=0.5), request_for(kind), bound=5))
    assert time.monotonic() - t < 2.0


def test_a_silent_server_is_cut_at_the_deadline(serve: Callable[[Script], ModelServer]) -> None:
    # headers promise 100 bytes, none come
    server = serve(lambda r: Reply(raw=b"{", chunk=1, declared=100))
    with pytest.raises(ModelError, match=r"timeout_s=0\.3"):
        asyncio.run(complete(make("chat", server.url, timeout_s=0.3), CHAT_REQUEST, bound=5))


# -- the answer's size ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_answer_over_the_default_cap_is_refused_while_streaming(
    kind: str, serve: Callable[[Script], ModelServer]
) -> None:
    # a valid answer just over 16 MiB, with no Content-Length: only reading finds its size
    data = json.dumps(text_answer(kind, "y" * (DEFAULT_MAX_RESPONSE_BYTES + 10))).encode()
    server = serve(lambda r: Reply(raw=data, chunk=1 << 20))
    with pytest.raises(ModelError, match="more than max_response_bytes=16,777,216"):
        asyncio.run(complete(make(kind, server.url), request_for(kind)))


def test_a_compressed_answer_is_capped_after_decoding(serve: Callable[[Script], ModelServer]) -> None:
    # 20 MB of JSON that gzips to about 20 kB: the cap counts what it would take in memory
    bomb = gzip.compress(json.dumps(chat_answer(" " * 20_000_000)).encode())
    assert len(bomb) < 100_000
    server = serve(lambda r: Reply(raw=bomb, headers={"Content-Encoding": "gzip"}))
    with pytest.raises(ModelError, match="sent more than max_response_bytes=16,777,216"):
        asyncio.run(complete(make("chat", server.url), CHAT_REQUEST))


def test_an_announced_huge_answer_is_refused_before_reading(serve: Callable[[Script], ModelServer]) -> None:
    # 150 MB announced, a few bytes sent, then the server holds the connection: nothing is awaited
    server = serve(lambda r: Reply(raw=b'{"id": "x", ', chunk=64, declared=150_000_000))
    t = time.monotonic()
    with pytest.raises(ModelError, match=r"announced a 150,000,000-byte answer"):
        asyncio.run(complete(make("chat", server.url, timeout_s=5), CHAT_REQUEST))
    assert time.monotonic() - t < 2.0


def test_the_cap_is_configurable_and_an_answer_at_the_cap_passes(serve: Callable[[Script], ModelServer]) -> None:
    data = json.dumps(chat_answer("z" * 500)).encode()
    server = serve(lambda r: Reply(raw=data, chunk=100))
    ok = asyncio.run(complete(make("chat", server.url, max_response_bytes=len(data)), CHAT_REQUEST))
    assert ok["choices"][0]["message"]["content"] == "z" * 500
    with pytest.raises(ModelError, match=f"max_response_bytes={len(data) - 1:,}"):
        asyncio.run(complete(make("chat", server.url, max_response_bytes=len(data) - 1), CHAT_REQUEST))


# -- tool calls per answer ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_five_thousand_tool_calls_in_one_answer_are_refused(kind: str, serve: Callable[[Script], ModelServer]) -> None:
    server = serve(lambda r: Reply(calls_answer(kind, 5000)))
    with pytest.raises(
        ModelError, match=f"5000 tool calls in one answer, more than max_tool_calls={DEFAULT_MAX_TOOL_CALLS}"
    ):
        asyncio.run(complete(make(kind, server.url), request_for(kind)))
    # at the cap they pass
    server.script = lambda r: Reply(calls_answer(kind, DEFAULT_MAX_TOOL_CALLS))
    asyncio.run(complete(make(kind, server.url), request_for(kind)))


def test_no_tool_of_a_flooding_answer_runs_in_a_conversation(serve: Callable[[Script], ModelServer]) -> None:
    ran: list[int] = []

    def ping() -> str:
        """Answer pong."""
        ran.append(1)
        return "pong"

    server = serve(lambda r: Reply(calls_answer("chat", 5000)))
    model = OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key_env=None, max_tool_calls=10)
    conv = Conversation(Pack(tools=[Tool.from_function(ping)]), model=model, format="openai", tool_selector="lexical")
    try:
        with pytest.raises(ModelError, match="max_tool_calls=10"):
            conv.send("ping the server")
    finally:
        conv.close()
    assert ran == []


def test_a_callable_model_has_the_same_tool_call_cap() -> None:
    flood = calls_answer("chat", 3)
    with pytest.raises(ModelError, match="the model callable answered 3 tool calls"):
        asyncio.run(CallableModel(lambda r: flood, max_tool_calls=2).acomplete(CHAT_REQUEST))
    assert asyncio.run(CallableModel(lambda r: flood, max_tool_calls=3).acomplete(CHAT_REQUEST)) is flood


# -- a chat answer needs choices -------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [{"id": "x"}, {"id": "x", "choices": []}, {"choices": "x"}, {"choices": [{}]}, {"choices": [{"message": "hi"}]}],
    ids=["no-choices", "empty", "not-a-list", "no-message", "message-not-object"],
)
def test_a_chat_answer_without_choices_is_an_error(
    answer: dict[str, Any], serve: Callable[[Script], ModelServer]
) -> None:
    server = serve(lambda r: Reply(answer))
    with pytest.raises(ModelError, match="choices"):
        asyncio.run(complete(make("chat", server.url), CHAT_REQUEST))


@pytest.mark.parametrize(
    ("kind", "answer", "match"),
    [
        ("anthropic", {"id": "x", "type": "message"}, "without a `content` list"),
        (
            "anthropic",
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            "overloaded_error: busy",
        ),
        ("responses", {"id": "x", "object": "response"}, "without an `output` list"),
        (
            "responses",
            {**responses_answer([], status="failed"), "error": {"code": "server_error", "message": "boom"}},
            "failed response: server_error: boom",
        ),
    ],
)
def test_unusable_answers_of_the_new_models(
    kind: str, answer: dict[str, Any], match: str, serve: Callable[[Script], ModelServer]
) -> None:
    server = serve(lambda r: Reply(answer))
    with pytest.raises(ModelError, match=match):
        asyncio.run(complete(make(kind, server.url), request_for(kind)))


# -- failures are ModelErrors ----------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_http_errors_carry_the_providers_message(kind: str, serve: Callable[[Script], ModelServer]) -> None:
    error: dict[str, Any] = {"error": {"type": "invalid_request_error", "message": "max_tokens: field required"}}
    if kind == "anthropic":
        error = {"type": "error", **error}
    server = serve(lambda r: Reply(error, status=400))
    with pytest.raises(ModelError, match="answered 400: invalid_request_error: max_tokens: field required"):
        asyncio.run(complete(make(kind, server.url), request_for(kind)))


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply(raw=b"<html>oops</html>"), "answered non-JSON: '<html>oops</html>'"),
        (Reply([1, 2]), "answered a JSON list, expected an object"),
        (Reply(raw=b"upstream down", status=502), "answered 502: upstream down"),
    ],
    ids=["html", "array", "502"],
)
def test_bad_bodies_are_model_errors(reply: Reply, match: str, serve: Callable[[Script], ModelServer]) -> None:
    server = serve(lambda r: reply)
    with pytest.raises(ModelError, match=match):
        asyncio.run(complete(make("chat", server.url), CHAT_REQUEST))


def test_a_refused_connection_is_a_model_error() -> None:
    from loopback import free_port

    with pytest.raises(ModelError, match="failed: ConnectError"):
        asyncio.run(complete(make("anthropic", f"http://127.0.0.1:{free_port()}"), ANTHROPIC_REQUEST))


def test_a_request_that_is_not_json_is_a_model_error(serve: Callable[[Script], ModelServer]) -> None:
    server = serve(lambda r: Reply(chat_answer()))
    with pytest.raises(ModelError, match="is not JSON"):
        asyncio.run(complete(make("chat", server.url), {**CHAT_REQUEST, "metadata": {"x": object()}}))
    assert server.requests == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "limits",
    [
        {"timeout_s": 0},
        {"timeout_s": -1},
        {"timeout_s": "3"},
        {"max_response_bytes": 0},
        {"max_tool_calls": 0},
        {"max_tool_calls": True},
    ],
    ids=str,
)
def test_bad_limits_are_config_errors(kind: str, limits: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(limits))):
        make(kind, "http://127.0.0.1:1", **limits)


def test_bad_constructor_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIResponsesModel("m", base_url="127.0.0.1:8000")
    with pytest.raises(ConfigError, match="model name"):
        AnthropicMessagesModel("", base_url="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="betas"):
        AnthropicMessagesModel("m", betas=[""])
    with pytest.raises(ConfigError, match="auth must be"):
        AnthropicMessagesModel("m", auth="basic")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="version"):
        AnthropicMessagesModel("m", version="")
    with pytest.raises(ConfigError, match="max_tool_calls"):
        CallableModel(lambda r: r, max_tool_calls=0)


@pytest.mark.parametrize(
    ("kind", "request_"),
    [
        ("chat", ANTHROPIC_REQUEST | {"system": "be brief"}),
        ("responses", ANTHROPIC_REQUEST | {"system": "be brief"}),
        ("anthropic", {**CHAT_REQUEST, "messages": [{"role": "system", "content": "x"}, *CHAT_REQUEST["messages"]]}),
        ("anthropic", CHAT_REQUEST | {"tools": [{"type": "function", "function": {"name": "f"}}]}),
    ],
)
def test_a_request_in_the_other_format_is_refused_before_sending(
    kind: str, request_: dict[str, Any], serve: Callable[[Script], ModelServer]
) -> None:
    server = serve(lambda r: Reply(text_answer(kind, "x")))
    with pytest.raises(ModelError, match=r"takes .* requests \(Conversation\(format="):
        asyncio.run(complete(make(kind, server.url), request_))
    assert server.requests == []


@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_the_new_models_refuse_a_paid_host_inside_the_test_suite(kind: str) -> None:
    model: HTTPChatModel = (
        AnthropicMessagesModel("claude-x")  # the default base_url is the real API
        if kind == "anthropic"
        else OpenAIResponsesModel("gpt-x", base_url="https://api.openai.com/v1")
    )
    with pytest.raises(ModelRequestBlocked, match="inside a test suite"):
        asyncio.run(complete(model, request_for(kind)))
