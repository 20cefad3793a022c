"""Parse and validate one ``SKILL.md`` (AgentSkills format): YAML front matter, then instructions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shortlist.errors import CatalogError

__all__ = ["NAME_PATTERN", "Skill", "parse_skill", "parse_skill_file"]

#: A skill name: kebab-case, at most 64 characters.
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
_KNOWN_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: what the index shows (name, description) and what activation loads.

    Attributes:
        name: kebab-case identifier.
        description: what the skill is for (what selectors rank).
        instructions: the Markdown body, trimmed.
        path: the folder holding ``SKILL.md`` (None for inline skills); resources live beside it.
        allowed_tools: tools the skill needs (intersected with the pack's tools on activation).
    """

    name: str
    description: str
    instructions: str = ""
    path: Path | None = None
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f" ({self.path / 'SKILL.md'})" if self.path else ""
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name) or len(self.name) > MAX_NAME:
            raise CatalogError(
                f"skill name {self.name!r}{where} must be kebab-case (a-z, 0-9, single hyphens), "
                f"at most {MAX_NAME} characters"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise CatalogError(f"skill {self.name!r}{where} needs a non-empty description")
        if len(self.description) > MAX_DESCRIPTION:
            raise CatalogError(
                f"skill {self.name!r}{where}: description has {len(self.description)} characters "
                f"(at most {MAX_DESCRIPTION})"
            )


def _split_front_matter(text: str, where: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise CatalogError(f"{where}: missing YAML front matter (the file must start with a '---' line)")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise CatalogError(f"{where}: the front matter has no closing '---' line")


def _allowed_tools(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):  # the AgentSkills spec writes a space-separated string
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise CatalogError(f"{where}: allowed-tools must be a list of names or a space-separated string")


def parse_skill(text: str, *, path: Path | None = None) -> Skill:
    """Parse the text of a ``SKILL.md``.

    Raises:
        CatalogError: missing or unclosed front matter, invalid YAML, bad name or description.
    """
    where = str(path / "SKILL.md") if path else "SKILL.md"
    front, body = _split_front_matter(text, where)
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError as exc:
        raise CatalogError(f"{where}: front matter is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(meta, dict):
        raise CatalogError(f"{where}: front matter must be a mapping")
    for key in ("name", "description"):
        if key not in meta:
            raise CatalogError(f"{where}: front matter needs `{key}:`")
    metadata = meta.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise CatalogError(f"{where}: metadata must be a mapping of strings")
    extra = {k: v for k, v in meta.items() if k not in _KNOWN_KEYS}
    merged = {str(k): str(v) for k, v in {**extra, **metadata}.items()}
    return Skill(
        name=meta["name"],
        description=str(meta["description"]).strip(),
        instructions=body.strip(),
        path=path,
        license=meta.get("license"),
        compatibility=meta.get("compatibility"),
        metadata=merged,
        allowed_tools=_allowed_tools(meta.get("allowed-tools"), where),
    )


def parse_skill_file(path: str | Path) -> Skill:
    """Parse ``path`` (a ``SKILL.md`` file or the folder that holds one).

    Raises:
        CatalogError: unreadable file or invalid content.
    """
    p = Path(path)
    file = p / "SKILL.md" if p.is_dir() else p
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read {file}: {exc.strerror or exc}") from None
    return parse_skill(text, path=file.parent)
