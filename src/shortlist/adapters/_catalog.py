"""Load a catalog of candidates from a file or a directory, whatever format the host has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shortlist._types import Candidate
from shortlist.adapters._tools import candidates_from_tools, check_unique, skill_to_candidate
from shortlist.errors import CatalogError
from shortlist.skills._discovery import discover_skills

__all__ = ["load_catalog"]


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read catalog {path}: {exc.strerror or exc}") from None
    if path.suffix == ".jsonl":
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CatalogError(f"{path}:{n}: invalid JSON: {exc.msg}") from None
        return items
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None


def load_catalog(path: str | Path) -> list[Candidate]:
    """Load candidates from ``path``.

    ``path`` is a JSON or JSONL file of tool definitions (OpenAI, Anthropic, MCP
    ``tools/list`` result, or shortlist candidates), or a directory of ``SKILL.md`` folders.

    Raises:
        CatalogError: unreadable file, invalid JSON, malformed items, duplicate ids, empty catalog.
    """
    p = Path(path)
    if p.is_dir():
        candidates = [skill_to_candidate(s) for s in discover_skills([p])]
        check_unique(candidates, source=str(p))
        return candidates
    if not p.exists():
        raise CatalogError(f"catalog {p} does not exist")
    return candidates_from_tools(_read_json(p), source=str(p))
