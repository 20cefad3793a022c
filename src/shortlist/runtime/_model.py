"""The host's model: a callable, or a provider's HTTP endpoint over httpx.

A :class:`ChatModel` receives the request body the runtime built (OpenAI chat-completions
or Anthropic messages format) and returns the provider's response body in the same format.

Three HTTP models ship: :class:`OpenAIChatModel` (``POST {base_url}/chat/completions``),
:class:`AnthropicMessagesModel` (``POST {base_url}/v1/messages``) and
:class:`OpenAIResponsesModel` (``POST {base_url}/responses``: it takes the runtime's chat
request, sends it as a Responses request and answers in the chat shape, see
:mod:`shortlist.runtime._responses`). Each call of each of them is bounded
(:class:`HTTPChatModel`): a deadline on the whole call (connect, send, every byte of the
answer), a cap on the answer's size (read as a stream, never kept whole past the cap) and a
cap on the tool calls of one answer; breaking any is a :class:`~shortlist.errors.ModelError`.
Every request passes the paid-call guard (:func:`shortlist._model_guard.check_model_request`)
first: inside a test suite only loopback hosts are reached.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

import httpx

from shortlist._model_guard import check_model_request
from shortlist.errors import ConfigError, ModelError
from shortlist.runtime._model_checks import (
    anthropic_shaped,
    beta_flags,
    chat_shaped,
    check_positive,
    check_tool_calls,
    count_tool_calls,
    error_detail,
    responses_shaped,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_TOOL_CALLS",
    "DEFAULT_TIMEOUT_S",
    "AnthropicMessagesModel",
    "CallableModel",
    "ChatModel",
    "HTTPChatModel",
    "ModelError",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "count_tool_calls",
]

#: The whole-call deadline of an HTTP model, in seconds, unless ``timeout_s`` says otherwise.
DEFAULT_TIMEOUT_S = 60.0
#: The largest answer an HTTP model reads (bytes after content decoding): 16 MiB.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: The most tool calls one answer may carry (every model, the callable one included).
DEFAULT_MAX_TOOL_CALLS = 128
#: The ``anthropic-version`` header :class:`AnthropicMessagesModel` sends.
ANTHROPIC_VERSION = "2023-06-01"


class ChatModel(ABC):
    """One chat model. ``acomplete`` takes a request body and returns the response body."""

    #: The model name written into requests.
    model: str = "model"

    @abstractmethod
    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """Send ``request`` and return the response body."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


ModelFunc = Callable[[Mapping[str, Any]], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]


