"""Fragments, steps, excerpts and head-and-tail truncation."""

from __future__ import annotations

import pytest

from shortlist.errors import ConfigError
from shortlist.reduction import ContextFragment
from shortlist.reduction._fragments import group_steps, make_excerpt, truncate_middle


def test_fragment_validation() -> None:
    with pytest.raises(ConfigError):
        ContextFragment(id="", kind="user", text="x")
    with pytest.raises(ConfigError, match="unknown kind"):
        ContextFragment(id="a", kind="banana", text="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="text"):
        ContextFragment(id="a", kind="user", text=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tokens"):
        ContextFragment(id="a", kind="user", text="x", tokens=-1)


def test_replace_text_drops_the_cached_token_count() -> None:
    frag = ContextFragment(id="a", kind="user", text="hello", tokens=1)
    assert frag.replace(text="hello there").tokens is None
    assert frag.replace(protected=True).tokens == 1
    assert frag.step == "a" and frag.chars == 5


def test_group_steps_keeps_pairs_and_marks_protection() -> None:
    frags = [
        ContextFragment(id="c", step_id="s", kind="tool_call", text="call"),
        ContextFragment(id="u", kind="user", text="hi"),
        ContextFragment(id="r", step_id="s", kind="tool_result", text="result", protected=True),
    ]
    steps = group_steps(frags)
    assert [(s.step_id, [f.id for f in s.fragments], s.protected) for s in steps] == [
        ("s", ["c", "r"], True),
        ("u", ["u"], False),
    ]
    assert steps[0].text == "call\n\nresult" and steps[0].chars == 10 and steps[0].kind == "tool_call"
    assert group_steps(frags, protected_ids=["u"])[1].protected


@pytest.mark.parametrize("limit", [1, 3, 10, 50])
def test_make_excerpt_respects_the_cap(limit: int) -> None:
    text = "abcdefghij" * 3
    out = make_excerpt(text, limit)
    assert len(out) <= limit and text.startswith(out.removesuffix(" […]"))
    with pytest.raises(ConfigError):
        make_excerpt(text, 0)


@pytest.mark.parametrize("limit", [0, 10, 40, 100, 999])
def test_truncate_middle_keeps_head_and_tail(limit: int) -> None:
    text = "".join(f"{i:04d}" for i in range(250))  # 1,000 chars
    out = truncate_middle(text, limit)
    assert len(out) < len(text)
    removed = int(out.split("truncated ")[1].split(" chars")[0])
    kept = len(out) - len(f"\n[… truncated {removed} chars …]\n")
    assert kept + removed == len(text)


@pytest.mark.parametrize("limit", [60, 100, 999])
def test_truncate_middle_fits_a_limit_that_has_room_for_the_marker(limit: int) -> None:
    text = "".join(f"{i:04d}" for i in range(250))  # 1,000 chars
    out = truncate_middle(text, limit)
    assert len(out) <= limit
    assert out.startswith(text[:10]) and out.endswith(text[-10:])


def test_truncate_middle_leaves_short_text_alone() -> None:
    assert truncate_middle("short", 100) == "short"
