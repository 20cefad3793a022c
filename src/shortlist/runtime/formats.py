"""Build model requests in OpenAI chat-completions or Anthropic messages format, and read answers.

The runtime keeps its history as OpenAI-style messages; :func:`build_request` renders the
system prompt, the history and this turn's tools in the requested format, and
:func:`parse_response` reads text and tool calls back from either format.

**Deferred loading** (shapes from the official SDKs' type files, ``anthropic`` 2.x
``types/tool_param.py``, ``tool_result_block_param.py``, ``tool_reference_block_param.py``):
an Anthropic request lists the tools block as usual and every other catalog tool with
``defer_loading: true`` (the model does not see those definitions until a ``tool_reference``
names them). The runtime's ``find_tools`` is an ordinary client tool; its ``tool_result``
carries one ``{"type": "tool_reference", "tool_name": ...}`` block per found tool, which the
API expands into the definition, in the history, after the cached prefix. These fields are in
the GA Messages API types (``client.messages.create``); no ``anthropic-beta`` flag is needed
(:data:`ANTHROPIC_BETAS` is empty and recorded on the request only when a future flag is).
OpenAI chat completions can only call tools listed in the request's ``tools`` array, so
found tools are added there (and a deferred ``find_tools`` result carries the definitions as
JSON text, see :func:`search_result_content`).

**Cache breakpoints.** Anthropic caches by prefix in the order tools → system → messages;
:func:`build_request` puts ``cache_control: {"type": "ephemeral"}`` on the last tool of the
block (deferred tools come after it and are not part of the prompt), on the system prompt and
on the last block of the last message: three breakpoints, within the API's four (any
breakpoints the host put on its own messages are dropped oldest first to stay within four).
OpenAI caches exact prefixes automatically: the request keeps the order tools, system
message, history, and the runtime keeps the tools array byte-identical across turns unless the
offer changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from shortlist.offer import SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_NAME, SEARCH_TOOL_PARAMETERS
from shortlist.runtime.model import ModelError

__all__ = [
    "ANTHROPIC_BETAS",
    "EPHEMERAL",
    "FIND_TOOLS",
    "MAX_CACHE_BREAKPOINTS",
    "Format",
    "ModelTurn",
    "SearchResultMode",
    "ToolCall",
    "ToolDef",
    "build_request",
    "parse_response",
    "search_result_content",
    "to_anthropic_messages",
]

Format = Literal["openai", "anthropic"]

#: The cache breakpoint marker (Anthropic ``CacheControlEphemeralParam``).
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
#: Anthropic allows at most four ``cache_control`` breakpoints per request.
MAX_CACHE_BREAKPOINTS = 4
#: ``anthropic-beta`` flags the runtime's requests need: none (``defer_loading``,
#: ``tool_reference`` and ``cache_control`` are in the GA Messages API types).
ANTHROPIC_BETAS: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def render(self, fmt: Format, *, defer: bool = False, cache: bool = False) -> dict[str, Any]:
        """The tool definition in ``fmt`` (Anthropic: ``defer_loading`` / ``cache_control`` when asked)."""
        if fmt == "anthropic":
            out: dict[str, Any] = {
                "name": self.name,
                "description": self.description,
                "input_schema": dict(self.parameters),
            }
            if defer:
                out["defer_loading"] = True
            if cache:
                out["cache_control"] = dict(EPHEMERAL)
            return out
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    def to_json(self) -> dict[str, Any]:
        """The format-neutral definition (what a plain ``find_tools`` result carries)."""
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}


#: The runtime's tool-search tool (the in-turn escape hatch).
FIND_TOOLS = ToolDef(SEARCH_TOOL_NAME, SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_PARAMETERS)


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


SearchResultMode = Literal["references", "definitions", "names"]


def search_result_content(
    fmt: Format, found: Sequence[ToolDef], *, mode: SearchResultMode
) -> str | list[dict[str, Any]]:
    """The content of a ``find_tools`` result.

    Args:
        fmt: the request format.
        found: the tools the search made callable.
        mode: ``references`` (Anthropic deferred loading: one ``tool_reference`` block per
            tool; the API expands each into its deferred definition), ``definitions`` (a JSON
            text carrying the definitions: a model without deferred loading reads them here,
            and the runtime adds the tools to the next request), or ``names`` (a JSON text
            naming them: their definitions join the next request's tools array).
    """
    if not found:
        return json.dumps({"found": [], "note": "no matching tool; answer without one or ask the user"})
    if mode == "references" and fmt == "anthropic":
        return [{"type": "tool_reference", "tool_name": d.name} for d in found]
    if mode == "definitions":
        return json.dumps({"found": [d.to_json() for d in found], "note": "these tools are callable now"})
    return json.dumps({"found": [d.name for d in found], "note": "these tools are callable now"})


def _tool_result_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, list):
        return [dict(b) for b in content if isinstance(b, Mapping)]
    return str(content)


def to_anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Convert OpenAI-style history (without system messages) to Anthropic messages.

    Assistant ``tool_calls`` become ``tool_use`` blocks; consecutive ``tool`` messages become
    one user message of ``tool_result`` blocks, so every call keeps its result next to it. A
    tool message whose content is a list of blocks (``tool_reference``) keeps them.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m.get("tool_call_id", ""),
                "content": _tool_result_content(m.get("content")),
            }
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


def _mark_last_block(messages: list[dict[str, Any]]) -> None:
    """Put a breakpoint on the last block of the last message; keep at most the API's four."""
    if not messages or not messages[-1]["content"]:
        return
    last = messages[-1]["content"]
    last[-1] = {**last[-1], "cache_control": dict(EPHEMERAL)}
    # the tools and system breakpoints plus this one are 3; the host's own may add more
    marked = [(i, j) for i, m in enumerate(messages) for j, b in enumerate(m["content"]) if "cache_control" in b]
    excess = len(marked) + 2 - MAX_CACHE_BREAKPOINTS
    for i, j in marked[: max(0, excess)]:
        messages[i]["content"][j] = {k: v for k, v in messages[i]["content"][j].items() if k != "cache_control"}


def build_request(
    fmt: Format,
    *,
    model: str,
    system: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolDef],
    deferred: Sequence[ToolDef] = (),
    cache: bool = True,
    max_tokens: int = 1024,
) -> dict[str, Any]:
    """Build the request body for one model call.

    Args:
        fmt: ``"openai"`` (chat completions) or ``"anthropic"`` (messages).
        model: the model name.
        system: the rendered system prompt.
        messages: the OpenAI-style history.
        tools: the tools whose definitions are in the prompt (the tools block first).
        deferred: Anthropic only: tools sent with ``defer_loading: true`` (loaded through a
            ``tool_reference``); ignored for OpenAI, which cannot defer.
        cache: Anthropic only: place the cache breakpoints (see the module docs).
        max_tokens: Anthropic's required output cap.
    """
    if fmt == "anthropic":
        msgs = to_anthropic_messages(messages)
        req: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
        rendered = [t.render(fmt, cache=cache and i == len(tools) - 1) for i, t in enumerate(tools)]
        rendered += [t.render(fmt, defer=True) for t in deferred]
        if rendered:
            req["tools"] = rendered
        if cache:
            req["system"] = [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]
            _mark_last_block(msgs)
        else:
            req["system"] = system
        req["messages"] = msgs
        if ANTHROPIC_BETAS:
            req["betas"] = list(ANTHROPIC_BETAS)
        return req
    history = [dict(m) for m in messages if m.get("role") != "system"]
    req = {"model": model}
    if tools:
        req["tools"] = [t.render(fmt) for t in tools]
    req["messages"] = [{"role": "system", "content": system}, *history]
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