class CallableModel(ChatModel):
    """Wrap a host function (sync or async) ``request -> response`` as a :class:`ChatModel`.

    The function receives the request the runtime built and returns the provider's answer
    in the same format (the shapes are in the docs, ``docs/models.md``).

    Args:
        func: ``request -> response`` or an async function of the same.
        model: the model name written into requests.
        max_tool_calls: the most tool calls one answer may carry.
    """

    def __init__(
        self, func: ModelFunc, *, model: str = "host-model", max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    ) -> None:
        check_positive("max_tool_calls", max_tool_calls, "CallableModel")
        self._func = func
        self.model = model
        self.max_tool_calls = int(max_tool_calls)

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call the wrapped function.

        Raises:
            ModelError: it returned something other than an object, or too many tool calls.
        """
        out = self._func(request)
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, Mapping):
            raise ModelError(f"the model callable returned {type(out).__name__}, expected a response object")
        check_tool_calls(out, self.max_tool_calls, "the model callable")
        return out


class HTTPChatModel(ChatModel):
    """What the HTTP models share: the guard, the whole-call deadline and the two caps.

    Args:
        model: the model name.
        base_url: the API root.
        headers: headers sent with every request (the key).
        timeout_s: the deadline of one whole call: connecting, sending and reading the last
            byte of the answer (a server trickling bytes cannot hold a turn past it).
        max_response_bytes: the largest answer read; a larger one (declared in
            ``Content-Length`` or found while reading) is refused without keeping it.
        max_tool_calls: the most tool calls one answer may carry; more is refused (none runs).
    """

    #: What the endpoint is called in errors.
    endpoint: str = "model endpoint"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        owner = type(self).__name__
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{owner} needs an http(s) base_url, not {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{owner} needs a model name")
        check_positive("timeout_s", timeout_s, owner)
        check_positive("max_response_bytes", max_response_bytes, owner)
        check_positive("max_tool_calls", max_tool_calls, owner)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.max_response_bytes = int(max_response_bytes)
        self.max_tool_calls = int(max_tool_calls)
        self._client = httpx.AsyncClient(timeout=self.timeout_s, headers=dict(headers or {}))

    @staticmethod
    def _key_header(api_key_env: str | None, name: str, prefix: str = "") -> dict[str, str]:
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        return {name: f"{prefix}{key}"} if key else {}

    async def _post(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """POST ``body`` to ``{base_url}{path}`` within the deadline; the answer's JSON object.

        Raises:
            ModelError: a transport failure, the deadline, an answer over the size cap, an
                HTTP error status, or an answer that is not a JSON object.
            ModelRequestBlocked: inside a test suite, ``base_url`` is not a loopback host.
        """
        where = f"{self.endpoint} {self.base_url}"
        check_model_request(self.base_url, who=f"{self.endpoint} {self.model}")
        try:
            content = json.dumps(body, ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise ModelError(f"the request for {where} is not JSON: {exc}") from exc
        send_headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream(
                    "POST", f"{self.base_url}{path}", content=content, headers=send_headers
                ) as resp:
                    raw = await self._read_capped(resp, where)
                    status = resp.status_code
        except TimeoutError as exc:
            raise ModelError(f"{where} did not answer within timeout_s={self.timeout_s:g} s (the whole call)") from exc
        except httpx.TimeoutException as exc:
            raise ModelError(f"{where} timed out ({type(exc).__name__}) within timeout_s={self.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise ModelError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
        if status >= 400:
            raise ModelError(f"{where} answered {status}: {error_detail(raw)}")
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise ModelError(f"{where} answered non-JSON: {raw[:200].decode('utf-8', 'replace')!r}") from exc
        if not isinstance(answer, dict):
            raise ModelError(f"{where} answered a JSON {type(answer).__name__}, expected an object")
        return answer

    async def _read_capped(self, resp: httpx.Response, where: str) -> bytes:
        cap = self.max_response_bytes
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap and "content-encoding" not in resp.headers:
            raise ModelError(
                f"{where} announced a {int(declared):,}-byte answer, more than max_response_bytes={cap:,}; not read"
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise ModelError(f"{where} sent more than max_response_bytes={cap:,} bytes; the answer was dropped")
            chunks.append(chunk)
        return b"".join(chunks)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


class OpenAIChatModel(HTTPChatModel):
    """Any OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key_env: the environment variable holding the key (optional for local servers).
        timeout_s, max_response_bytes, max_tool_calls: the limits of :class:`HTTPChatModel`.
    """

    endpoint = "chat endpoint"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        if not base_url:
            raise ConfigError("OpenAIChatModel needs a base_url, e.g. http://127.0.0.1:8000/v1")
        super().__init__(
            model,
            base_url=base_url,
            headers=self._key_header(api_key_env, "Authorization", "Bearer "),
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
            max_tool_calls=max_tool_calls,
        )

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST the request to ``{base_url}/chat/completions``.

        Raises:
            ModelError: the endpoint failed, broke a limit, or answered without a non-empty
                ``choices`` list whose first entry has a ``message`` object.
            ModelRequestBlocked: inside a test suite, ``base_url`` is not a loopback host.
        """
        if anthropic_shaped(request):
            raise ModelError(
                f"{type(self).__name__} takes chat-completions requests (Conversation(format='openai')), "
                "not Anthropic messages (a top-level `system` or `input_schema` tools)"
            )
        if responses_shaped(request):
            raise ModelError(
                f"{type(self).__name__} takes chat-completions requests (Conversation(format='openai')), not "
                "Responses requests (`input`): send Conversation(format='openai-responses') with OpenAIResponsesModel"
            )
        body = await self._post("/chat/completions", {"model": self.model, **request})
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ModelError(f"{self.endpoint} {self.base_url} answered without a non-empty `choices` list")
        if not isinstance(choices[0].get("message"), Mapping):
            raise ModelError(f"{self.endpoint} {self.base_url} answered without `choices[0].message`")
        check_tool_calls(body, self.max_tool_calls, f"{self.endpoint} {self.base_url}")
        return body


