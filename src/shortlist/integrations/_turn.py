"""What an integration sees of a turn and decides for it, framework-free: a tool as a candidate, the
names a ``find_tools`` result carries, the conversation's turn log (:class:`TurnLog`), and the
tools one model call is offered (:class:`ToolChoice`). Re-exported by :mod:`shortlist.integrations._core`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shortlist._tokens import estimate_tokens
from shortlist._types import Candidate, TurnSelection

__all__ = ["Conversation", "ToolChoice", "TurnLog", "found_in", "tool_candidate"]


def tool_candidate(name: str, description: str | None, parameters: Mapping[str, Any] | None = None) -> Candidate:
    """The candidate a selector sees for one framework tool (``id == name``)."""
    return Candidate(name, name, description or "", parameters=dict(parameters) if parameters else None)


def found_in(content: Any) -> tuple[str, ...]:
    """The tool names a ``find_tools`` result (as :meth:`ToolNarrower.search_result` wrote it) names.

    Anything else (an error message, a user's own JSON) names nothing.
    """
    if isinstance(content, (bytes, bytearray)):
        content = content.decode("utf-8", "replace")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            return ()
    found = content.get("found") if isinstance(content, Mapping) else None
    if not isinstance(found, list):
        return ()
    return tuple(item["name"] for item in found if isinstance(item, Mapping) and isinstance(item.get("name"), str))


@dataclass
class TurnLog:
    """What an adapter sees of a conversation, in order: its user messages, the size of the rest, found tools.

    Build it by walking the framework's messages: :meth:`system` / :meth:`other` for any text
    that is not a user message, :meth:`user` for each user message, :meth:`found_tools` for each
    ``find_tools`` result (:func:`found_in`).

    Attributes:
        turns: one ``(user message, prefix tokens before it, tools found before it)`` per user
            message, oldest first (the prefix is an estimate: characters / 4).
        found: every tool name ``find_tools`` results named, oldest first.
    """

    turns: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    chars: int = 0

    def system(self, text: str) -> TurnLog:
        """A system prompt (or instructions): part of the prefix behind the tools."""
        self.chars += len(text)
        return self

    def other(self, text: str | int) -> TurnLog:
        """Any other message (an answer, a tool call or result): its text or its length."""
        self.chars += text if isinstance(text, int) else len(text)
        return self

    def user(self, text: str) -> TurnLog:
        """A user message: a new turn."""
        self.turns.append((text, estimate_tokens(self.chars), tuple(self.found)))
        self.chars += len(text)
        return self

    def found_tools(self, names: Iterable[str]) -> TurnLog:
        """The names one ``find_tools`` result made available."""
        self.found.extend(names)
        return self

    @property
    def latest(self) -> str:
        """The latest user message ("" before the first)."""
        return self.turns[-1][0] if self.turns else ""

    @classmethod
    def of(cls, query: str, found: Iterable[str] = ()) -> TurnLog:
        """A one-turn conversation (a query with no history)."""
        return cls().user(query).found_tools(found)


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tools one model call is offered.

    Attributes:
        names: the tool names to give the framework, in the framework's own order (narrowed
            ones, pins and the tools found by earlier searches).
        selection: the :class:`~shortlist.selection.TurnSelection` that decided the tools
            (``per_turn``: this turn's; ``stable``: the first turn's, or the latest that changed
            them; ``fallback`` says why every tool is offered).
        found: the names earlier ``find_tools`` results made available.
        search_tool: whether the ``find_tools`` tool is offered too (some tool is left out).
    """

    names: tuple[str, ...]
    selection: TurnSelection
    found: tuple[str, ...] = ()
    search_tool: bool = False

    @property
    def fallback(self) -> str | None:
        """None when narrowed, else why every tool is offered (see ``FALLBACK_REASONS``)."""
        return self.selection.fallback


#: The turn log's name before 0.1.0's curation (it clashed with the runtime's ``Conversation``); it resolves
#: from ``shortlist.integrations`` with a DeprecationWarning until 0.2 removes it.
Conversation = TurnLog
