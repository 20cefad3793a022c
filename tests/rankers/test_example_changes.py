"""A feedback log's changed examples: the rankers rebuild only what reads examples, and score as if fresh."""

from __future__ import annotations

import random

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._hybrid import HybridRanker
from shortlist.rankers._text import same_but_examples
from shortlist.testing import HashEmbedder

WORDS = [
    "file",
    "read",
    "write",
    "list",
    "copy",
    "move",
    "weather",
    "forecast",
    "city",
    "mail",
    "send",
    "inbox",
    "draft",
    "stock",
    "price",
    "quote",
    "car",
    "lock",
]


def catalog(seed: int, n: int = 60) -> tuple[Candidate, ...]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        server = f"srv{i % 7}"
        words = rng.sample(WORDS, 4)
        out.append(
            Candidate(
                f"{server}__{words[0]}_{words[1]}_{i}",
                description=" ".join(words + rng.sample(WORDS, rng.randint(0, 8))),
                metadata={"server": server},
                parameters={"type": "object", "properties": {words[2]: {"type": "string"}}},
            )
        )
    return tuple(out)


def with_examples(cands: tuple[Candidate, ...], seed: int, share: float = 0.3) -> tuple[Candidate, ...]:
    rng = random.Random(seed)
    return tuple(
        c.with_examples([" ".join(rng.sample(WORDS, 3)) for _ in range(rng.randint(1, 3))])
        if rng.random() < share
        else c
        for c in cands
    )


def hybrid() -> HybridRanker:
    return HybridRanker(embedder=HashEmbedder(dim=64))


def test_same_but_examples() -> None:
    cands = catalog(0, 5)
    assert same_but_examples(cands, cands) and same_but_examples(cands, with_examples(cands, 1, share=1.0))
    assert not same_but_examples(cands, cands[:4])
    assert not same_but_examples(cands, (*cands[1:], cands[0]))  # order matters
    c = cands[2]
    for changed in (
        Candidate(c.id, c.name, c.description + " more", c.metadata, c.parameters),
        Candidate(c.id, "other_name", c.description, c.metadata, c.parameters),
        Candidate(c.id, c.name, c.description, {"server": "elsewhere"}, c.parameters),
        Candidate(c.id, c.name, c.description, c.metadata, {"type": "object"}),
        Candidate("other_id", c.name, c.description, c.metadata, c.parameters),
    ):
        assert not same_but_examples(cands, (*cands[:2], changed, *cands[3:]))
    equal_copy = Candidate(c.id, c.name, c.description, dict(c.metadata), dict(c.parameters or {}), ("an example",))
    assert same_but_examples(cands, (*cands[:2], equal_copy, *cands[3:]))  # equal, not identical: the same


@pytest.mark.parametrize("seed", range(6))
def test_the_hybrid_after_a_log_change_scores_as_a_fresh_ranker(seed: int) -> None:
    base = catalog(seed)
    before, after = with_examples(base, seed), with_examples(base, seed + 100)
    ranker = hybrid()
    queries = [Query(" ".join(random.Random(seed * 10 + j).sample(WORDS, 4))) for j in range(5)]
    for q in queries:
        ranker.score(q, before)
    main = ranker.bm25._index(before).main
    desc = ranker.dense.scoring_catalog(before).desc
    names = ranker._structure(before, desc).names
    builds = ranker.bm25.index_builds
    for q in queries:
        fresh = hybrid()
        assert np.array_equal(ranker.score(q, after), fresh.score(q, after))  # bit for bit
        assert ranker.select(q, after).selected == fresh.select(q, after).selected
    assert ranker.bm25.index_builds == builds + 1  # the examples field only
    assert ranker.bm25._index(after).main is main  # the main field kept
    assert ranker.dense.scoring_catalog(after).desc is desc  # the description matrix kept
    renewed = ranker._structure(after, desc)
    assert renewed.candidates is after and renewed.names.candidates is after
    assert renewed.names.phrases is names.phrases  # the name index kept, for the new objects


def test_a_changed_description_rebuilds_everything() -> None:
    before = with_examples(catalog(1), 1)
    ranker = hybrid()
    q = Query("send mail to the city")
    ranker.score(q, before)
    main = ranker.bm25._index(before).main
    c = before[3]
    changed = (*before[:3], Candidate(c.id, c.name, "send mail now", c.metadata, c.parameters, c.examples), *before[4:])
    assert np.array_equal(ranker.score(q, changed), hybrid().score(q, changed))
    assert ranker.bm25._index(changed).main is not main


def test_merged_examples_rebuild_the_main_field() -> None:
    """With ``examples_mode="merge"`` the main field reads the examples: it is never kept."""
    base = catalog(2)
    before, after = with_examples(base, 2), with_examples(base, 3)
    ranker = Bm25Ranker(examples_mode="merge")
    q = Query("stock price quote")
    ranker.score(q, before)
    main = ranker._index(before).main
    assert np.array_equal(ranker.score(q, after), Bm25Ranker(examples_mode="merge").score(q, after))
    assert ranker._index(after).main is not main


def test_examples_removed_everywhere_leave_no_examples_field() -> None:
    base = catalog(4)
    before = with_examples(base, 4)
    ranker = Bm25Ranker()
    q = Query("weather forecast for a city")
    ranker.score(q, before)
    assert ranker._index(before).examples is not None
    assert np.array_equal(ranker.score(q, base), Bm25Ranker().score(q, base))
    assert ranker._index(base).examples is None


@pytest.mark.parametrize("seed", range(4))
def test_example_vectors_are_kept_in_blocks_that_a_change_shares(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """A new example re-stacks its block only; every other block is the same array, and the scores are
    bit for bit those of a catalog built at once."""
    from shortlist.rankers import _embedding

    monkeypatch.setattr(_embedding, "_EXAMPLE_ROWS", 5)
    base = with_examples(catalog(seed, n=80), seed, share=0.6)
    ranker = hybrid()
    q = Query("copy the file to the city inbox")
    ranker.score(q, base)
    first = ranker.dense.scoring_catalog(base)
    assert len(first.examples) > 3 and all(b.shape[0] <= 5 + 2 for b in first.examples[:-1])
    rng = random.Random(seed)
    current = base
    for _ in range(5):
        i = rng.randrange(len(current))
        c = current[i]
        current = (*current[:i], c.with_examples([*c.examples, f"new {rng.random()}"]), *current[i + 1 :])
        before = ranker.dense.scoring_catalog(ranker.dense._catalogs.entries[0].candidates)
        assert np.array_equal(ranker.score(q, current), hybrid().score(q, current))
        after = ranker.dense.scoring_catalog(current)
        shared = {id(b) for b in before.examples} & {id(b) for b in after.examples}
        assert len(shared) >= len(after.examples) - 3  # the changed block (cut in two at most) is new
        assert after.bounds[0] == 0 and after.bounds[-1] == len(current)
        assert sum(b.shape[0] for b in after.examples) == int(after.counts.sum())
