"""The values the history window takes and reports: where a turn's context goes, the context a
turn injected, what one reduction did. Re-exported by :mod:`shortlist.runtime._context`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["GROUNDING_PLACEMENTS", "GroundingPlacement", "InjectedContext", "Reduction"]

#: Where a turn's grounding, memories and skill index go: ``history`` (the default: with the
#: turn, after the cached prefix) or ``system`` (rendered into the system prompt every turn).
GroundingPlacement = Literal["history", "system"]
GROUNDING_PLACEMENTS: tuple[str, ...] = ("history", "system")


@dataclass(frozen=True, slots=True)
class InjectedContext:
    """One turn's injected context part and what it carries.

    Attributes:
        text: the part's text (the skill listing, then the ``<memories>`` and ``<grounding>`` blocks).
        documents: citation ids of the passages it holds.
        memories: ids of the memories it holds.
        skills: names of the skills it lists.
    """

    text: str
    documents: frozenset[str] = frozenset()
    memories: frozenset[str] = frozenset()
    skills: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Reduction:
    """What one check of the history against its budget did.

    Attributes:
        reduced: the history was over its budget and was reduced (False: it fitted, untouched).
        tokens_before / tokens_after: the history's tokens (None without a token budget).
        chars_before / chars_after: its characters.
        target_tokens / target_chars: the low-water mark a reduction brings it down to.
        cleared_tool_results: old tool results replaced by :data:`CLEARED_TOOL_RESULT`.
        cleared_context: old injected context parts removed from their user messages.
        dropped_messages: messages the reduction stage dropped.
        kept_searches: ``find_tools`` exchanges kept because a tool they loaded is still loaded.
        over_budget: even the stage could not reach the low-water mark (best effort).
        kept_facts: facts on the history's fact sheet after the reduction (what removed
            messages stated; 0 when ``keep_facts`` is off).
    """

    reduced: bool
    tokens_before: int | None
    tokens_after: int | None
    chars_before: int
    chars_after: int
    target_tokens: int | None = None
    target_chars: int | None = None
    cleared_tool_results: int = 0
    cleared_context: int = 0
    dropped_messages: int = 0
    kept_searches: int = 0
    over_budget: bool = False
    kept_facts: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the turn report's ``reduction``, with ``skipped`` = not reduced)."""
        return {"skipped": not self.reduced, **asdict(self)}
