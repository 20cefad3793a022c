"""Usage examples only ever lift their own candidate: tools without examples never lose.

The example path (embedding aggregate and the BM25 examples field) must leave a catalog
without examples exactly as it was, score a candidate without examples exactly as in a
catalog without any, and never put a candidate below its description score.
"""

from __future__ import annotations

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.rankers._bm25 import FUSED_EXAMPLES_WEIGHT
from shortlist.rankers._embedding import DEFAULT_EXAMPLE_TAU, DEFAULT_EXAMPLE_WEIGHT, EmbeddingRanker
from shortlist.rankers._hybrid import HybridRanker
from shortlist.testing import HashEmbedder

CATALOG = [
    Candidate("weather", "get_weather", "current weather and forecast for a city"),
    Candidate("email", "send_email", "send an email message to a recipient"),
    Candidate("calendar", "create_event", "create a calendar event meeting"),
    Candidate("stocks", "stock_quote", "latest stock price quote for a ticker"),
    Candidate("notes", "write_note", "write a note to the notebook"),
]
EXAMPLES = {
    "calendar": ("book the dentist for tomorrow", "set up a team sync on friday", "meeting with anna at noon"),
    "email": ("mail the report to bob", "tell my boss I am late"),
}
QUERIES = [
    "remind me about the dentist tomorrow",
    "what is the weather in oslo",
    "send the quarterly report to finance",
    "note that the meeting moved",
    "price of apple shares",
    "",
    "zzzz qqqq",
]


def taught() -> list[Candidate]:
    return [c.with_examples(EXAMPLES[c.id]) if c.id in EXAMPLES else c for c in CATALOG]


def test_the_defaults_are_the_measured_ones() -> None:
    r = EmbeddingRanker(embedder=HashEmbedder(dim=64))
    assert (r.example_weight, r.example_tau, r.example_aggregation) == (
        DEFAULT_EXAMPLE_WEIGHT,
        DEFAULT_EXAMPLE_TAU,
        "lse",
    )
    assert (DEFAULT_EXAMPLE_WEIGHT, DEFAULT_EXAMPLE_TAU) == (0.75, 0.065)
    h = HybridRanker(embedder=HashEmbedder(dim=64))
    assert h.bm25.examples_weight == FUSED_EXAMPLES_WEIGHT == 1.0
    assert HybridRanker(embedder=HashEmbedder(dim=64), bm25={"examples_weight": 2.0}).bm25.examples_weight == 2.0


@pytest.mark.parametrize("aggregation", ["lse", "top_mean"])
@pytest.mark.parametrize("query", QUERIES)
def test_embedding_candidates_without_examples_keep_their_score(query: str, aggregation: str) -> None:
    emb = HashEmbedder(dim=256)
    plain = EmbeddingRanker(embedder=emb).score(Query(query), CATALOG)
    ranker = EmbeddingRanker(embedder=emb, example_aggregation=aggregation)  # type: ignore[arg-type]
    got = ranker.score(Query(query), taught())
    for i, c in enumerate(CATALOG):
        if c.id in EXAMPLES:
            assert got[i] >= plain[i] - 1e-9, f"{c.id} lost by its own examples"
        else:
            assert got[i] == pytest.approx(plain[i], abs=1e-9), f"{c.id} has no examples and changed"


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("fusion", ["score", "zscore", "rrf"])
def test_hybrid_without_examples_is_exactly_zero_shot(query: str, fusion: str) -> None:
    # A catalog without examples: the example settings (weight, tau, BM25 field weight) change nothing.
    emb = HashEmbedder(dim=256)
    base = HybridRanker(embedder=emb, fusion=fusion)  # type: ignore[arg-type]
    other = HybridRanker(
        embedder=emb,
        fusion=fusion,  # type: ignore[arg-type]
        bm25={"examples_weight": 2.0},
        embedding={"example_weight": 0.7, "example_tau": 0.05},
    )
    a, ca = base.score_with_confidence(Query(query), CATALOG)
    b, cb = other.score_with_confidence(Query(query), CATALOG)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ca, cb)


@pytest.mark.parametrize("query", QUERIES)
def test_hybrid_dense_side_of_tools_without_examples_is_unchanged(query: str) -> None:
    # In a mixed catalog the embedding score of a tool without examples is its zero-shot one,
    # and its BM25 score is unchanged (the examples field scores only the tools that have one).
    emb = HashEmbedder(dim=256)
    zero, mixed = HybridRanker(embedder=emb), HybridRanker(embedder=emb)
    dense0 = zero.dense.score(Query(query), CATALOG)
    dense1 = mixed.dense.score(Query(query), taught())
    raw0 = zero.bm25.__class__(normalize=False).score(Query(query), CATALOG)
    raw1 = mixed.bm25.__class__(normalize=False, examples_weight=FUSED_EXAMPLES_WEIGHT).score(Query(query), taught())
    for i, c in enumerate(CATALOG):
        if c.id not in EXAMPLES:
            assert dense1[i] == pytest.approx(dense0[i], abs=1e-9)
            assert raw1[i] == pytest.approx(raw0[i], abs=1e-9)
        else:
            assert dense1[i] >= dense0[i] - 1e-9
            assert raw1[i] >= raw0[i] - 1e-9


def test_examples_lift_their_tool_to_the_top() -> None:
    emb = HashEmbedder(dim=256)
    query = Query("remind me about the dentist tomorrow")
    assert HybridRanker(embedder=emb).select(query, taught()).selected[0] == "calendar"
