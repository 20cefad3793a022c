"""A model's answer read back: its text and tool calls (:class:`ModelTurn`, :class:`ToolCall`) from a
chat completions, Anthropic messages or Responses body, with the assistant message for the history.
Re-exported by :mod:`shortlist.runtime._formats`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shortlist.runtime._model import ModelError

if TYPE_CHECKING:
    from shortlist.runtime._formats import Format

__all__ = ["ModelTurn", "ToolCall", "parse_response"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model made."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """What the model answered: text and/or tool calls, plus the assistant message for the history."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    message: dict[str, Any]


def parse_response(fmt: Format, body: Mapping[str, Any]) -> ModelTurn:
    """Read the text and tool calls of a response body.

    A Responses answer's client ``tool_search_call`` is read as a ``find_tools`` call, and a
    ``function_call``'s ``namespace`` is kept on the call (the next request sends it back).

    Raises:
        ModelError: the body does not have the format's shape.
    """
    if fmt == "openai-responses":
        from shortlist.runtime._responses import from_responses_answer

        return parse_response("openai", from_responses_answer(body, client_search=True))
    if fmt == "anthropic":
        blocks = body.get("content")
        if not isinstance(blocks, list):
            raise ModelError("an Anthropic response needs a `content` list")
        texts = [b.get("text", "") for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"]
        calls = tuple(
            ToolCall(str(b.get("id", "")), str(b.get("name", "")), b.get("input") or {})
            for b in blocks
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        )
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in calls
            ]
        return ModelTurn("\n".join(texts), calls, message)
    msg: Any = body
    if "choices" in body:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ModelError("an OpenAI response needs a non-empty `choices` list")
        msg = choices[0].get("message")
    if not isinstance(msg, Mapping):
        raise ModelError("an OpenAI response needs `choices[0].message`")
    calls = tuple(
        ToolCall(
            str(c.get("id", "")),
            str(c.get("function", {}).get("name", "")),
            c.get("function", {}).get("arguments") or "{}",
        )
        for c in msg.get("tool_calls") or ()
        if isinstance(c, Mapping)
    )
    text = msg.get("content") or ""
    message = {"role": "assistant", "content": text if isinstance(text, str) else ""}
    if calls:
        message["tool_calls"] = [dict(c) for c in msg.get("tool_calls") or ()]
    return ModelTurn(text if isinstance(text, str) else "", calls, message)
