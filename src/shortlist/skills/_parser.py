"""Parse and validate one ``SKILL.md`` (AgentSkills format): YAML front matter, then instructions.

A ``SKILL.md`` may come from a folder nobody reviewed, so loading it is bounded:

* the file is opened non-blocking and must be a regular file (a FIFO, device or socket is
  refused, never read), and at most :data:`MAX_SKILL_FILE_BYTES` are read;
* the front matter is at most :data:`MAX_FRONT_MATTER_BYTES` (64 KiB) of UTF-8, and its YAML
  may not use anchors or aliases (``&a``/``*a``, hence no ``<<`` merge keys either): aliases
  are what lets a 400-byte "billion laughs" file expand to tens of megabytes; nesting is at
  most :data:`MAX_FRONT_MATTER_DEPTH` levels;
* the body (the instructions ``skill__activate`` returns whole) is at most
  :data:`MAX_BODY_BYTES` (1 MiB, some 250k tokens: far above any real skill, whose body the
  AgentSkills guidance keeps under ~5k tokens, and small enough never to be a memory or
  prompt hazard on its own).

Every refusal raises a :class:`~shortlist.errors.CatalogError` naming the file and emits a
:class:`~shortlist.skills._events.SkillRefused` event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from shortlist._events import emit
from shortlist.errors import CatalogError
from shortlist.skills._events import SkillRefused
from shortlist.skills._files import BeneathError, read_regular_file

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_FRONT_MATTER_BYTES",
    "MAX_FRONT_MATTER_DEPTH",
    "MAX_SKILL_FILE_BYTES",
    "NAME_PATTERN",
    "Skill",
    "parse_skill",
    "parse_skill_file",
]

#: A skill name: kebab-case, at most 64 characters.
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
#: The largest front matter (the YAML between the ``---`` lines), in UTF-8 bytes.
MAX_FRONT_MATTER_BYTES = 64 * 1024
#: The largest body (the trimmed instructions), in UTF-8 bytes.
MAX_BODY_BYTES = 1024 * 1024
#: The deepest nesting of YAML collections in the front matter.
MAX_FRONT_MATTER_DEPTH = 32
#: The most bytes read from a ``SKILL.md``: both caps plus room for the ``---`` lines and blank lines.
MAX_SKILL_FILE_BYTES = MAX_FRONT_MATTER_BYTES + MAX_BODY_BYTES + 4096
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


def _refuse(where: str, reason: str, message: str) -> CatalogError:
    """Emit a :class:`SkillRefused` event and return the error to raise."""
    emit(SkillRefused(path=where, reason=reason, message=message))
    return CatalogError(message)


class _FrontMatterRefused(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _FrontMatterLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses anchors and aliases and bounds nesting (checked as it composes)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        if isinstance(event, yaml.AliasEvent):
            raise _FrontMatterRefused("yaml_alias", f"YAML aliases (*{event.anchor}) are not allowed")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise _FrontMatterRefused("yaml_alias", f"YAML anchors (&{anchor}) and aliases are not allowed")
        self._depth += 1
        try:
            if self._depth > MAX_FRONT_MATTER_DEPTH:
                raise _FrontMatterRefused(
                    "too_deeply_nested", f"YAML is nested more than {MAX_FRONT_MATTER_DEPTH} levels deep"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _load_front_matter(front: str, where: str) -> Any:
    size = len(front.encode("utf-8"))
    if size > MAX_FRONT_MATTER_BYTES:
        raise _refuse(
            where,
            "front_matter_too_large",
            f"{where}: front matter has {size} bytes (at most {MAX_FRONT_MATTER_BYTES})",
        )
    loader = _FrontMatterLoader(front)
    try:
        return loader.get_single_data()
    except _FrontMatterRefused as exc:
        raise _refuse(where, exc.reason, f"{where}: front matter refused: {exc}") from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: e.g. an integer of more than 4300 digits
        raise _refuse(
            where, "invalid", f"{where}: front matter is not valid YAML: {' '.join(str(exc).split())}"
        ) from None
    finally:
        loader.dispose()


def _split_front_matter(text: str, where: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise _refuse(where, "invalid", f"{where}: missing YAML front matter (the file must start with a '---' line)")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise _refuse(where, "invalid", f"{where}: the front matter has no closing '---' line")


def _allowed_tools(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):  # the AgentSkills spec writes a space-separated string
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _refuse(where, "invalid", f"{where}: allowed-tools must be a list of names or a space-separated string")


def parse_skill(text: str, *, path: Path | None = None) -> Skill:
    """Parse the text of a ``SKILL.md``.

    Raises:
        CatalogError: missing or unclosed front matter, invalid YAML, YAML anchors or aliases,
            front matter or body over its cap, bad name or description. A
            :class:`~shortlist.skills._events.SkillRefused` event reports each.
    """
    where = str(path / "SKILL.md") if path else "SKILL.md"
    if len(text) > MAX_SKILL_FILE_BYTES:  # characters <= UTF-8 bytes: refused before any splitting
        raise _file_too_large(where)
    front, body = _split_front_matter(text, where)
    meta = _load_front_matter(front, where) or {}
    if not isinstance(meta, dict):
        raise _refuse(where, "invalid", f"{where}: front matter must be a mapping")
    for key in ("name", "description"):
        if key not in meta:
            raise _refuse(where, "invalid", f"{where}: front matter needs `{key}:`")
    metadata = meta.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _refuse(where, "invalid", f"{where}: metadata must be a mapping of strings")
    instructions = body.strip()
    size = len(instructions.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise _refuse(where, "body_too_large", f"{where}: the body has {size} bytes (at most {MAX_BODY_BYTES})")
    extra = {k: v for k, v in meta.items() if k not in _KNOWN_KEYS}
    merged = {str(k): str(v) for k, v in {**extra, **metadata}.items()}
    allowed_tools = _allowed_tools(meta.get("allowed-tools"), where)
    try:
        return Skill(
            name=meta["name"],
            description=str(meta["description"]).strip(),
            instructions=instructions,
            path=path,
            license=meta.get("license"),
            compatibility=meta.get("compatibility"),
            metadata=merged,
            allowed_tools=allowed_tools,
        )
    except CatalogError as exc:  # the name or description, checked by Skill itself
        raise _refuse(where, "invalid", str(exc)) from None


def _file_too_large(where: str) -> CatalogError:
    return _refuse(
        where,
        "file_too_large",
        f"{where} is larger than {MAX_SKILL_FILE_BYTES} bytes (front matter at most "
        f"{MAX_FRONT_MATTER_BYTES}, body at most {MAX_BODY_BYTES})",
    )


def parse_skill_file(path: str | Path) -> Skill:
    """Parse ``path`` (a ``SKILL.md`` file or the folder that holds one).

    The file is opened non-blocking and must be a regular file; at most
    :data:`MAX_SKILL_FILE_BYTES` are read.

    Raises:
        CatalogError: unreadable, not a regular file (a FIFO, device or socket), too large,
            not UTF-8, or invalid content (see :func:`parse_skill`).
    """
    p = Path(path)
    file = p / "SKILL.md" if p.is_dir() else p
    where = str(file)
    try:
        data = read_regular_file(file, MAX_SKILL_FILE_BYTES)
    except BeneathError as exc:
        if exc.reason == "not_regular_file":
            message = f"{file} is not a regular file (a FIFO, device or socket is never read)"
        elif exc.reason == "missing":
            message = f"cannot read {file}: No such file or directory"
        else:
            message = f"cannot read {file}: {exc.detail or exc.reason}"
        raise _refuse(
            where, "not_regular_file" if exc.reason == "not_regular_file" else "unreadable", message
        ) from None
    if len(data) > MAX_SKILL_FILE_BYTES:
        raise _file_too_large(where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(where, "unreadable", f"cannot read {file}: not UTF-8 text") from None
    return parse_skill(text, path=file.parent)
