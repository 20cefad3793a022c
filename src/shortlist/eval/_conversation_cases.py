"""Conversation datasets: a conversation's turns and their reference calls, read from ``conversations.jsonl``.

One conversation a line, ``{"cid", "turns": [{"user", "calls": [{"name", "arguments"}]}]}``; a turn's
gold tools are the distinct names of its calls. Re-exported by :mod:`shortlist.eval._conversations`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shortlist.errors import CatalogError

__all__ = ["ConversationCase", "ConversationTurn", "is_conversation_dataset", "load_conversations"]


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One turn: the user's message and the calls that answer it (the reference)."""

    user: str
    calls: tuple[Mapping[str, Any], ...] = ()

    @property
    def gold(self) -> frozenset[str]:
        """The distinct tools the turn needs."""
        return frozenset(str(c["name"]) for c in self.calls)

    @property
    def tools(self) -> tuple[str, ...]:
        """The distinct tools the turn needs, in the order of their first call."""
        return tuple(dict.fromkeys(str(c["name"]) for c in self.calls))


@dataclass(frozen=True, slots=True)
class ConversationCase:
    """One conversation of the dataset."""

    cid: str
    turns: tuple[ConversationTurn, ...]


def is_conversation_dataset(directory: str | Path) -> bool:
    """True when ``directory`` holds a conversation dataset (``conversations.jsonl``)."""
    return (Path(directory) / "conversations.jsonl").is_file()


def load_conversations(path: str | Path, tool_ids: Sequence[str] | None = None) -> tuple[ConversationCase, ...]:
    """Read ``conversations.jsonl``.

    Raises:
        CatalogError: unreadable, malformed, or a call naming a tool missing from ``tool_ids``.
    """
    known = set(tool_ids) if tool_ids is not None else None
    out: list[ConversationCase] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read conversations: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
            turns = tuple(
                ConversationTurn(str(t["user"]), tuple(dict(c) for c in t.get("calls") or ())) for t in obj["turns"]
            )
            case = ConversationCase(str(obj.get("cid", n)), turns)
        except (ValueError, KeyError, TypeError) as exc:
            raise CatalogError(f"{where}: not a conversation ({type(exc).__name__}: {exc})") from None
        if known is not None:
            missing = sorted({g for t in turns for g in t.gold} - known)
            if missing:
                raise CatalogError(f"{where}: calls tools that tools.jsonl does not define: {', '.join(missing)}")
        out.append(case)
    if not out:
        raise CatalogError(f"{path}: no conversations")
    return tuple(out)
