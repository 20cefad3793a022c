"""Find skills: walk directories for ``SKILL.md`` files; the first definition of a name wins."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from shortlist._events import Event, emit
from shortlist.errors import CatalogError
from shortlist.skills._parser import Skill, parse_skill_file

__all__ = ["SkillShadowed", "add_first_wins", "discover_skills"]


@dataclass(frozen=True, kw_only=True)
class SkillShadowed(Event):
    """A later source defined a skill name that an earlier one already defined; the first wins."""

    name: ClassVar[str] = "skills.shadowed"
    area: ClassVar[str] = "skills"
    level: int = logging.WARNING
    skill: str = ""
    kept: str = ""
    ignored: str = ""


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if "SKILL.md" in filenames:
            found.append(Path(dirpath))
    return found


def add_first_wins(skills: dict[str, Skill], skill: Skill) -> bool:
    """Add ``skill`` unless its name is taken; report a shadowed definition as an event.

    Returns:
        True when ``skill`` was added.
    """
    kept = skills.get(skill.name)
    if kept is not None:
        emit(SkillShadowed(skill=skill.name, kept=str(kept.path or "inline"), ignored=str(skill.path or "inline")))
        return False
    skills[skill.name] = skill
    return True


def discover_skills(sources: Iterable[str | Path | Skill]) -> list[Skill]:
    """Return the skills of ``sources`` (directories walked recursively, or inline skills).

    Sources are read in order; when two define the same name the first wins and a
    :class:`SkillShadowed` event reports the other.

    Raises:
        CatalogError: a source directory does not exist, or a SKILL.md is invalid.
    """
    skills: dict[str, Skill] = {}
    for source in sources:
        if isinstance(source, Skill):
            found = [source]
        else:
            root = Path(source)
            if not root.is_dir():
                raise CatalogError(f"skill source {root} is not a directory")
            found = [parse_skill_file(d) for d in _walk(root)]
        for skill in found:
            add_first_wins(skills, skill)
    return list(skills.values())
