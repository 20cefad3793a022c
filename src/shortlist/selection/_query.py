"""Build the turn's query text from a conversation (the latest user message's text parts), and split a
request that asks for several things into its intents.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from shortlist._types import Query

__all__ = ["QUOTED_PLACEHOLDER", "last_user_text", "message_text", "query_text", "split_intents", "without_quoted"]

# A sentence ends at . ? ! or ; followed by space and a capital (or a quote).
_SENTENCE = re.compile(r"(?<=[.?!;])\s+(?=[A-Z\"'])")
# Joints that start a second request inside one sentence: "and also", "as well as", ", then",
# "plus", "also", and ", and" followed by a request word (a verb or a question word).
_REQUEST_WORDS = (
    "can|could|would|will|please|tell|show|give|find|help|provide|recommend|suggest|i|what|how|where|when|"
    "which|who|is|are|do|does|get|let|make|check|search|book|send|create|translate|look|list"
)
_JOINT = re.compile(
    r",?\s+(?:and\s+also|and\s+then|as\s+well\s+as|and\s+additionally|and\s+finally|plus|also)\s+"
    rf"|,\s+and\s+(?=(?:{_REQUEST_WORDS})\b)|,\s+then\s+",
    re.IGNORECASE,
)
_STRIP = " ,.;:\"'\t\n"
# A quoted span: straight or curly, single or double quotes; a single quote opens only after a
# non-word character and closes only before one, so "I'm" and "users' files" are not quotes.
_QUOTED = re.compile(r"(?<!\w)'[^'\n]+'(?!\w)|\"[^\"\n]+\"|\u2018[^\u2019\n]+\u2019|\u201c[^\u201d\n]+\u201d")
_SPACES = re.compile(r"\s+")
#: What a dropped quote becomes: a neutral noun keeps the request's grammar ("the distance between
#: something and something") where deleting it leaves "the distance between and".
QUOTED_PLACEHOLDER = "something"


def split_intents(text: str, *, min_words: int = 3, max_parts: int = 4, sentences: bool = True) -> list[str]:
    """Split a request that asks for several things into its parts (``[]`` when it is one request).

    The text is cut at joints that start a second request ("and also", "as well as", ", then",
    ", and can you ...") and, with ``sentences`` (the default), at sentence ends too; parts
    shorter than ``min_words`` words are dropped (they are rarely a request of their own), and
    at most ``max_parts`` are kept (the first ones). A text that yields fewer than two parts is
    one request: the answer is ``[]``.

    Without ``sentences`` only the explicit joints cut: a sentence of a conversational turn is
    as often context ("I am planning a road trip.") as a request of its own, while "and also"
    says that a second request follows.

    Args:
        text: the user's message.
        min_words: the fewest words a part must have.
        max_parts: the most parts returned.
        sentences: also cut at sentence ends.
    """
    parts: list[str] = []
    for sentence in _SENTENCE.split(text.strip()) if sentences else [text.strip()]:
        parts.extend(_JOINT.split(sentence))
    kept = [p.strip(_STRIP) for p in parts]
    kept = [p for p in kept if len(p.split()) >= min_words]
    return kept[:max_parts] if len(kept) > 1 else []


def without_quoted(text: str, *, min_words: int = 2) -> str:
    """``text`` with each quoted span replaced by :data:`QUOTED_PLACEHOLDER` (``text`` itself when
    fewer than ``min_words`` of its own words remain).

    A request quotes its payload: the message to send, a ticket's title and description, a file's
    name, an id ("post 'Meeting moved to 3pm, see you all' to my feed", "open 'final_report.pdf'").
    Those words say what the tool will carry, not which tool is meant, and a long quote outweighs
    the few words of the request itself in a ranking ("file a support ticket saying 'I log out and
    back in but my account does not sync'" is not a request to log out). The placeholder keeps the
    request's grammar ("the distance between something and something").
    """
    stripped = _SPACES.sub(" ", _QUOTED.sub(f" {QUOTED_PLACEHOLDER} ", text)).strip()
    own = [w for w in stripped.split() if w.strip(_STRIP) != QUOTED_PLACEHOLDER]
    return stripped if len(own) >= min_words else text


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


def query_text(query: str | Query | Sequence[Mapping[str, Any]]) -> str:
    """The text a turn is ranked on: a :class:`Query`'s text, a string as it is, or the last user message
    of a message list (the facade, the offer session and the service read a turn through this)."""
    if isinstance(query, Query):
        return query.text
    return query if isinstance(query, str) else last_user_text(query)


def last_user_text(messages: Sequence[Mapping[str, Any] | Any]) -> str:
    """Return the text of the last message whose role is ``user`` ("" when there is none)."""
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)
        if role == "user":
            return message_text(message)
    return ""