class AnthropicMessagesModel(HTTPChatModel):
    """Anthropic's Messages API, ``POST {base_url}/v1/messages`` (the runtime's ``format="anthropic"``).

    Sends the key (from ``api_key_env``) as ``x-api-key``, ``anthropic-version: 2023-06-01`` and,
    only when a flag is asked for, ``anthropic-beta``: the constructor's ``betas`` plus a
    request's own ``betas`` list (removed from the body, as the SDK's
    ``client.beta.messages.create`` does). The ``anthropic`` SDK 2.15 sends its key as
    ``Authorization: Bearer`` and ``anthropic-version: 2026-10-21``; ``auth="bearer"`` and
    ``version=`` send the same.

    Args:
        model: the model name.
        base_url: the API root without ``/v1`` (as the SDK's ``base_url``).
        api_key_env: the environment variable holding the key.
        betas: ``anthropic-beta`` flags sent with every request.
        version: the ``anthropic-version`` header.
        auth: how the key is sent: ``x-api-key`` or ``bearer`` (``Authorization: Bearer``).
        timeout_s, max_response_bytes, max_tool_calls: the limits of :class:`HTTPChatModel`.
    """

    endpoint = "messages endpoint"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key_env: str | None = "ANTHROPIC_API_KEY",
        betas: Iterable[str] = (),
        version: str = ANTHROPIC_VERSION,
        auth: Literal["x-api-key", "bearer"] = "x-api-key",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        try:
            self.betas: tuple[str, ...] = tuple(beta_flags(betas, "AnthropicMessagesModel"))
        except ModelError as exc:
            raise ConfigError(str(exc)) from exc
        if not isinstance(version, str) or not version:
            raise ConfigError("AnthropicMessagesModel: version must be an anthropic-version date, e.g. 2023-06-01")
        if auth not in ("x-api-key", "bearer"):
            raise ConfigError(f"AnthropicMessagesModel: auth must be 'x-api-key' or 'bearer', not {auth!r}")
        self.version = version
        key = (
            self._key_header(api_key_env, "x-api-key")
            if auth == "x-api-key"
            else self._key_header(api_key_env, "Authorization", "Bearer ")
        )
        super().__init__(
            model,
            base_url=base_url,
            headers={"anthropic-version": version, **key},
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
            max_tool_calls=max_tool_calls,
        )

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST the request to ``{base_url}/v1/messages``; the answer is the Message object.

        Raises:
            ModelError: the endpoint failed, broke a limit, answered an error object, or a
                message without a ``content`` list; the request's ``betas`` is not a list of strings.
            ModelRequestBlocked: inside a test suite, ``base_url`` is not a loopback host.
        """
        where = f"{self.endpoint} {self.base_url}"
        if chat_shaped(request) or responses_shaped(request):
            raise ModelError(
                "AnthropicMessagesModel takes Anthropic messages requests (Conversation(format='anthropic')), "
                "not chat completions (a system message first, or `function` tools) or Responses requests (`input`)"
            )
        body = {"model": self.model, **request}
        flags = list(self.betas)
        if "betas" in body:
            flags += [f for f in beta_flags(body.pop("betas"), where) if f not in flags]
        headers = {"anthropic-beta": ",".join(flags)} if flags else None
        answer = await self._post("/v1/messages", body, headers)
        if answer.get("type") == "error":
            raise ModelError(f"{where} answered an error: {error_detail(json.dumps(answer).encode())}")
        if not isinstance(answer.get("content"), list):
            raise ModelError(f"{where} answered without a `content` list")
        check_tool_calls(answer, self.max_tool_calls, where)
        return answer


class OpenAIResponsesModel(HTTPChatModel):
    """OpenAI's Responses API, ``POST {base_url}/responses``, behind the runtime's chat format.

    :meth:`acomplete` takes a chat-completions request (what the runtime builds for
    ``format="openai"``), converts it to a Responses request (``input`` items, flat function
    ``tools``; see :func:`shortlist.runtime._responses.to_responses_request` for what is
    supported) and converts the answer back to a chat completion (output text, ``function_call``
    items as ``tool_calls``). A request that already has ``input`` (what the runtime builds for
    ``format="openai-responses"``: ``tool_search``, namespaces, deferred functions,
    ``prompt_cache_key``) is sent as it is and its Responses body returned unconverted.
    Stateless: no ``previous_response_id``; ``store``
    defaults to false because the runtime resends the history.

    Args:
        model: the model name.
        base_url: the API root, e.g. ``https://api.openai.com/v1``.
        api_key_env: the environment variable holding the key (optional for local servers).
        store: the Responses ``store`` flag sent unless the request sets it (None: not sent).
        timeout_s, max_response_bytes, max_tool_calls: the limits of :class:`HTTPChatModel`.
    """

    endpoint = "responses endpoint"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        store: bool | None = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        self.store = store
        super().__init__(
            model,
            base_url=base_url,
            headers=self._key_header(api_key_env, "Authorization", "Bearer "),
            timeout_s=timeout_s,
            max_response_bytes=max_response_bytes,
            max_tool_calls=max_tool_calls,
        )

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """Send the request as a Responses request; a chat completion back (see the class).

        Raises:
            ModelError: the request uses what the conversion does not support, the endpoint
                failed, broke a limit, or answered a failed or unreadable response.
            ModelRequestBlocked: inside a test suite, ``base_url`` is not a loopback host.
        """
        from shortlist.runtime._responses import from_responses_answer, to_responses_request

        where = f"{self.endpoint} {self.base_url}"
        if anthropic_shaped(request):
            raise ModelError(
                "OpenAIResponsesModel takes chat-completions requests (Conversation(format='openai')) or "
                "Responses requests, not Anthropic messages (a top-level `system` or `input_schema` tools)"
            )
        native = "input" in request and "messages" not in request
        body = {"model": self.model, **request} if native else to_responses_request(request, model=self.model)
        if self.store is not None:
            body.setdefault("store", self.store)
        answer = await self._post("/responses", body)
        if answer.get("status") == "failed" or isinstance(answer.get("error"), Mapping):
            raise ModelError(f"{where} answered a failed response: {error_detail(json.dumps(answer).encode())}")
        if not isinstance(answer.get("output"), list):
            raise ModelError(f"{where} answered without an `output` list")
        check_tool_calls(answer, self.max_tool_calls, where)
        return answer if native else from_responses_answer(answer, where=where)
