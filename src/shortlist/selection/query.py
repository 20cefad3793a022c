"""Build the turn's query text from a conversation: the latest user message's text parts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["last_user_text", "message_text"]


def message_text(message: Mapping[str, Any] | Any) -> str:
    """Return the text of one message (OpenAI or Anthropic style), text parts joined by spaces.

    Non-text parts (images, tool results) are ignored.
    """
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    parts: list[str] = []
    if isinstance(content, Sequence):
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif (
                isinstance(part, Mapping)
                and part.get("type") in ("text", "input_text")
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
    return " ".join(p.strip() for p in parts if p.strip())


def last_user_text(messages: Sequence[Mapping[str, Any] | Any]) -> str:
    """Return the text of the last message whose role is ``user`` ("" when there is none)."""
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)
        if role == "user":
            return message_text(message)
    return ""
