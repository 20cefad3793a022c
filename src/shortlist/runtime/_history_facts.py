"""What a reduction removed, kept as facts: the statements of the history's messages, and the
fact sheet re-rendered at the start of the history.

A message states its text parts, by role (a tool call's arguments are not counted). The
statements a reduction removed (context injected by retrieval, ``find_tools`` results, cleared
results and the old sheet aside) go on the :class:`~shortlist.reduction._facts.FactSheet`, which
becomes the first part of the history's first user message. Used by
:class:`shortlist.runtime._context.HistoryWindow`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shortlist.reduction._facts import FactSheet

__all__ = ["CLEARED_TOOL_RESULT", "keep_facts", "text_parts"]

#: What a cleared tool result says instead of its content (its call id stays, so the pair is valid).
CLEARED_TOOL_RESULT = (
    "[cleared: an earlier tool result was removed to keep the context small; call the tool again if needed]"
)


def text_parts(content: Any) -> list[str]:
    """The texts of a message's content parts (none for a plain string)."""
    if not isinstance(content, list):
        return []
    return [p["text"] for p in content if isinstance(p, Mapping) and p.get("type") == "text" and "text" in p]


def _said(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(role, text)`` of what a message states in words (a tool call's arguments are not counted)."""
    role = str(message.get("role", ""))
    content = message.get("content")
    texts = [content] if isinstance(content, str) else text_parts(content)
    return [(role, t) for t in texts if t]


def _without_sheet(message: dict[str, Any], header: str) -> dict[str, Any] | None:
    """``message`` without a fact-sheet part (None when the sheet was all of it)."""
    if message.get("role") != "user":
        return message
    content = message.get("content")
    if isinstance(content, str):
        return None if content.startswith(header) else message
    if not isinstance(content, list):
        return message
    rest = [
        p
        for p in content
        if not (isinstance(p, Mapping) and p.get("type") == "text" and str(p.get("text", "")).startswith(header))
    ]
    if len(rest) == len(content):
        return message
    return {**message, "content": rest} if rest else None


def keep_facts(
    facts: FactSheet,
    before: Sequence[Mapping[str, Any]],
    messages: Sequence[dict[str, Any]],
    injected: Collection[str],
    room: Callable[[list[dict[str, Any]]], int],
) -> list[dict[str, Any]]:
    """Put what ``before`` stated and ``messages`` no longer state on ``facts``; return ``messages`` with
    the sheet re-rendered at their start.

    Args:
        facts: the history's fact sheet.
        before: the history before the reduction.
        messages: the reduced history.
        injected: the injected context parts' texts (they come back by retrieval, not as facts).
        room: the room the sheet has beside the messages without it (tokens or characters).
    """
    from shortlist.reduction._facts import FACTS_HEADER

    remaining: dict[tuple[str, str], int] = {}
    for message in messages:
        for said in _said(message):
            remaining[said] = remaining.get(said, 0) + 1
    from shortlist.offer._search import SEARCH_TOOL_NAME

    searches = {  # a find_tools result lists definitions, not facts of the conversation
        str(c.get("id"))
        for m in before
        for c in m.get("tool_calls") or ()
        if isinstance(c, Mapping) and (c.get("function") or {}).get("name") == SEARCH_TOOL_NAME
    }
    lost: list[tuple[str, str]] = []
    for old in before:
        if old.get("role") == "tool" and str(old.get("tool_call_id")) in searches:
            continue
        for role, text in _said(old):
            if text in injected or text.startswith(FACTS_HEADER) or text == CLEARED_TOOL_RESULT:
                continue  # context comes back by retrieval; the old sheet is re-rendered below
            if remaining.get((role, text), 0) > 0:
                remaining[(role, text)] -= 1
            else:
                lost.append((role, text))
    facts.add(lost)
    out = [m for m in (_without_sheet(m, FACTS_HEADER) for m in messages) if m is not None]
    space = room(out) - facts.count(" ")  # a little for the part's framing
    facts.fit(min(facts.max_size, max(0, space)))
    sheet = facts.render()
    if sheet:
        part = {"type": "text", "text": sheet}
        first = out[0] if out else None
        if first is not None and first.get("role") == "user":
            content = first.get("content")
            rest = (
                list(content) if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
            )
            out[0] = {**first, "content": [part, *rest]}
        else:
            out.insert(0, {"role": "user", "content": [part]})
    return out
