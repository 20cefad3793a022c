"""Hybrid fusion: RRF and score fusion against hand computations; abstention on the cosine signal."""

from __future__ import annotations

import numpy as np
import pytest

from shortlist.rankers.base import Abstention
from shortlist.rankers.bm25 import Bm25Ranker
from shortlist.rankers.embedding import EmbeddingRanker
from shortlist.rankers.hybrid import HybridRanker, rrf_fuse, score_fuse
from shortlist.selection.base import SelectorContext
from shortlist.selection.registry import create_builtin_selector
from shortlist.testing import HashEmbedder
from shortlist.types import Candidate, Query

CATALOG = [
    Candidate("weather", "get_weather", "current weather and forecast for a city"),
    Candidate("email", "send_email", "send an email message to a recipient"),
    Candidate("calendar", "create_event", "create a calendar event or meeting"),
    Candidate("stocks", "stock_quote", "latest stock price quote for a ticker"),
    Candidate("translate", "translate_text", "translate text between languages"),
]


def test_rrf_matches_the_formula() -> None:
    bm25 = np.array([3.0, 0.0, 1.0, 2.0])
    dense = np.array([0.1, 0.9, 0.5, 0.2])
    got = rrf_fuse(bm25, dense, k=60, bm25_weight=1.0, dense_weight=2.0)
    # bm25 ranks: 1, (no match), 3, 2; dense ranks: 4, 1, 2, 3
    want = [2 / 64 + 1 / 61, 2 / 61, 2 / 62 + 1 / 63, 2 / 63 + 1 / 62]
    np.testing.assert_allclose(got, want)


def test_score_fusion_matches_the_formula() -> None:
    bm25 = np.array([4.0, 0.0, 2.0])
    dense = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(score_fuse(bm25, dense, bm25_weight=0.2), [0.4, 0.5, 0.4])
    np.testing.assert_allclose(score_fuse(np.zeros(3), dense), dense)


@pytest.mark.parametrize("fusion", ["score", "rrf"])
def test_hybrid_scores_equal_fusing_its_parts(fusion: str) -> None:
    emb = HashEmbedder(dim=128)
    hybrid = HybridRanker(embedder=emb, fusion=fusion)  # type: ignore[arg-type]
    query = Query("translate this email to French")
    got = hybrid.score(query, CATALOG)
    b = Bm25Ranker().score(query, CATALOG)
    d = EmbeddingRanker(embedder=emb).score(query, CATALOG)
    want = score_fuse(b, d) if fusion == "score" else rrf_fuse(b, d)
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_lexical_evidence_breaks_a_dense_tie() -> None:
    # A constant embedder makes every cosine equal: the ranking must come from BM25 alone.
    from shortlist.embeddings.base import FunctionEmbedder

    flat = FunctionEmbedder(lambda texts: np.ones((len(texts), 4)))
    sel = HybridRanker(embedder=flat).select(Query("stock price for a ticker", k=2), CATALOG)
    assert sel.selected[0] == "stocks"


def test_confidence_is_cosine_plus_weighted_normalised_bm25() -> None:
    emb = HashEmbedder(dim=256)
    query = Query("latest stock price")
    _, confidence = HybridRanker(embedder=emb, confidence_bm25_weight=0.5).score_with_confidence(query, CATALOG)
    dense = EmbeddingRanker(embedder=emb).score(query, CATALOG)
    lexical = Bm25Ranker(normalize=True).score(query, CATALOG)
    assert lexical.max() > 0
    np.testing.assert_allclose(confidence, dense + 0.5 * lexical, atol=1e-9)
    _, cosine_only = HybridRanker(embedder=emb, confidence_bm25_weight=0).score_with_confidence(query, CATALOG)
    np.testing.assert_allclose(cosine_only, dense, atol=1e-9)


def test_abstention_uses_the_confidence_not_the_fused_score() -> None:
    emb = HashEmbedder(dim=256)
    query = Query("zzz qqq unrelated words")
    dense_best = float(EmbeddingRanker(embedder=emb).score(query, CATALOG).max())
    ranker = HybridRanker(embedder=emb, abstention=Abstention(min_score=dense_best + 0.01))
    assert ranker.select(query, CATALOG).abstained
    ranker = HybridRanker(embedder=emb, min_score=dense_best - 0.01)
    assert not ranker.select(query, CATALOG).abstained


def test_abstains_on_an_unrelated_query_with_the_default_model() -> None:
    tools = [
        Candidate("weather", "get_weather", "Get the current weather and the forecast for a city."),
        Candidate("email", "send_email", "Send an email to a recipient with a subject and a body."),
        Candidate("stocks", "stock_quote", "Look up the latest price of a stock by its ticker symbol."),
    ]
    ranker = HybridRanker(min_score=0.25)
    assert ranker.select(Query("Write a sonnet about my grandmother's knitting"), tools).abstained
    picked = ranker.select(Query("what is the weather in Oslo tomorrow?"), tools)
    assert picked.selected[0] == "weather"


def test_one_embed_call_per_turn_and_init_override() -> None:
    ctor, shared = HashEmbedder(), HashEmbedder()
    hybrid = HybridRanker(embedder=ctor)
    hybrid.init(SelectorContext(embeddings=shared))
    hybrid.select(Query("email"), CATALOG)
    hybrid.select(Query("weather"), CATALOG)
    assert (ctor.calls, shared.calls) == (0, 3)


def test_k_caps_and_registry_options() -> None:
    hybrid = create_builtin_selector(
        "hybrid", name="h", top_k=2, fusion="rrf", bm25_weight=0.5, min_score=0.1, bm25={"k1": 1.5}
    )
    assert isinstance(hybrid, HybridRanker)
    assert hybrid.bm25_weight == 0.5 and hybrid.bm25.k1 == 1.5 and hybrid.abstention == Abstention(0.1)
    hybrid.init(SelectorContext(embeddings=HashEmbedder()))
    assert len(hybrid.select(Query("send email meeting", k=1), CATALOG).selected) <= 1


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError):
        HybridRanker(fusion="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        HybridRanker(bm25_weight=-1)
