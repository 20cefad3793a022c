"""Build the turn's query text from a conversation (the latest user message's text parts), and split a
request that asks for several things into its intents.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from shortlist._types import Query

__all__ = [
    "QUOTED_PLACEHOLDER",
    "last_user_text",
    "message_text",
    "query_text",
    "quoted_kind",
    "split_intents",
    "without_quoted",
]

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
# What a quote says of its kind, in the order tried: its words are payload, its kind is evidence of
# the request ("draft 'project_summary.txt'" asks for a file, not for a summary).
_QUOTE_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$"), "an email address"),
    (re.compile(r"^(?:https?://|www\.)\S+$", re.IGNORECASE), "a web address"),
    # a calendar date (ISO, optionally with its time, or d/m/y; before paths: 12/31/2024 is no folder)
    (re.compile(r"^\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?$|^\d{1,2}/\d{1,2}/\d{2,4}$"), "a date"),
    (re.compile(r"^\S*[\w-]\.[A-Za-z][A-Za-z0-9]{0,4}$"), "a file"),  # a name with an extension (a path too)
    (re.compile(r"^(?:~?/|\.\.?/)[\w.\-/]*$|^[\w.\-]+(?:/[\w.\-]+)*/$|^[\w.\-]+(?:/[\w.\-]+){2,}$"), "a folder"),
    # digits that say what they are, a time of day, a phone number (3-3-4 digit groups, a country code
    # allowed, or + and 8-15 digits; not 3-4, which is as often a range): a payload's kind points at
    # the tools that take one (an event's start, an SMS's recipient)
    (re.compile(r"^\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\.?)?$"), "a time"),
    (re.compile(r"^\+?(?:\d{1,3}[\s.-])?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]\d{4}$|^\+\d{8,15}$"), "a phone number"),
    (re.compile(r"^(?=.*\d)[\d\s.,:$\u20ac\u00a3%+\-/]+$"), "a number"),
)


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


def quoted_kind(span: str) -> str:
    """What a quoted span (its quotes included or not) is replaced by: its kind when its text shows
    one (``a file``, ``a folder``, ``an email address``, ``a web address``, ``a date``, ``a time``,
    ``a phone number``, ``a number``), else
    :data:`QUOTED_PLACEHOLDER`."""
    inner = span.strip().strip("'\"\u2018\u2019\u201c\u201d").strip()
    return next((kind for pattern, kind in _QUOTE_KINDS if pattern.match(inner)), QUOTED_PLACEHOLDER)


def without_quoted(text: str, *, min_words: int = 2) -> str:
    """``text`` with each quoted span replaced by its kind (:func:`quoted_kind`; ``text`` itself when
    fewer than ``min_words`` of its own words remain).

    A request quotes its payload: the message to send, a ticket's title and description, a file's
    name, an id ("post 'Meeting moved to 3pm, see you all' to my feed", "open 'final_report.pdf'").
    Those words say what the tool will carry, not which tool is meant, and a long quote outweighs
    the few words of the request itself in a ranking ("file a support ticket saying 'I log out and
    back in but my account does not sync'" is not a request to log out). The replacement keeps the
    request's grammar ("the distance between something and something") and what kind of thing the
    payload is ("open a file", "send something to an email address"): the kind is evidence of the
    tool, where the words of a file's name pull tools about its subject.
    """
    if len(_QUOTED.sub(" ", text).split()) < min_words:
        return text
    return _SPACES.sub(" ", _QUOTED.sub(lambda m: f" {quoted_kind(m.group(0))} ", text)).strip()


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
