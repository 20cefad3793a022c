"""Adapters between host message formats (OpenAI chat, Anthropic messages) and context fragments.

An assistant message that calls tools and every result of those calls share one step, so the stage
keeps or drops them together and tool-call/result pairs stay valid after reduction. Each
fragment keeps its original message in ``meta``; converting back restores it untouched unless the
stage truncated its text (then only the content is replaced). ``check_*_tool_pairs`` report any
broken pair.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from shortlist.errors import MessageFormatError
from shortlist.reduction._fragments import ContextFragment, FragmentKind

__all__ = [
    "SUMMARY_PREFIX",
    "MessageFormatError",
    "anthropic_from_fragments",
    "anthropic_to_fragments",
    "check_anthropic_tool_pairs",
    "check_openai_tool_pairs",
    "openai_from_fragments",
    "openai_to_fragments",
]

SUMMARY_PREFIX = "Summary of earlier conversation steps:\n"
"""Prepended to a summary fragment when it becomes a message."""


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"{block.get('name', '')}({json.dumps(block.get('input', {}), ensure_ascii=False, sort_keys=True)})"
    if kind == "tool_result":
        return _content_text(block.get("content"))
    if kind == "thinking":
        return str(block.get("thinking", ""))
    if "text" in block:
        return str(block["text"])
    return f"[{kind}]"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_block_text(b) for b in content) if t)
    raise MessageFormatError(f"message content must be a string, a list of parts or null, not {type(content).__name__}")


def _as_message(i: int, msg: Any) -> Mapping[str, Any]:
    if not isinstance(msg, Mapping):
        raise MessageFormatError(f"message {i} must be an object, not {type(msg).__name__}")
    if not isinstance(msg.get("role"), str):
        raise MessageFormatError(f"message {i} has no string 'role'")
    return msg


_OPENAI_KINDS: dict[str, FragmentKind] = {"system": "system", "developer": "instruction", "user": "user"}


def openai_to_fragments(messages: Sequence[Any]) -> list[ContextFragment]:
    """Convert OpenAI chat ``messages`` to fragments, one per message.

    An assistant message with ``tool_calls`` (or a legacy ``function_call``) opens a step that its
    ``tool``/``function`` result messages join.

    Args:
        messages: The chat messages, oldest first.

    Returns:
        The fragments, ids ``m0``, ``m1``, ...

    Raises:
        MessageFormatError: when a message is not an object, has no role, an unknown role, or
            content of the wrong type.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise MessageFormatError("messages must be a JSON array of message objects")
    frags: list[ContextFragment] = []
    call_steps: dict[str, str] = {}
    last_function_step: str | None = None
    for i, raw in enumerate(messages):
        msg = _as_message(i, raw)
        role = msg["role"]
        text = _content_text(msg.get("content"))
        step: str | None = None
        kind: FragmentKind
        if role in _OPENAI_KINDS:
            kind = _OPENAI_KINDS[role]
        elif role == "assistant":
            calls = msg.get("tool_calls") or []
            if not isinstance(calls, list):
                raise MessageFormatError(f"message {i}: tool_calls must be a list")
            function_call = msg.get("function_call")
            if calls or function_call:
                kind, step = "tool_call", f"s{i}"
                parts = [text] if text else []
                for call in calls:
                    if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
                        raise MessageFormatError(f"message {i}: every tool call needs a string id")
                    call_steps[call["id"]] = step
                    fn = call.get("function") or {}
                    parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
                if isinstance(function_call, Mapping):
                    last_function_step = step
                    parts.append(f"{function_call.get('name', '')}({function_call.get('arguments', '')})")
                text = "\n".join(parts)
            else:
                kind = "assistant"
        elif role == "tool":
            kind = "tool_result"
            step = call_steps.get(str(msg.get("tool_call_id")))
        elif role == "function":
            kind, step = "tool_result", last_function_step
        else:
            raise MessageFormatError(f"message {i}: unknown role {role!r}")
        frags.append(
            ContextFragment(
                id=f"m{i}",
                step_id=step,
                kind=kind,
                text=text,
                meta={"format": "openai", "message": msg, "text": text},
            )
        )
    return frags


_ROLE_OF_KIND = {
    "system": "system",
    "instruction": "developer",
    "user": "user",
    "assistant": "assistant",
    "memory": "system",
    "summary": "system",
}


