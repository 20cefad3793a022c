"""The Shortlist facade over turns: skills index per turn, config bindings, async."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from shortlist._types import Candidate, Query
from shortlist.selection._base import FunctionSelector
from shortlist.selection._facade import Shortlist
from shortlist.skills._index import skill_activate_description

SKILLS = [
    Candidate("pdf", description="Read and fill PDF forms"),
    Candidate("csv", description="Analyse CSV tables"),
    Candidate("git", description="Work with git repositories"),
]


def by_word(q: Query, cands: Sequence[Candidate]) -> list[str]:
    return [c.id for c in cands if c.id in q.text.split()]


def test_empty_query_turn_after_a_narrowed_turn_restores_the_full_index() -> None:
    sl = Shortlist(SKILLS, selector=FunctionSelector(by_word), kind="skill")
    first = sl.select("open the pdf please")
    assert first.ids == ("pdf",)
    assert "csv" not in skill_activate_description(first.surfaced)
    second = sl.select([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    assert second.fallback == "empty_query"
    assert second.ids == ("pdf", "csv", "git")
    assert "- csv: Analyse CSV tables" in skill_activate_description(second.surfaced)


async def test_two_concurrent_async_turns_see_their_own_index() -> None:
    gate = asyncio.Event()

    class Gated(FunctionSelector):
        async def aselect(self, query: Query, candidates: Sequence[Candidate]):  # type: ignore[no-untyped-def]
            if query.text == "pdf":
                await gate.wait()  # the pdf turn answers after the git turn
            else:
                gate.set()
            return self.select(query, candidates)

    sl = Shortlist(SKILLS, selector=Gated(by_word), kind="skill")
    a, b = await asyncio.gather(sl.aselect("pdf"), sl.aselect("git"))
    assert a.ids == ("pdf",) and b.ids == ("git",)


def test_default_selector_and_config_binding(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "runtime.yaml"
    cfg.write_text(
        "spec:\n  selectors:\n    fast: {type: overlap, options: {top_k: 1}}\n  tool_selector: fast\n"
        "  selection: {always_include: [csv]}\n"
    )
    sl = Shortlist(SKILLS, config=cfg)
    turn = sl.select("git repositories")
    assert turn.selector == "fast" and turn.ids == ("git", "csv")
    none = Shortlist(SKILLS, selector=None).select("git")
    assert none.fallback == "no_selector"


def test_derive_shares_every_attribute_it_does_not_set() -> None:
    from shortlist._types import Candidate as _Candidate
    from shortlist.selection._facade import Shortlist as _Shortlist
    from shortlist.testing import StaticSelector

    parent = _Shortlist(catalog=[_Candidate("a", "a", "first")], selector=StaticSelector(["a"]))
    parent.extra_state = object()  # type: ignore[attr-defined]  # an attribute the facade may grow later
    twin = parent.derive(kind="skill", catalog=[_Candidate("b", "b", "second")])
    set_by_derive = {"kind", "catalog", "policy", "_selector_arg", "_owns_registry", "_owns_examples", "_enriched"}
    for name, value in vars(parent).items():
        if name not in set_by_derive:
            assert getattr(twin, name) is value, name
    assert twin.kind == "skill" and [c.id for c in twin.catalog] == ["b"]
    assert parent.kind != "skill" and [c.id for c in parent.catalog] == ["a"]
    assert not twin._owns_registry and parent._owns_registry
