"""Build model requests in OpenAI chat-completions, OpenAI Responses or Anthropic messages format, and read answers.

The runtime keeps its history as OpenAI-style messages; :func:`build_request` renders the
system prompt, the history and this turn's tools in the requested format, and
:func:`parse_response` reads text and tool calls back from each format.

**Deferred loading** (shapes from the official SDKs' type files, ``anthropic`` 2.x
``types/tool_param.py``, ``tool_result_block_param.py``, ``tool_reference_block_param.py``):
an Anthropic request lists the tools block as usual and every other catalog tool with
``defer_loading: true`` (the model does not see those definitions until a ``tool_reference``
names them). The runtime's ``find_tools`` is an ordinary client tool; its ``tool_result``
carries one ``{"type": "tool_reference", "tool_name": ...}`` block per found tool, which the
API expands into the definition, in the history, after the cached prefix. These fields are in
the GA Messages API types (``client.messages.create``); no ``anthropic-beta`` flag is needed
(:data:`ANTHROPIC_BETAS` is empty and recorded on the request only when a future flag is).

**Tool changes that never touch the cached prefix** (:data:`ToolLoading`, per format):

* ``anthropic``, ``native``: ``defer_loading`` + ``tool_reference`` (above).
* ``anthropic``, ``addition`` (opt-in; beta ``mid-conversation-tool-changes-2026-07-01``, on the
  models that support it): the ``tools`` array is the same as under ``native`` (deferred tools
  with ``defer_loading: true``), the ``find_tools`` result is a short text, and right after the
  user message that carries it a mid-conversation system message adds each found tool with a
  ``{"type": "tool_addition", "tool": {"type": "tool_reference", "name": ...}}`` block (shapes
  from ``anthropic`` 2.15 ``types/beta/beta_system_message_param.py``,
  ``beta_request_tool_addition_block_param.py``). The request carries ``betas`` (sent as the
  ``anthropic-beta`` header by :class:`~shortlist.runtime._model.AnthropicMessagesModel` and by the
  SDK's ``client.beta.messages.create``). The API is stateless: the additions are re-sent with
  the history on every later request, after the cached prefix.
* ``openai-responses`` (the Responses API, ``POST /responses``): the tools block as flat
  function tools, ``find_tools`` as a client-executed ``{"type": "tool_search", "execution":
  "client"}`` and every other catalog tool with ``defer_loading: true``, grouped in a
  ``namespace`` per server or suite (:func:`shortlist._types.candidate_group`; ungrouped tools
  stay flat). The model emits a ``tool_search_call``; the runtime answers with a
  ``tool_search_output`` carrying the found definitions, which the API injects at the end of the
  context (shapes from ``openai`` 3.57 ``types/responses/tool_search_tool_param.py``,
  ``namespace_tool_param.py``, ``response_input_item_param.py`` ``ToolSearchCall``,
  ``response_tool_search_output_item_param_param.py``). ``prompt_cache_key`` (one per
  conversation) keeps the conversation's requests on one cache.
* ``openai`` (chat completions, any OpenAI-compatible endpoint), ``native``: a tool must be in
  the ``tools`` array to be called, so found tools are added there (and a deferred
  ``find_tools`` result carries the definitions as JSON text, see :func:`search_result_content`).
* any format, ``bridge``: a fixed surface, ``find_tools`` plus ``call_tool(name, arguments)``
  (:mod:`shortlist.offer._bridge`): the search result carries the found definitions and the model
  calls them through the bridge, so the ``tools`` array never changes.

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
from typing import Any, Literal, get_args

from shortlist.offer._bridge import CALL_TOOL_DESCRIPTION, CALL_TOOL_NAME, CALL_TOOL_PARAMETERS
from shortlist.offer._search import SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_NAME, SEARCH_TOOL_PARAMETERS
from shortlist.runtime._answers import ModelTurn, ToolCall, parse_response

__all__ = [
    "ANTHROPIC_BETAS",
    "CALL_TOOL",
    "EPHEMERAL",
    "FIND_TOOLS",
    "FORMATS",
    "MAX_CACHE_BREAKPOINTS",
    "TOOL_ADDITION_BETA",
    "TOOL_LOADINGS",
    "Format",
    "ModelTurn",
    "SearchResultMode",
    "ToolCall",
    "ToolDef",
    "ToolLoading",
    "build_request",
    "namespace_name",
    "parse_response",
    "responses_tools",
    "search_result_content",
    "to_anthropic_messages",
]

Format = Literal["openai", "anthropic", "openai-responses"]
#: Every request format, in the order the docs list them.
FORMATS: tuple[str, ...] = get_args(Format)
#: How a tool a search (or a prefetch) found reaches the model: ``native`` (the format's own
#: way: Anthropic ``tool_reference``, Responses ``tool_search_output``, chat completions' tools
#: array), ``addition`` (Anthropic ``tool_addition``, beta) or ``bridge`` (``call_tool``).
ToolLoading = Literal["native", "addition", "bridge"]
TOOL_LOADINGS: tuple[str, ...] = get_args(ToolLoading)
#: The ``anthropic-beta`` flag of mid-conversation ``tool_addition`` / ``tool_removal`` blocks.
TOOL_ADDITION_BETA = "mid-conversation-tool-changes-2026-07-01"

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
        """The tool definition in ``fmt`` (``defer_loading`` when asked and the format defers;
        Anthropic: ``cache_control`` when asked)."""
        out: dict[str, Any]
        if fmt == "openai-responses":
            out = {
                "type": "function",
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
                "strict": False,
            }
            if defer:
                out["defer_loading"] = True
            return out
        if fmt == "anthropic":
            out = {
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
#: The bridge of the fixed surface: calls a tool ``find_tools`` found (:mod:`shortlist.offer._bridge`).
CALL_TOOL = ToolDef(CALL_TOOL_NAME, CALL_TOOL_DESCRIPTION, CALL_TOOL_PARAMETERS)


SearchResultMode = Literal["references", "definitions", "names", "additions", "tools"]


def namespace_name(group: str) -> str:
    """A :func:`~shortlist._types.candidate_group` as a Responses namespace name (``[A-Za-z0-9_-]``, 64 at most)."""
    label = group.split(":", 1)[-1]
    return ("".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in label) or "tools")[:64]


def responses_tools(
    defs: Sequence[ToolDef], groups: Mapping[str, str] | None = None, *, defer: bool = False
) -> list[dict[str, Any]]:
    """``defs`` as Responses tools: a ``namespace`` per group (in the order of its first tool), flat functions else.

    Args:
        defs: the tools, in order.
        groups: tool name -> namespace name (tools without one stay flat functions).
        defer: mark every function ``defer_loading: true`` (the request's deferred catalog).
    """
    out: list[dict[str, Any]] = []
    spaces: dict[str, dict[str, Any]] = {}
    for d in defs:
        space = (groups or {}).get(d.name)
        fn = d.render("openai-responses", defer=defer)
        if space is None:
            out.append(fn)
            continue
        if space not in spaces:
            spaces[space] = {"type": "namespace", "name": space, "description": "", "tools": []}
            out.append(spaces[space])
        spaces[space]["tools"].append(fn)
    for space, entry in spaces.items():
        names = [t["name"] for t in entry["tools"]]
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        entry["description"] = f"Tools of {space}: {shown}"
    return out


def search_result_content(
    fmt: Format,
    found: Sequence[ToolDef],
    *,
    mode: SearchResultMode,
    groups: Mapping[str, str] | None = None,
) -> str | list[dict[str, Any]]:
    """The content of a ``find_tools`` result.

    Args:
        fmt: the request format.
        found: the tools the search made callable.
        mode: ``references`` (Anthropic deferred loading: one ``tool_reference`` block per
            tool; the API expands each into its deferred definition), ``additions`` (Anthropic
            ``tool_addition``: a text naming the tools, then one ``tool_addition`` block per
            tool, which the request renders as a system message after the result), ``tools``
            (Responses: the found definitions as the ``tool_search_output``'s tools, in their
            namespaces), ``definitions`` (a JSON text carrying the definitions: a model without
            deferred loading reads them here, and calls them through the bridge or the runtime
            adds them to the next request), or ``names`` (a JSON text naming them: their
            definitions join the next request's tools array).
        groups: ``tools`` only: tool name -> namespace name.
    """
    if mode == "tools":
        return responses_tools(found, groups)
    if not found:
        return json.dumps({"found": [], "note": "no matching tool; answer without one or ask the user"})
    if mode == "references" and fmt == "anthropic":
        return [{"type": "tool_reference", "tool_name": d.name} for d in found]
    if mode == "additions":
        note = json.dumps({"found": [d.name for d in found], "note": "these tools are callable now"})
        return [
            {"type": "text", "text": note},
            *({"type": "tool_addition", "tool": {"type": "tool_reference", "name": d.name}} for d in found),
        ]
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
    tool message whose content is a list of blocks (``tool_reference``) keeps them; its
    ``tool_addition`` blocks leave the result and follow the user message of results as one
    mid-conversation system message (the ``tool_addition`` loading).
    """
    out: list[dict[str, Any]] = []
    additions: list[dict[str, Any]] = []

    def flush() -> None:
        if additions:
            out.append({"role": "system", "content": list(additions)})
            additions.clear()

    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            merge = (
                bool(out)
                and out[-1]["role"] == "user"
                and all(b.get("type") == "tool_result" for b in out[-1]["content"])
            )
            if not merge:
                flush()
            result = _tool_result_content(m.get("content"))
            if isinstance(result, list) and any(b.get("type") == "tool_addition" for b in result):
                additions.extend(b for b in result if b.get("type") == "tool_addition")
                result = [b for b in result if b.get("type") != "tool_addition"]
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""), "content": result}
            if merge:
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        flush()
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
    flush()
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
    loading: ToolLoading = "native",
    groups: Mapping[str, str] | None = None,
    prompt_cache_key: str | None = None,
) -> dict[str, Any]:
    """Build the request body for one model call.

    Args:
        fmt: ``"openai"`` (chat completions), ``"anthropic"`` (messages) or
            ``"openai-responses"`` (the Responses API).
        model: the model name.
        system: the rendered system prompt.
        messages: the OpenAI-style history.
        tools: the tools whose definitions are in the prompt (the tools block first).
        deferred: Anthropic and Responses: tools sent with ``defer_loading: true`` (loaded
            through a ``tool_reference`` / ``tool_addition`` / ``tool_search_output``); ignored
            for chat completions, which cannot defer.
        cache: Anthropic only: place the cache breakpoints (see the module docs).
        max_tokens: Anthropic's required output cap.
        loading: how found tools reach the model (:data:`ToolLoading`): ``addition`` adds the
            beta flag to an Anthropic request; a Responses request offers ``find_tools`` as a
            client ``tool_search`` when it defers tools and not under ``bridge``, else as a plain
            function.
        groups: Responses only: tool name -> namespace of the deferred tools.
        prompt_cache_key: Responses only: the conversation's cache key.
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
        betas = [*ANTHROPIC_BETAS, *((TOOL_ADDITION_BETA,) if loading == "addition" else ())]
        if betas:
            req["betas"] = betas
        return req
    history = [dict(m) for m in messages if m.get("role") != "system"]
    if fmt == "openai-responses":
        from shortlist.runtime._responses import responses_input

        search = loading != "bridge" and bool(deferred)  # a client tool_search over the deferred catalog
        out: list[dict[str, Any]] = []
        for t in tools:
            if search and t.name == SEARCH_TOOL_NAME:
                out.append(
                    {
                        "type": "tool_search",
                        "execution": "client",
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    }
                )
            else:
                out.append(t.render(fmt))
        if search:
            out += responses_tools(deferred, groups, defer=True)
        req = {"model": model}
        if out:
            req["tools"] = out
        system_item = {"type": "message", "role": "system", "content": system}
        req["input"] = [system_item, *responses_input(history, client_search=search)]
        if prompt_cache_key:
            req["prompt_cache_key"] = prompt_cache_key
        return req
    req = {"model": model}
    if tools:
        req["tools"] = [t.render(fmt) for t in tools]
    req["messages"] = [{"role": "system", "content": system}, *history]
    return req
