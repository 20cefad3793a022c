"""Skills: SKILL.md discovery and parsing, and the text of the ``skill__activate`` index."""

from __future__ import annotations

from shortlist.skills.discovery import SkillShadowed, discover_skills
from shortlist.skills.index import SKILL_ACTIVATE_HEADER, render_skill_index, skill_activate_description
from shortlist.skills.parser import Skill, parse_skill, parse_skill_file

__all__ = [
    "SKILL_ACTIVATE_HEADER",
    "Skill",
    "SkillShadowed",
    "discover_skills",
    "parse_skill",
    "parse_skill_file",
    "render_skill_index",
    "skill_activate_description",
]
