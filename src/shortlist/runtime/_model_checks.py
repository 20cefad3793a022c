"""The checks the chat models make: how many tool calls an answer carries (and the cap on them),
positive settings, a provider's error message, which API a request is shaped for, Anthropic beta
flags. Used by :mod:`shortlist.runtime._model`, which re-exports :func:`count_tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from shortlist.errors import ConfigError, ModelError

__all__ = [
    "anthropic_shaped",
    "beta_flags",
    "chat_shaped",
    "check_positive",
    "check_tool_calls",
    "count_tool_calls",
    "error_detail",
    "responses_shaped",
]


def count_tool_calls(body: Mapping[str, Any]) -> int:
    """The tool calls an answer carries, in any of the three shapes.

    OpenAI chat ``choices[*].message.tool_calls``, Anthropic ``content[*]`` blocks of type
    ``tool_use``, Responses ``output[*]`` items of type ``function_call`` or ``tool_search_call``; a bare assistant
    message (what a callable may return) counts its ``tool_calls``.
    """
    n = 0
    choices = body.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            msg = choice.get("message") if isinstance(choice, Mapping) else None
            if isinstance(msg, Mapping) and isinstance(msg.get("tool_calls"), list):
                n += len(msg["tool_calls"])
    elif isinstance(body.get("tool_calls"), list):
        n += len(body["tool_calls"])
    for key, kinds in (("content", ("tool_use",)), ("output", ("function_call", "tool_search_call"))):
        items = body.get(key)
        if isinstance(items, list):
            n += sum(1 for b in items if isinstance(b, Mapping) and b.get("type") in kinds)
    return n


def check_tool_calls(body: Mapping[str, Any], limit: int, who: str) -> None:
    """Refuse an answer with more than ``limit`` tool calls (none is run).

    Raises:
        ModelError: too many.
    """
    n = count_tool_calls(body)
    if n > limit:
        raise ModelError(f"{who} answered {n} tool calls in one answer, more than max_tool_calls={limit}; none was run")


def check_positive(name: str, value: float, owner: str) -> None:
    """Refuse a setting that is not a positive number.

    Raises:
        ConfigError: it is not.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{owner}: {name} must be a positive number, not {value!r}")


def error_detail(raw: bytes) -> str:
    """The provider's error message when the body is a JSON error, else the body's start."""
    text = raw[:2000].decode("utf-8", "replace")
    try:
        body = json.loads(raw)
    except ValueError:
        return text[:200]
    err = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(err, Mapping) and isinstance(err.get("message"), str):
        kind = err.get("type") or err.get("code")
        return f"{kind}: {err['message'][:300]}" if kind else err["message"][:300]
    return text[:200]


def anthropic_shaped(request: Mapping[str, Any]) -> bool:
    """A messages request: a top-level ``system`` or tools with ``input_schema``."""
    tools = request.get("tools")
    return "system" in request or (
        isinstance(tools, list) and any(isinstance(t, Mapping) and "input_schema" in t for t in tools)
    )


def responses_shaped(request: Mapping[str, Any]) -> bool:
    """A Responses request: ``input`` and no ``messages``."""
    return "input" in request and "messages" not in request


def chat_shaped(request: Mapping[str, Any]) -> bool:
    """A chat-completions request: the system prompt as the first message, or ``function`` tools."""
    messages, tools = request.get("messages"), request.get("tools")
    first = messages[0] if isinstance(messages, list) and messages else None
    return (isinstance(first, Mapping) and first.get("role") == "system") or (
        isinstance(tools, list) and any(isinstance(t, Mapping) and "function" in t for t in tools)
    )


def beta_flags(value: Any, where: str) -> list[str]:
    """Anthropic beta flags: one string or a list of non-empty strings.

    Raises:
        ModelError: anything else.
    """
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable) or not all(isinstance(b, str) and b for b in value):
        raise ModelError(f"{where}: betas must be a list of non-empty strings, not {value!r}")
    return list(value)