def openai_from_fragments(fragments: Sequence[ContextFragment]) -> list[dict[str, Any]]:
    """Convert (reduced) fragments back to OpenAI chat messages.

    Fragments from :func:`openai_to_fragments` give back their original message, with ``content``
    replaced by the fragment's text if the stage truncated it. Summaries become ``system``
    messages prefixed with :data:`SUMMARY_PREFIX`; other fragments map by kind.

    Raises:
        MessageFormatError: for a tool call or result fragment that has no original message.
    """
    out: list[dict[str, Any]] = []
    for frag in fragments:
        original = frag.meta.get("message") if frag.meta.get("format") == "openai" else None
        if isinstance(original, Mapping):
            msg = dict(original)
            if frag.text != frag.meta.get("text"):
                msg["content"] = frag.text
            out.append(msg)
        elif frag.kind in ("tool_call", "tool_result"):
            raise MessageFormatError(f"fragment {frag.id!r} ({frag.kind}) has no original OpenAI message")
        else:
            text = SUMMARY_PREFIX + frag.text if frag.kind == "summary" else frag.text
            out.append({"role": _ROLE_OF_KIND[frag.kind], "content": text})
    return out


def check_openai_tool_pairs(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """List broken tool-call/result pairs in OpenAI chat messages (empty when all are valid).

    Every ``tool`` message must answer a call of the assistant message just before the run of
    tool messages it belongs to, and every such call must be answered.
    """
    problems: list[str] = []
    pending: set[str] = set()
    open_ids: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            tcid = msg.get("tool_call_id")
            if tcid not in open_ids:
                problems.append(f"message {i}: tool result {tcid!r} answers no preceding tool call")
            pending.discard(str(tcid))
            continue
        if pending:
            problems.append(f"message {i}: tool calls {sorted(pending)} have no result")
        calls = (msg.get("tool_calls") or []) if role == "assistant" else []
        open_ids = {c["id"] for c in calls if isinstance(c, Mapping) and "id" in c}
        pending = set(open_ids)
    if pending:
        problems.append(f"end: tool calls {sorted(pending)} have no result")
    return problems


def anthropic_to_fragments(
    messages: Sequence[Any], system: str | Sequence[Mapping[str, Any]] | None = None
) -> list[ContextFragment]:
    """Convert Anthropic ``messages`` (and the optional top-level ``system``) to fragments.

    An assistant message is one fragment (``tool_call`` when it has ``tool_use`` blocks, opening a
    step). In a user message each ``tool_result`` block is a fragment joining its call's step, and
    each run of other blocks is a ``user`` fragment of its own.

    Args:
        messages: The messages, oldest first.
        system: The request's ``system`` parameter, if any.

    Returns:
        The fragments (ids ``system``, ``m<i>`` or ``m<i>.<j>``).

    Raises:
        MessageFormatError: when a message has no ``user``/``assistant`` role or bad content.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise MessageFormatError("messages must be a JSON array of message objects")
    frags: list[ContextFragment] = []
    if system:
        text = _content_text(system if isinstance(system, str) else list(system))
        frags.append(
            ContextFragment(
                id="system", kind="system", text=text, meta={"format": "anthropic-system", "system": system}
            )
        )
    use_steps: dict[str, str] = {}
    for i, raw in enumerate(messages):
        msg = _as_message(i, raw)
        role, content = msg["role"], msg.get("content")
        if role not in ("user", "assistant"):
            raise MessageFormatError(f"message {i}: role must be 'user' or 'assistant', not {role!r}")
        if isinstance(content, str):
            frags.append(
                ContextFragment(
                    id=f"m{i}",
                    kind="user" if role == "user" else "assistant",
                    text=content,
                    meta={"format": "anthropic", "role": role, "content": content, "text": content},
                )
            )
            continue
        if isinstance(content, list):
            blocks = content
        else:
            raise MessageFormatError(f"message {i}: content must be a string or a list of blocks")
        if role == "assistant":
            uses = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
            step = f"s{i}" if uses else None
            for block in uses:
                use_steps[str(block.get("id"))] = f"s{i}"
            text = _content_text(blocks)
            frags.append(
                ContextFragment(
                    id=f"m{i}",
                    step_id=step,
                    kind="tool_call" if uses else "assistant",
                    text=text,
                    meta={"format": "anthropic", "role": role, "blocks": blocks, "text": text},
                )
            )
            continue
        group: list[tuple[int, Any]] = []
        for j, block in enumerate([*blocks, None]):
            is_result = isinstance(block, Mapping) and block.get("type") == "tool_result"
            if (is_result or block is None) and group:
                text = _content_text([b for _, b in group])
                frags.append(
                    ContextFragment(
                        id=f"m{i}.{group[0][0]}",
                        kind="user",
                        text=text,
                        meta={"format": "anthropic", "role": "user", "blocks": [b for _, b in group], "text": text},
                    )
                )
                group = []
            if block is None:
                break
            if is_result:
                text = _block_text(block)
                frags.append(
                    ContextFragment(
                        id=f"m{i}.{j}",
                        step_id=use_steps.get(str(block.get("tool_use_id"))),
                        kind="tool_result",
                        text=text,
                        meta={"format": "anthropic", "role": "user", "blocks": [block], "text": text},
                    )
                )
            else:
                group.append((j, block))
    return frags


def anthropic_from_fragments(
    fragments: Sequence[ContextFragment],
) -> tuple[str | list[Any] | None, list[dict[str, Any]]]:
    """Convert (reduced) fragments back to Anthropic ``(system, messages)``.

    Consecutive fragments of the same role merge into one message (so roles keep alternating);
    a truncated tool result gets the truncated text as its ``content``; summaries and other
    fragments without an original become user text blocks (summaries prefixed with
    :data:`SUMMARY_PREFIX`); system fragments without an original join the ``system`` text.

    Raises:
        MessageFormatError: for a tool call or result fragment that has no original blocks.
    """
    system: str | list[Any] | None = None
    extra_system: list[str] = []
    messages: list[dict[str, Any]] = []
    for frag in fragments:
        fmt = frag.meta.get("format")
        if fmt == "anthropic-system":
            system = frag.meta["system"]
            continue
        if fmt == "anthropic":
            role = str(frag.meta["role"])
            changed = frag.text != frag.meta.get("text")
            if "content" in frag.meta:  # a message whose content was a plain string
                content: str | list[Any] = frag.text
            else:
                content = [dict(b) if isinstance(b, Mapping) else b for b in frag.meta["blocks"]]
                if changed and frag.kind == "tool_result" and content:
                    content[0]["content"] = frag.text
                elif changed:
                    content = [{"type": "text", "text": frag.text}]
        elif frag.kind in ("tool_call", "tool_result"):
            raise MessageFormatError(f"fragment {frag.id!r} ({frag.kind}) has no original Anthropic blocks")
        elif frag.kind in ("system", "instruction"):
            extra_system.append(frag.text)
            continue
        else:
            role = "assistant" if frag.kind == "assistant" else "user"
            text = SUMMARY_PREFIX + frag.text if frag.kind == "summary" else frag.text
            content = [{"type": "text", "text": text}]
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] = _as_blocks(messages[-1]["content"]) + _as_blocks(content)
        else:
            messages.append({"role": role, "content": content})
    if extra_system:
        joined = "\n\n".join(extra_system)
        if system is None:
            system = joined
        elif isinstance(system, str):
            system = system + "\n\n" + joined
        else:
            system = [*system, {"type": "text", "text": joined}]
    return system, messages


def _as_blocks(content: str | list[Any]) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def check_anthropic_tool_pairs(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """List broken tool_use/tool_result pairs in Anthropic messages (empty when all are valid).

    Every ``tool_result`` must answer a ``tool_use`` of the message just before it, and every
    ``tool_use`` must be answered in the next message.
    """
    problems: list[str] = []
    previous_uses: set[str] = set()
    for i, msg in enumerate(messages):
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        results = {
            str(b.get("tool_use_id")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"
        }
        for rid in sorted(results - previous_uses):
            problems.append(f"message {i}: tool_result {rid!r} answers no tool_use of the previous message")
        for uid in sorted(previous_uses - results):
            problems.append(f"message {i}: tool_use {uid!r} of the previous message has no result")
        previous_uses = {str(b.get("id")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"}
    for uid in sorted(previous_uses):
        problems.append(f"end: tool_use {uid!r} has no result")
    return problems
