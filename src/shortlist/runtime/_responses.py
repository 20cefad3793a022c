"""Chat completions ↔ the OpenAI Responses API, for :class:`~shortlist.runtime._model.OpenAIResponsesModel`.

The runtime builds chat-completions requests for ``format="openai"``;
:func:`to_responses_request` turns one into a Responses request and
:func:`from_responses_answer` turns the Responses answer back into a chat completion, so the
runtime reads it as it reads any chat answer. Shapes follow the official ``openai`` SDK's
types (``types/responses/response_create_params.py``, ``easy_input_message_param.py``,
``response_function_tool_call_param.py``, ``function_tool_param.py``, ``response.py``).

**Request.** ``messages`` become ``input`` items in order: ``system``, ``developer``,
``user`` and ``assistant`` text as messages (the system prompt stays the first item, so the
cached prefix is tools then the same input as in chat completions), an assistant's
``tool_calls`` as ``function_call`` items, ``tool`` messages as ``function_call_output``
items (a list content is joined when it is text parts, else sent as JSON text). User content
parts ``text`` and ``image_url`` become ``input_text`` and ``input_image``. Function tools
become flat Responses function tools (``strict`` false unless the chat tool said otherwise).
``tool_choice``, ``max_tokens`` / ``max_completion_tokens`` (→ ``max_output_tokens``),
``reasoning_effort`` (→ ``reasoning.effort``) and the top-level fields both APIs share
(``temperature``, ``top_p``, ``parallel_tool_calls``, ``metadata``, ``store``, ``user``,
``safety_identifier``, ``service_tier``, ``prompt_cache_key``, ``prompt_cache_retention``) are
carried over. Anything else (``stream``, ``n``, ``response_format``, audio, non-function
tools, legacy ``function`` messages) is refused with a :class:`ModelError` rather than dropped.

**Answer.** ``output_text`` parts of ``message`` items are the text (a ``refusal`` part is
the text when there is no other), ``function_call`` items are the tool calls (``call_id`` is
the call's id, which the next request's ``function_call_output`` answers); ``reasoning`` and
hosted-tool items are left out. ``finish_reason`` is ``tool_calls``, ``stop``, or ``length``
/ ``content_filter`` for an incomplete response; ``usage`` maps to the chat names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from shortlist.errors import ModelError
from shortlist.offer._search import SEARCH_TOOL_NAME

__all__ = ["from_responses_answer", "responses_input", "to_responses_request"]

#: Top-level fields with the same name and meaning in both APIs.
_SHARED = (
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "metadata",
    "store",
    "user",
    "safety_identifier",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
)
_HANDLED = {"model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "reasoning_effort"}


def _text_of(parts: list[Any], where: str) -> str:
    texts = []
    for p in parts:
        if (
            isinstance(p, Mapping)
            and p.get("type") in ("text", "input_text", "output_text")
            and isinstance(p.get("text"), str)
        ):
            texts.append(p["text"])
        elif isinstance(p, Mapping) and p.get("type") == "refusal" and isinstance(p.get("refusal"), str):
            texts.append(p["refusal"])
        else:
            raise ModelError(f"{where}: only text parts can be converted, not {p!r:.80}")
    return "\n".join(texts)


def _user_content(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ModelError(f"{where}: content must be a string or a list of parts")
    out: list[dict[str, Any]] = []
    for p in content:
        kind = p.get("type") if isinstance(p, Mapping) else None
        if kind == "text" and isinstance(p.get("text"), str):
            out.append({"type": "input_text", "text": p["text"]})
        elif (
            kind == "image_url"
            and isinstance(p.get("image_url"), Mapping)
            and isinstance(p["image_url"].get("url"), str)
        ):
            out.append(
                {
                    "type": "input_image",
                    "image_url": p["image_url"]["url"],
                    "detail": p["image_url"].get("detail") or "auto",
                }
            )
        else:
            raise ModelError(
                f"{where}: content part {kind!r} cannot be converted to a Responses input (text and image_url can)"
            )
    return out


def _tool_output(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in content):
        return "\n".join(p["text"] for p in content)
    return json.dumps(content, ensure_ascii=False)


def responses_input(messages: Any, *, client_search: bool = False) -> list[dict[str, Any]]:
    """Chat-style ``messages`` as Responses ``input`` items (see the module docs).

    With ``client_search`` (the runtime's ``openai-responses`` format), a ``find_tools`` call
    is the model's client-executed ``tool_search_call`` and its result (a list of Responses
    tool definitions) the ``tool_search_output`` that answers it; a call's ``namespace`` is
    sent back on its ``function_call`` item.

    Raises:
        ModelError: a message that cannot be converted.
    """
    if not isinstance(messages, list):
        raise ModelError("a chat request needs a `messages` list")
    searches: set[str] = set()
    if client_search:
        for m in messages:
            for call in (m.get("tool_calls") or ()) if isinstance(m, Mapping) else ():
                fn = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(fn, Mapping) and fn.get("name") == SEARCH_TOOL_NAME:
                    searches.add(str(call.get("id", "")))
    return _input_items(messages, searches)


def _search_arguments(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return {"query": args}
    return args if args is not None else {}


def _input_items(messages: Any, searches: set[str] | None = None) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise ModelError("a chat request needs a `messages` list")
    searches = searches or set()
    items: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            raise ModelError(f"{where} is not an object")
        role = m.get("role")
        content = m.get("content")
        if role in ("system", "developer"):
            text = (
                content
                if isinstance(content, str)
                else _text_of(content if isinstance(content, list) else [content], where)
            )
            items.append({"type": "message", "role": role, "content": text})
        elif role == "user":
            items.append({"type": "message", "role": "user", "content": _user_content(content, where)})
        elif role == "assistant":
            said = (
                content
                if isinstance(content, str) or content is None
                else _text_of(content if isinstance(content, list) else [content], where)
            )
            if said:
                items.append({"type": "message", "role": "assistant", "content": said})
            for j, call in enumerate(m.get("tool_calls") or ()):
                fn = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                    raise ModelError(f"{where}.tool_calls[{j}] needs a function with a name")
                args = fn.get("arguments")
                call_id = str(call.get("id", ""))
                if call_id in searches:
                    items.append(
                        {
                            "type": "tool_search_call",
                            "call_id": call_id,
                            "execution": "client",
                            "arguments": _search_arguments(args),
                            "status": "completed",
                        }
                    )
                    continue
                item = {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": fn["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False),
                }
                if isinstance(call.get("namespace"), str) and call["namespace"]:
                    item["namespace"] = call["namespace"]
                items.append(item)
        elif role == "tool" and str(m.get("tool_call_id", "")) in searches:
            items.append(
                {
                    "type": "tool_search_output",
                    "call_id": str(m.get("tool_call_id", "")),
                    "execution": "client",
                    "status": "completed",
                    "tools": [dict(t) for t in content if isinstance(t, Mapping)] if isinstance(content, list) else [],
                }
            )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(m.get("tool_call_id", "")),
                    "output": _tool_output(content),
                }
            )
        else:
            raise ModelError(f"{where}: role {role!r} cannot be converted to a Responses input item")
    return items


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise ModelError("`tools` must be a list")
    out = []
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, Mapping) and t.get("type") == "function" else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise ModelError(f"tools[{i}]: only function tools can be converted to the Responses API")
        tool: dict[str, Any] = {
            "type": "function",
            "name": fn["name"],
            "parameters": dict(fn.get("parameters") or {"type": "object", "properties": {}}),
            "strict": bool(fn.get("strict", False)),
        }
        if fn.get("description") is not None:
            tool["description"] = fn["description"]
        out.append(tool)
    return out


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), Mapping) else None
        if isinstance(name, str):
            return {"type": "function", "name": name}
    raise ModelError(f"tool_choice {choice!r:.80} cannot be converted to the Responses API")


def to_responses_request(request: Mapping[str, Any], *, model: str | None = None) -> dict[str, Any]:
    """A chat-completions request as a Responses request (see the module docs for what converts).

    Args:
        request: the chat-completions request body.
        model: the model name used when the request names none.

    Raises:
        ModelError: a field, message, content part or tool the conversion does not support.
    """
    unknown = sorted(set(request) - _HANDLED - set(_SHARED))
    if unknown:
        raise ModelError(f"the Responses conversion does not support the chat request field(s) {unknown}")
    out: dict[str, Any] = {"model": request.get("model") or model}
    if not out["model"]:
        raise ModelError("a chat request needs a `model`")
    if request.get("tools"):
        out["tools"] = _tools(request["tools"])
    out["input"] = _input_items(request.get("messages"))
    if "tool_choice" in request:
        out["tool_choice"] = _tool_choice(request["tool_choice"])
    limit = request.get("max_completion_tokens", request.get("max_tokens"))
    if limit is not None:
        out["max_output_tokens"] = limit
    if request.get("reasoning_effort") is not None:
        out["reasoning"] = {"effort": request["reasoning_effort"]}
    for key in _SHARED:
        if key in request:
            out[key] = request[key]
    return out


def from_responses_answer(
    answer: Mapping[str, Any], *, where: str = "responses endpoint", client_search: bool = False
) -> dict[str, Any]:
    """A Responses answer as a chat completion (text, tool calls, finish reason, usage).

    A ``function_call``'s ``namespace`` is kept on its tool call. With ``client_search``, a
    client-executed ``tool_search_call`` is a ``find_tools`` tool call (its ``arguments`` as
    JSON text); a hosted one is left out as any hosted item is.

    Raises:
        ModelError: a failed response, or one without an ``output`` list.
    """
    if answer.get("status") == "failed":
        err = answer.get("error")
        msg = err.get("message") if isinstance(err, Mapping) else None
        raise ModelError(f"{where} answered a failed response: {msg or 'no reason given'}")
    output = answer.get("output")
    if not isinstance(output, list):
        raise ModelError(f"{where} answered without an `output` list")
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or ():
                if (
                    isinstance(part, Mapping)
                    and part.get("type") == "output_text"
                    and isinstance(part.get("text"), str)
                ):
                    texts.append(part["text"])
                elif (
                    isinstance(part, Mapping) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str)
                ):
                    refusals.append(part["refusal"])
        elif item.get("type") == "function_call":
            if not isinstance(item.get("name"), str):
                raise ModelError(f"{where} answered a function_call without a name")
            args = item.get("arguments")
            call: dict[str, Any] = {
                "id": str(item.get("call_id") or item.get("id") or ""),
                "type": "function",
                "function": {
                    "name": item["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False),
                },
            }
            if isinstance(item.get("namespace"), str) and item["namespace"]:
                call["namespace"] = item["namespace"]
            calls.append(call)
        elif client_search and item.get("type") == "tool_search_call" and item.get("execution") == "client":
            args = item.get("arguments")
            calls.append(
                {
                    "id": str(item.get("call_id") or item.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": SEARCH_TOOL_NAME,
                        "arguments": args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False),
                    },
                }
            )
    text = "".join(texts) if texts else "".join(refusals)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if refusals and not texts:
        message["refusal"] = text
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else "stop"
    if answer.get("status") == "incomplete":
        details = answer.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        finish = "content_filter" if reason == "content_filter" else "length"
    out: dict[str, Any] = {
        "id": str(answer.get("id", "")),
        "object": "chat.completion",
        "created": int(answer.get("created_at") or 0),
        "model": str(answer.get("model", "")),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }
    usage = answer.get("usage")
    if isinstance(usage, Mapping):
        prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
        out["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": int(usage.get("total_tokens") or prompt + completion),
        }
    return out
