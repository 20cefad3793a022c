"""The host's model: a callable, or an OpenAI-compatible chat endpoint over httpx.

A :class:`ChatModel` receives the request body the runtime built (OpenAI chat-completions
or Anthropic messages format) and returns the provider's response body in the same format.
"""

from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from shortlist.errors import ConfigError, ModelError
from shortlist.model_guard import check_model_request

__all__ = ["CallableModel", "ChatModel", "ModelError", "OpenAIChatModel"]


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
    """Wrap a host function (sync or async) ``request -> response`` as a :class:`ChatModel`."""

    def __init__(self, func: ModelFunc, *, model: str = "host-model") -> None:
        self._func = func
        self.model = model

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """Call the wrapped function."""
        out = self._func(request)
        if inspect.isawaitable(out):
            out = await out
        if not isinstance(out, Mapping):
            raise ModelError(f"the model callable returned {type(out).__name__}, expected a response object")
        return out


class OpenAIChatModel(ChatModel):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        model: the model name.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key_env: the environment variable holding the key (optional for local servers).
        timeout_s: per-request timeout.
    """

    def __init__(
        self, model: str, *, base_url: str, api_key_env: str | None = "OPENAI_API_KEY", timeout_s: float = 60.0
    ) -> None:
        if not base_url:
            raise ConfigError("OpenAIChatModel needs a base_url, e.g. http://127.0.0.1:8000/v1")
        self.model = model
        self.base_url = base_url.rstrip("/")
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(timeout=timeout_s, headers=headers)

    async def acomplete(self, request: Mapping[str, Any]) -> Mapping[str, Any]:
        """POST the request to ``{base_url}/chat/completions``.

        Raises:
            ModelError: the endpoint failed or answered something unusable.
            ModelRequestBlocked: inside a test suite, ``base_url`` is not a loopback host.
        """
        check_model_request(self.base_url, who=f"chat model {self.model}")
        try:
            resp = await self._client.post(f"{self.base_url}/chat/completions", json=dict(request))
        except httpx.HTTPError as exc:
            raise ModelError(f"chat endpoint {self.base_url} failed: {exc}") from exc
        if resp.status_code >= 400:
            raise ModelError(f"chat endpoint {self.base_url} answered {resp.status_code}: {resp.text[:200]}")
        try:
            body = resp.json()
        except ValueError as exc:
            raise ModelError(f"chat endpoint {self.base_url} answered non-JSON") from exc
        if not isinstance(body, Mapping):
            raise ModelError("chat endpoint answered a non-object")
        return body

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
