"""The replaying model of the runtime benches: what it answers, and which host tools it can call.

``bench_prefix.py`` and ``bench_long_sessions.py`` drive ``Conversation`` with a model that
replays a script; both answer in each request format the same way (a text, or one call of a host
tool, through ``call_tool`` when chat completions offer the bridge) and find the callable tools
the same way (in the tools array, loaded by Anthropic ``tool_reference``, the Responses API's
``tool_search_output`` or the bridge's ``find_tools`` results).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["answer", "callable_tools"]


def answer(
    fmt: str,
    text: str,
    call: tuple[str, str] | None = None,
    request: Mapping[str, Any] | None = None,
    args: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The model's answer in ``fmt``: ``text``, or a call ``(tool, call id)`` with ``args`` (``{"id": "42"}``)."""
    args = dict(args) if args is not None else {"id": "42"}
    if fmt == "openai-responses":
        if call is not None:
            item = {"type": "function_call", "call_id": call[1], "name": call[0], "arguments": json.dumps(args)}
            return {"status": "completed", "output": [item]}
        text_item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        return {"status": "completed", "output": [text_item]}
    bridged = request is not None and any(
        t.get("function", {}).get("name") == "call_tool" for t in request.get("tools", [])
    )
    if fmt == "anthropic":
        if call is not None:
            return {"content": [{"type": "tool_use", "id": call[1], "name": call[0], "input": args}]}
        return {"content": [{"type": "text", "text": text}]}
    if call is not None:
        name, sent = call[0], args
        if bridged:  # the fixed surface: every call goes through call_tool
            name, sent = "call_tool", {"name": name, "arguments": args}
        fn = {"name": name, "arguments": json.dumps(sent)}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call[1], "type": "function", "function": fn}],
        }
    return {"role": "assistant", "content": text}


def callable_tools(request: Mapping[str, Any], fmt: str) -> list[str]:
    """Host tools the model can call: in the prompt, or (Anthropic) loaded by a ``tool_reference``."""
    if fmt == "anthropic":
        names = [t["name"] for t in request.get("tools", []) if not t.get("defer_loading")]
        names += [
            r["tool_name"]
            for m in request["messages"]
            for b in m["content"]
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
            for r in b["content"]
            if r.get("type") == "tool_reference"
        ]
    elif fmt == "openai-responses":
        names = [
            t["name"] for t in request.get("tools", []) if t.get("type") == "function" and not t.get("defer_loading")
        ]
        names += [
            t["name"]
            for item in request["input"]
            if item.get("type") == "tool_search_output"
            for group in item["tools"]
            for t in group.get("tools", [group])
        ]
    else:
        names = [t["function"]["name"] for t in request.get("tools", [])]
        if "call_tool" in names:  # the bridge: what find_tools results carried
            for m in request["messages"]:
                if m["role"] == "tool" and isinstance(m.get("content"), str) and m["content"].startswith('{"found"'):
                    names += [d["name"] for d in json.loads(m["content"])["found"] if isinstance(d, dict)]
    skip = ("memory__", "skill__", "find_tools", "call_tool")
    return [n for n in dict.fromkeys(names) if not n.startswith(skip)]
