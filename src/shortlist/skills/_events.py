"""Structured events of the skills area: a refused ``SKILL.md`` and a refused resource read.

Each refusal is also raised as an error with a clear message (a
:class:`~shortlist.errors.CatalogError` at load time, a
:class:`~shortlist.skills._tools.SkillToolError` returned to the model as a tool error); the
event is what an operator's hooks and logs see.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event

__all__ = ["SkillRefused", "SkillResourceRefused"]


@dataclass(frozen=True, kw_only=True)
class SkillRefused(Event):
    """A ``SKILL.md`` was refused at load time; loading raises a ``CatalogError`` with ``message``.

    ``reason`` is one of ``not_regular_file``, ``unreadable``, ``file_too_large``,
    ``front_matter_too_large``, ``body_too_large``, ``yaml_alias`` (an anchor or an alias),
    ``too_deeply_nested``, ``invalid`` (any other validation failure).
    """

    name: ClassVar[str] = "skills.refused"
    area: ClassVar[str] = "skills"
    level: int = logging.WARNING
    path: str = ""
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class SkillResourceRefused(Event):
    """A ``skill__read_resource`` call was refused; the model gets ``message`` as a tool error.

    ``reason`` is one of ``unknown_skill``, ``inline_skill``, ``invalid_path``, ``absolute``,
    ``escapes``, ``symlink_loop``, ``missing``, ``not_regular_file``, ``changed``,
    ``unreadable``, ``too_large``, ``not_utf8``.
    """

    name: ClassVar[str] = "skills.resource_refused"
    area: ClassVar[str] = "skills"
    level: int = logging.WARNING
    skill: str = ""
    path: str = ""
    reason: str = ""
    message: str = ""
