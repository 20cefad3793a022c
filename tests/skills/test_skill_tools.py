"""The model-facing skill tools on a real directory tree: activation, sharing, limits, traversal guards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shortlist._events import Event, event_hooks
from shortlist._types import Selection
from shortlist.errors import ConfigError
from shortlist.selection._base import FunctionSelector
from shortlist.skills import SkillsCapability, SkillSource, load_skill_set
from shortlist.skills._tools import SKILL_ACTIVATE, SkillToolError


def write_skill(root: Path, rel: str, name: str, description: str, tools: str = "", body: str = "Do it.") -> Path:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {name}\ndescription: {description}\n"
    if tools:
        front += f"allowed-tools: {tools}\n"
    (folder / "SKILL.md").write_text(front + f"---\n{body}\n", encoding="utf-8")
    return folder


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    pdf = write_skill(
        root, "docs/pdf", "pdf-report", "Build PDF reports from tables", "read_file write_file render_pdf"
    )
    (pdf / "templates").mkdir()
    (pdf / "templates" / "basic.md").write_text("# Basic template\n", encoding="utf-8")
    write_skill(root, "docs/slides", "slides", "Make slide decks", "read_file write_file")
    write_skill(root, "ops/deploy", "deploy", "Deploy services to production", "run_shell mcp__git__*")
    (tmp_path / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", pdf / "leak.txt")
    os.symlink(tmp_path, pdf / "up")
    return root


PACK = ["read_file", "write_file", "run_shell", "mcp__git__git_log", "mcp__git__git_status", "mcp__time__now"]


def capability(root: Path, **kw: object) -> SkillsCapability:
    return SkillsCapability(load_skill_set([SkillSource.directory(root, mount_as="team")]), pack_tools=PACK, **kw)  # type: ignore[arg-type]


def test_activate_returns_instructions_and_pack_ceiling(tree: Path) -> None:
    cap = capability(tree)
    out = cap.execute(SKILL_ACTIVATE, {"name": "pdf-report"})
    assert out == {"instructions": "Do it.", "added_tools": ["read_file", "write_file"]}  # render_pdf: not in pack
    assert cap.execute(SKILL_ACTIVATE, {"name": "pdf-report"}) == out  # re-activation: same result
    assert cap.active == ("pdf-report",)
    deploy = cap.activate("deploy")  # a skill wildcard expands to the pack's matching tools
    assert deploy["added_tools"] == ["mcp__git__git_log", "mcp__git__git_status", "run_shell"]
    with pytest.raises(SkillToolError, match="unknown skill"):
        cap.execute(SKILL_ACTIVATE, {"name": "nope"})
    with pytest.raises(SkillToolError, match="must be a non-empty string"):
        cap.execute(SKILL_ACTIVATE, {})


def test_deactivate_keeps_tools_shared_with_another_active_skill(tree: Path) -> None:
    cap = capability(tree)
    cap.activate("pdf-report")
    cap.activate("slides")
    cap.activate("deploy")
    assert cap.deactivate("slides") == {"removed_tools": []}  # both still needed by pdf-report
    assert cap.deactivate("pdf-report") == {"removed_tools": ["read_file", "write_file"]}
    assert cap.active_tools == ("mcp__git__git_log", "mcp__git__git_status", "run_shell")
    with pytest.raises(SkillToolError, match="not active"):
        cap.execute("skill__deactivate", {"name": "slides"})


def test_max_active_and_none_filter(tree: Path) -> None:
    cap = capability(tree, max_active=2)
    cap.activate("pdf-report")
    cap.activate("slides")
    with pytest.raises(SkillToolError, match="2 skill\\(s\\) already active"):
        cap.activate("deploy")
    assert cap.activate("slides")["added_tools"] == ["read_file", "write_file"]  # active: still fine
    cap.deactivate("slides")
    assert cap.activate("deploy")["added_tools"]
    blocked = capability(tree, skill_filter="none")
    with pytest.raises(SkillToolError, match="not available"):
        blocked.activate("slides")
    ops_only = capability(tree, skill_filter="team/ops/*")  # glob on the mounted virtual path
    assert ops_only.activate("deploy")
    with pytest.raises(SkillToolError):
        ops_only.activate("slides")


def test_preload_is_ored_and_first_source_wins(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write_skill(other, "x", "slides", "A shadowing definition", body="Other body.")
    events: list[Event] = []
    with event_hooks(events.append):
        skills = load_skill_set(
            [
                SkillSource.directory(tree),
                SkillSource.directory(other, preload=True),
                SkillSource.inline("checklist", "A release checklist", "Check.", preload=True),
            ]
        )
    assert skills.get("slides") is not None and skills.get("slides").instructions == "Do it."  # type: ignore[union-attr]
    assert [e for e in events if e.name == "skills.shadowed"]
    assert skills.preload == {"slides", "checklist"}
    cap = SkillsCapability(skills, pack_tools=PACK)
    assert set(cap.active) == {"slides", "checklist"}
    limited = SkillsCapability(skills, pack_tools=PACK, max_active=1)  # preload errors are ignored
    assert len(limited.active) == 1


def test_mount_as_validation(tree: Path) -> None:
    for bad in ("team/*", "a?", "x[1]", "../up", "a/../b", "/abs"):
        with pytest.raises(ConfigError):
            SkillSource.directory(tree, mount_as=bad)
    with pytest.raises(ConfigError, match="inline"):
        SkillSource(skill=SkillSource.inline("a-b", "d").skill, mount_as="team")
    skills = load_skill_set([SkillSource.directory(tree, mount_as="team/eng")])
    assert skills.virtual_paths["deploy"] == "team/eng/ops/deploy"
    assert skills.get("deploy").path == tree / "ops" / "deploy"  # type: ignore[union-attr]  # access unaffected


def test_read_resource_and_traversal_attempts(tree: Path) -> None:
    cap = capability(tree)
    ok = cap.execute("skill__read_resource", {"skill_name": "pdf-report", "path": "templates/basic.md"})
    assert ok["content"] == "# Basic template\n"
    attempts = {
        "../../secret.txt": "escapes",
        "templates/../../slides/SKILL.md": "escapes",
        str(tree.parent / "secret.txt"): "absolute",
        "leak.txt": "escapes",  # a symlink pointing outside
        "up/secret.txt": "escapes",  # a directory symlink pointing outside
        "missing.md": "no file",
        "templates": "not a regular file",
    }
    for path, message in attempts.items():
        with pytest.raises(SkillToolError, match=message):
            cap.read_resource("pdf-report", path)
    inline = SkillsCapability(load_skill_set([SkillSource.inline("a-b", "d")]))
    with pytest.raises(SkillToolError, match="inline"):
        inline.read_resource("a-b", "x.md")


def test_index_description_follows_each_turn(tree: Path) -> None:
    cap = capability(tree)
    pick_deploy = FunctionSelector(lambda q, cands: Selection(selected=("deploy",)), name="pick")
    turn = cap.narrow_index(pick_deploy, "ship the service")
    assert turn.narrowed
    desc = next(t for t in cap.tools() if t.id == SKILL_ACTIVATE).description
    assert "- deploy: Deploy services to production" in desc and "pdf-report" not in desc
    # a narrowed-out skill may still be activated by default (decision: the model may know it)
    assert cap.activate("slides")["added_tools"] == ["read_file", "write_file"]
    cap.narrow_index(pick_deploy, "")  # an empty-query turn restores the full index
    desc = next(t for t in cap.tools() if t.id == SKILL_ACTIVATE).description
    assert all(f"- {n}:" in desc for n in ("deploy", "pdf-report", "slides"))
    strict = capability(tree, enforce_narrowing=True)
    strict.narrow_index(pick_deploy, "ship it")
    with pytest.raises(SkillToolError, match="not in this turn's skill index"):
        strict.activate("slides")
    assert strict.activate("deploy")


def test_conversations_do_not_share_state(tree: Path) -> None:
    skills = load_skill_set([tree])
    a, b = SkillsCapability(skills, pack_tools=PACK), SkillsCapability(skills, pack_tools=PACK)
    a.activate("slides")
    a.narrow_index(FunctionSelector(lambda q, c: Selection(selected=("slides",)), name="s"), "slides")
    assert b.active == () and len(b.index()) == 3
