"""Skills: SKILL.md discovery and parsing, sources, the per-turn index and the model-facing skill tools."""

from __future__ import annotations

from shortlist.skills.discovery import SkillShadowed, discover_skills
from shortlist.skills.events import SkillRefused, SkillResourceRefused
from shortlist.skills.index import SKILL_ACTIVATE_HEADER, render_skill_index, skill_activate_description
from shortlist.skills.parser import Skill, parse_skill, parse_skill_file
from shortlist.skills.sources import SkillSet, SkillSource, load_skill_set
from shortlist.skills.tools import (
    SKILL_ACTIVATE,
    SKILL_DEACTIVATE,
    SKILL_READ_RESOURCE,
    SKILL_TOOL_NAMES,
    SkillsCapability,
    SkillToolError,
)

__all__ = [
    "SKILL_ACTIVATE",
    "SKILL_ACTIVATE_HEADER",
    "SKILL_DEACTIVATE",
    "SKILL_READ_RESOURCE",
    "SKILL_TOOL_NAMES",
    "Skill",
    "SkillRefused",
    "SkillResourceRefused",
    "SkillSet",
    "SkillShadowed",
    "SkillSource",
    "SkillToolError",
    "SkillsCapability",
    "discover_skills",
    "load_skill_set",
    "parse_skill",
    "parse_skill_file",
    "render_skill_index",
    "skill_activate_description",
]
