"""The ``skill__activate`` index text for a turn, built from that turn's narrowed skills."""

from __future__ import annotations

from collections.abc import Sequence

from shortlist._types import Candidate

__all__ = [
    "SKILL_ACTIVATE_HEADER",
    "SKILL_ACTIVATE_LISTED",
    "render_skill_index",
    "skill_activate_description",
]

SKILL_ACTIVATE_HEADER = "Activate a skill to load its instructions and tools."
#: The ``skill__activate`` description when the index is listed in the conversation instead
#: (the runtime's default): one fixed text, so the tools array never changes with the index.
SKILL_ACTIVATE_LISTED = (
    f"{SKILL_ACTIVATE_HEADER} The skills you can activate are listed in the conversation, "
    "under 'Available skills:'; more may be listed in later turns."
)


def _one_line(text: str) -> str:
    """Fold every run of whitespace (newlines, ``\\r``, U+2028, U+0085 …) into one space."""
    return " ".join(text.split())


def render_skill_index(skills: Sequence[Candidate]) -> str:
    """Render ``Available skills:`` and exactly one ``- name: description`` line per skill.

    Whitespace runs in names and descriptions (line breaks included) fold into one space, so a
    description can never start a line of its own and forge another entry.
    """
    if not skills:
        return "No skills available."
    return "\n".join(["Available skills:", *(f"- {_one_line(s.name)}: {_one_line(s.description)}" for s in skills)])


def skill_activate_description(skills: Sequence[Candidate]) -> str:
    """The full description of the ``skill__activate`` tool for this turn."""
    return f"{SKILL_ACTIVATE_HEADER}\n\n{render_skill_index(skills)}"
