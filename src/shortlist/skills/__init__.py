"""Skills: SKILL.md discovery and parsing, sources, the per-turn index and the model-facing skill tools."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.skills._parser import Skill
    from shortlist.skills._sources import SkillSet, SkillSource, load_skill_set
    from shortlist.skills._tools import SkillsCapability

__all__ = [
    "Skill",
    "SkillSet",
    "SkillSource",
    "SkillsCapability",
    "load_skill_set",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "Skill": "shortlist.skills._parser",
    "SkillSet": "shortlist.skills._sources",
    "SkillSource": "shortlist.skills._sources",
    "SkillsCapability": "shortlist.skills._tools",
    "load_skill_set": "shortlist.skills._sources",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "SKILL_ACTIVATE": ("shortlist.skills._tools", None),
    "SKILL_ACTIVATE_HEADER": ("shortlist.skills._index", None),
    "SKILL_DEACTIVATE": ("shortlist.skills._tools", None),
    "SKILL_READ_RESOURCE": ("shortlist.skills._tools", None),
    "SKILL_TOOL_NAMES": ("shortlist.skills._tools", None),
    "SkillRefused": ("shortlist.skills._events", None),
    "SkillResourceRefused": ("shortlist.skills._events", None),
    "SkillShadowed": ("shortlist.skills._discovery", None),
    "SkillToolError": ("shortlist.skills._tools", None),
    "discover_skills": ("shortlist.skills._discovery", None),
    "parse_skill": ("shortlist.skills._parser", None),
    "parse_skill_file": ("shortlist.skills._parser", None),
    "render_skill_index": ("shortlist.skills._index", None),
    "skill_activate_description": ("shortlist.skills._index", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
