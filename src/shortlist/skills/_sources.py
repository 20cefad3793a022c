"""Skill sources: directories (walked recursively) or inline skills, with ``mount_as`` and ``preload``.

:func:`load_skill_set` reads several sources in order into an immutable :class:`SkillSet`:
the first definition of a name wins (a :class:`~shortlist.skills._discovery.SkillShadowed`
event reports the other), ``preload`` is OR-ed across every source that defines the name,
and each skill gets a *virtual path* (``<mount_as>/<folder relative to the source>``) used
for display and glob matching only — never for file access.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import CatalogError, ConfigError
from shortlist.skills._discovery import add_first_wins, discover_skills
from shortlist.skills._parser import Skill

__all__ = ["SkillSet", "SkillSource", "load_skill_set"]

_GLOB_CHARS = frozenset("*?[]{}!")


def _check_mount(mount_as: str) -> str:
    if not mount_as:
        return ""
    bad = sorted(_GLOB_CHARS.intersection(mount_as))
    if bad:
        raise ConfigError(f"mount_as {mount_as!r} must not contain glob characters ({' '.join(bad)})")
    parts = mount_as.replace("\\", "/").split("/")
    if ".." in parts:
        raise ConfigError(f"mount_as {mount_as!r} must not contain '..'")
    if mount_as.startswith("/"):
        raise ConfigError(f"mount_as {mount_as!r} must be a relative prefix such as 'team/skills'")
    return "/".join(p for p in parts if p and p != ".")


@dataclass(frozen=True, slots=True)
class SkillSource:
    """Where skills come from: a directory or one inline skill.

    Args:
        dir: a directory walked recursively for ``SKILL.md`` folders (exclusive with ``skill``).
        skill: an inline skill (exclusive with ``dir``).
        mount_as: a virtual prefix for display and glob matching (directories only); no glob
            characters, no ``..``.
        preload: activate this source's skills when the capability starts.

    Raises:
        ConfigError: both or neither of ``dir``/``skill``, a bad ``mount_as``, or ``mount_as`` on
            an inline skill.
    """

    dir: Path | None = None
    skill: Skill | None = None
    mount_as: str = ""
    preload: bool = False

    def __post_init__(self) -> None:
        if (self.dir is None) == (self.skill is None):
            raise ConfigError("a skill source is either a directory (dir) or an inline skill, not both or neither")
        if self.skill is not None and self.mount_as:
            raise ConfigError(f"inline skill {self.skill.name!r}: mount_as is only allowed on directory sources")
        if self.dir is not None:
            object.__setattr__(self, "dir", Path(self.dir))
        object.__setattr__(self, "mount_as", _check_mount(self.mount_as))

    @classmethod
    def directory(cls, path: str | os.PathLike[str], *, mount_as: str = "", preload: bool = False) -> SkillSource:
        """A directory source."""
        return cls(dir=Path(path), mount_as=mount_as, preload=preload)

    @classmethod
    def inline(
        cls,
        name: str,
        description: str,
        instructions: str = "",
        *,
        allowed_tools: Sequence[str] = (),
        preload: bool = False,
    ) -> SkillSource:
        """An inline source (no folder, hence no resources)."""
        skill = Skill(name=name, description=description, instructions=instructions, allowed_tools=tuple(allowed_tools))
        return cls(skill=skill, preload=preload)


@dataclass(frozen=True, slots=True)
class SkillSet:
    """The skills a conversation can use, immutable and shareable between conversations.

    Attributes:
        skills: every skill by name, sorted by name.
        virtual_paths: each skill's display/glob path.
        preload: names to activate when a capability starts.
    """

    skills: Mapping[str, Skill] = field(default_factory=dict)
    virtual_paths: Mapping[str, str] = field(default_factory=dict)
    preload: frozenset[str] = frozenset()

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, or None."""
        return self.skills.get(name)

    def names(self) -> tuple[str, ...]:
        """Every skill name, sorted."""
        return tuple(self.skills)

    def candidates(self) -> list[Candidate]:
        """The skills as selector candidates (``kind="skill"``), sorted by name."""
        out = []
        for name, skill in self.skills.items():
            meta: dict[str, Any] = dict(skill.metadata)
            if skill.path is not None:
                meta["path"] = str(skill.path)
            if skill.allowed_tools:
                meta["allowed_tools"] = list(skill.allowed_tools)
            meta["virtual_path"] = self.virtual_paths.get(name, name)
            out.append(Candidate(id=name, name=name, description=skill.description, metadata=meta))
        return out

    def __len__(self) -> int:
        return len(self.skills)


def _virtual_path(source: SkillSource, skill: Skill) -> str:
    if source.dir is None or skill.path is None:
        return skill.name
    try:
        rel = skill.path.relative_to(source.dir).as_posix()
    except ValueError:
        rel = skill.name
    rel = "" if rel == "." else rel
    return "/".join(p for p in (source.mount_as, rel) if p) or skill.name


def load_skill_set(sources: Iterable[SkillSource | str | os.PathLike[str] | Skill]) -> SkillSet:
    """Read ``sources`` in order into a :class:`SkillSet`.

    Plain paths and :class:`Skill` objects are accepted as shorthands for
    :meth:`SkillSource.directory` and an inline source.

    Raises:
        CatalogError: a directory does not exist or holds an invalid ``SKILL.md``.
        ConfigError: an invalid source.
    """
    skills: dict[str, Skill] = {}
    paths: dict[str, str] = {}
    preload: set[str] = set()
    for raw in sources:
        if isinstance(raw, SkillSource):
            source = raw
        elif isinstance(raw, Skill):
            source = SkillSource(skill=raw)
        else:
            source = SkillSource(dir=Path(raw))
        if source.dir is not None and not source.dir.is_dir():
            raise CatalogError(f"skill source {source.dir} is not a directory")
        found = discover_skills([source.dir if source.dir is not None else source.skill])  # type: ignore[list-item]
        for skill in found:
            if source.preload:
                preload.add(skill.name)  # OR-ed across sources, even when this definition loses
            if add_first_wins(skills, skill):
                paths[skill.name] = _virtual_path(source, skill)
    ordered = dict(sorted(skills.items()))
    return SkillSet(skills=ordered, virtual_paths={n: paths[n] for n in ordered}, preload=frozenset(preload))
