"""SKILL.md parsing and discovery (spec §7, §9 items 32-33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shortlist._events import Event, event_hooks
from shortlist.adapters._tools import skill_to_candidate
from shortlist.errors import CatalogError
from shortlist.skills._discovery import SkillShadowed, discover_skills
from shortlist.skills._index import render_skill_index
from shortlist.skills._parser import parse_skill


def skill_md(name: str, description: str = "Does things.", extra: str = "", body: str = "Steps.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


def test_parses_front_matter_and_body() -> None:
    s = parse_skill(skill_md("pdf-tools", extra="allowed-tools: read_file write_file\nlicense: MIT\n"))
    assert s.name == "pdf-tools" and s.instructions == "Steps." and s.license == "MIT"
    assert s.allowed_tools == ("read_file", "write_file")
    s = parse_skill(skill_md("x", extra="allowed-tools: [a, b]\n"))
    assert s.allowed_tools == ("a", "b")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("no front matter", "missing YAML front matter"),
        ("---\nname: x\ndescription: y\n", "no closing"),
        (skill_md("Bad_Name"), "kebab-case"),
        (skill_md("a" * 65), "kebab-case"),
        (skill_md("ok", description="'" + "d" * 1025 + "'"), "at most 1024"),
        ("---\nname: x\n---\n", "needs `description:`"),
        ("---\nname: [x\n---\n", "not valid YAML"),
        (skill_md("x", extra="allowed-tools: {a: 1}\n"), "allowed-tools"),
    ],
)
def test_invalid_skills(text: str, words: str) -> None:
    with pytest.raises(CatalogError, match=words):
        parse_skill(text)


def test_discovery_is_recursive_and_first_source_wins(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "nested" / "pdf").mkdir(parents=True)
    (a / "nested" / "pdf" / "SKILL.md").write_text(skill_md("pdf", "first"))
    (b / "pdf").mkdir(parents=True)
    (b / "pdf" / "SKILL.md").write_text(skill_md("pdf", "second"))
    (b / "csv").mkdir()
    (b / "csv" / "SKILL.md").write_text(skill_md("csv", "tables"))
    events: list[Event] = []
    with event_hooks(events.append):
        skills = discover_skills([a, b])
    assert {s.name: s.description for s in skills} == {"pdf": "first", "csv": "tables"}
    assert any(isinstance(e, SkillShadowed) and e.skill == "pdf" for e in events)
    cand = skill_to_candidate(skills[0])
    assert cand.id == "pdf" and cand.metadata["path"].endswith("pdf")


def test_index_text() -> None:
    assert render_skill_index([]) == "No skills available."
    s = skill_to_candidate(parse_skill(skill_md("pdf", "Read PDFs")))
    assert render_skill_index([s]) == "Available skills:\n- pdf: Read PDFs"
