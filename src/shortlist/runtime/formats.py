"""Build model requests in OpenAI chat-completions or Anthropic messages format, and read answers.

The runtime keeps its history as OpenAI-style messages; :func:`build_request` renders the
system prompt, the history and this turn's tools in the requested format, and
:func:`parse_response` reads text and tool calls back from either format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shortlist.runtime.model import ModelError

__all__ = ["Format", "ModelTurn", "ToolCall", "ToolDef", "build_request", "parse_response", "to_anthropic_messages"]

Format = Literal["openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def render(self, fmt: Format) -> dict[str, Any]:
        """The tool definition in ``fmt``."""
        if fmt == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": dict(self.parameters)}
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


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


def to_anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Convert OpenAI-style history (without system messages) to Anthropic messages.

    Assistant ``tool_calls`` become ``tool_use`` blocks; consecutive ``tool`` messages become
    one user message of ``tool_result`` blocks, so every call keeps its result next to it.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": str(m.get("content"))}
            if out and out[-1]["role"] == "user" and all(b.get("type") == "tool_result" for b in out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        content = m.get("content")
        blocks: list[dict[str, Any]] = []
        if isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks.extend(dict(b) for b in content if isinstance(b, Mapping))
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {})
            args = fn.get("arguments") or "{}"
            try:
                parsed = json.loads(args) if isinstance(args, str) else dict(args)
            except json.JSONDecodeError:
                parsed = {"_raw": args}
            blocks.append({"type": "tool_use", "id": call.get("id", ""), "name": fn.get("name", ""), "input": parsed})
        out.append({"role": "assistant" if role == "assistant" else "user", "content": blocks})
    return out


def build_request(
    fmt: Format,
    *,
    model: str,
    system: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolDef],
    max_tokens: int = 1024,
) -> dict[str, Any]:
    """Build the request body for one model call."""
    if fmt == "anthropic":
        req: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": to_anthropic_messages(messages),
        }
        if tools:
            req["tools"] = [t.render(fmt) for t in tools]
        return req
    history = [dict(m) for m in messages if m.get("role") != "system"]
    req = {"model": model, "messages": [{"role": "system", "content": system}, *history]}
    if tools:
        req["tools"] = [t.render(fmt) for t in tools]
    return req


def parse_response(fmt: Format, body: Mapping[str, Any]) -> ModelTurn:
    """Read the text and tool calls of a response body.

    Raises:
        ModelError: the body has neither the OpenAI nor the Anthropic shape.
    """
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
