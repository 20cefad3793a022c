"""Hybrid fusion: z-score, RRF and score fusion against hand computations; the query prefix; split
multi-request queries and intent coverage; abstention on the confidence signal."""

from __future__ import annotations

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.rankers._base import Abstention
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._embedding import EmbeddingRanker
from shortlist.rankers._fusion import cover, rrf_fuse, score_fuse, zscore_fuse
from shortlist.rankers._hybrid import DEFAULT_QUERY_PREFIX, USER_QUERY_PREFIX, HybridRanker
from shortlist.rankers._registry import create_builtin_selector
from shortlist.selection._base import SelectorContext
from shortlist.selection._query import split_intents
from shortlist.testing import HashEmbedder

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


def test_zscore_fusion_matches_the_formula() -> None:
    bm25 = np.array([4.0, 0.0, 2.0, 2.0])
    dense = np.array([0.2, 0.5, 0.3, 0.4])

    def z(x: np.ndarray) -> np.ndarray:
        return (x - x.mean()) / x.std()

    np.testing.assert_allclose(zscore_fuse(bm25, dense, bm25_weight=0.35), z(dense) + 0.35 * z(bm25))
    # A side with no spread (nothing matched) contributes nothing; the ranking is the other side's.
    np.testing.assert_allclose(zscore_fuse(np.zeros(4), dense), z(dense))
    assert zscore_fuse(np.zeros(0), np.zeros(0)).size == 0


@pytest.mark.parametrize("fusion", ["zscore", "score", "rrf"])
def test_hybrid_scores_equal_fusing_its_parts(fusion: str) -> None:
    emb = HashEmbedder(dim=128)
    hybrid = HybridRanker(embedder=emb, fusion=fusion, decompose=False)  # type: ignore[arg-type]
    query = Query("translate this email to French")
    got = hybrid.score(query, CATALOG)
    b = Bm25Ranker().score(query, CATALOG)
    d = EmbeddingRanker(embedder=emb).score(Query(DEFAULT_QUERY_PREFIX + query.text), CATALOG)
    fuse = {"zscore": zscore_fuse, "score": score_fuse, "rrf": rrf_fuse}[fusion]
    np.testing.assert_allclose(got, fuse(b, d), atol=1e-9)


def test_the_prefix_is_on_the_dense_side_only() -> None:
    emb = HashEmbedder(dim=128)
    ranker = HybridRanker(embedder=emb, query_prefix="Find: ")
    ranker.score_with_confidence(Query("stock price"), CATALOG)
    assert emb.texts[-2:] == ["Find: stock price", "stock price"]  # one call: prefixed, then as written
    calls = len(emb.texts)
    ranker.select(Query("stock quote"), CATALOG)  # zero-shot, no abstention: one text
    assert emb.texts[calls:] == ["Find: stock quote"]
    taught = [c.with_examples(["what is AAPL at"]) if c.id == "stocks" else c for c in CATALOG]
    ranker.select(Query("stock ticker"), taught)  # examples are compared with the query as written
    assert emb.texts[-2:] == ["Find: stock ticker", "stock ticker"]
    plain = HashEmbedder(dim=128)
    HybridRanker(embedder=plain, query_prefix="").score_with_confidence(Query("stock price"), CATALOG)
    assert plain.texts[-1] == "stock price" and "stock price" not in plain.texts[:-1]


def test_the_user_prefix_states_a_users_wish() -> None:
    assert USER_QUERY_PREFIX == "The user wants: " and DEFAULT_QUERY_PREFIX == ""
    emb = HashEmbedder(dim=128)
    HybridRanker(embedder=emb, query_prefix=USER_QUERY_PREFIX).select(Query("stock quote"), CATALOG)
    assert emb.texts[-1] == "The user wants: stock quote"  # zero-shot, no abstention: one text
    HybridRanker(embedder=emb, query_prefix=USER_QUERY_PREFIX, min_score=-1.0).select(Query("stock price"), CATALOG)
    assert emb.texts[-2:] == ["The user wants: stock price", "stock price"]  # the confidence: as written
    HybridRanker(embedder=emb).select(Query("stock ticker"), CATALOG)  # the default: no prefix
    assert emb.texts[-1] == "stock ticker"


def test_a_multi_request_query_scores_the_best_of_whole_and_parts() -> None:
    emb = HashEmbedder(dim=256)
    text = "Send an email to Anna and also translate the text into German"
    hybrid = HybridRanker(embedder=emb, fusion="zscore", decompose=True, decompose_penalty=0.1, query_prefix="")
    assert hybrid.intents(text) == ["Send an email to Anna", "translate the text into German"]
    got = hybrid.score(Query(text), CATALOG)
    parts = []
    for t in (text, *hybrid.intents(text)):
        b = Bm25Ranker(normalize=True).score(Query(t), CATALOG)
        d = EmbeddingRanker(embedder=emb).score(Query(t), CATALOG)
        parts.append(zscore_fuse(b, d))
    np.testing.assert_allclose(got, np.maximum(parts[0], np.maximum(parts[1], parts[2]) - 0.1), atol=1e-9)
    # The whole query and its parts are embedded in one call.
    calls = emb.calls
    hybrid.score(Query(text + " today"), CATALOG)
    assert emb.calls == calls + 1
    # By default a query is cut at explicit joints such as this "and also".
    assert HybridRanker(embedder=emb).intents(text) == hybrid.intents(text)
    assert HybridRanker(embedder=emb, decompose=False).intents(text) == []


def test_split_at_joints_only_keeps_sentences_whole() -> None:
    text = "I am planning a road trip to Oslo. Book a hotel there and also send an email to Anna"
    # Sentence ends cut too by default; without them only the explicit joint does.
    assert split_intents(text) == ["I am planning a road trip to Oslo", "Book a hotel there", "send an email to Anna"]
    assert split_intents(text, sentences=False) == [
        "I am planning a road trip to Oslo. Book a hotel there",
        "send an email to Anna",
    ]
    # Sentences without a joint are one request; so is a text whose second part is too short.
    assert split_intents("Move the report to temp. Make sure to create the directory first.", sentences=False) == []
    assert split_intents("Translate this text and also fast", sentences=False) == []
    assert split_intents("", sentences=False) == []


def test_decompose_modes_choose_where_a_query_is_cut() -> None:
    emb = HashEmbedder(dim=64)
    text = "I am planning a road trip to Oslo. Book a hotel there, then send an email to Anna"
    joints = HybridRanker(embedder=emb, decompose="joints", query_prefix="")
    assert joints.intents(text) == ["I am planning a road trip to Oslo. Book a hotel there", "send an email to Anna"]
    assert joints.intents("Book a hotel in Oslo. Send an email to Anna about it.") == []
    sentences = HybridRanker(embedder=emb, decompose="sentences")
    assert sentences.intents(text) == [
        "I am planning a road trip to Oslo",
        "Book a hotel there",
        "send an email to Anna",
    ]
    assert HybridRanker(embedder=emb, decompose=True).intents(text) == sentences.intents(text)
    assert HybridRanker(embedder=emb, decompose=False).intents(text) == []
    # A joint-split query is scored like a sentence-split one: the best of the whole and its parts.
    got = joints.score(Query(text), CATALOG)
    parts = []
    for t in (text, *joints.intents(text)):
        b = Bm25Ranker(normalize=True).score(Query(t), CATALOG)
        parts.append(score_fuse(b, EmbeddingRanker(embedder=emb).score(Query(t), CATALOG)))
    np.testing.assert_allclose(got, np.maximum(parts[0], np.maximum(parts[1], parts[2]) - 0.1), atol=1e-9)


def test_decompose_option_is_validated_in_config_and_constructor() -> None:
    from pydantic import ValidationError

    from shortlist._builtins import validate_options

    validate_options("hybrid", {"decompose": "joints"})
    validate_options("hybrid", {"decompose": True})
    with pytest.raises(ValidationError):
        validate_options("hybrid", {"decompose": "words"})
    with pytest.raises(ValueError, match="decompose"):
        HybridRanker(decompose="words")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="decompose"):
        HybridRanker(decompose=1)  # type: ignore[arg-type]
    hybrid = create_builtin_selector("hybrid", decompose="joints")
    assert isinstance(hybrid, HybridRanker) and hybrid.decompose == "joints"


def test_cover_takes_each_intents_best_first() -> None:
    fused = np.array([0.9, 0.8, 0.7, 0.1, 0.0])
    part_a = np.array([0.9, 0.8, 0.7, 0.0, 0.0])
    part_b = np.array([0.0, 0.1, 0.0, 0.2, 0.9])
    # a's best is the fused best (covered), b's best comes next, then the rest by fused score.
    assert cover(fused, [part_a, part_b], 3) == [0, 4, 1]
    assert cover(fused, [part_a, part_b], 1) == [0]
    assert cover(fused, [part_b, part_b], 10) == [0, 4, 1, 2, 3]  # k larger than the catalog


def test_selection_covers_every_intent() -> None:
    emb = HashEmbedder(dim=256)
    text = "Send an email message to my recipient. Then translate text between languages please"
    sel = HybridRanker(embedder=emb, decompose=True, cover_intents=True).select(Query(text, k=2), CATALOG)
    assert set(sel.selected) == {"email", "translate"}
    assert len(sel.scores or ()) == 2


def test_lexical_evidence_breaks_a_dense_tie() -> None:
    # A constant embedder makes every cosine equal: the ranking must come from BM25 alone.
    from shortlist.embeddings._base import FunctionEmbedder

    flat = FunctionEmbedder(lambda texts: np.ones((len(texts), 4)))
    sel = HybridRanker(embedder=flat).select(Query("stock price for a ticker", k=2), CATALOG)
    assert sel.selected[0] == "stocks"


def test_confidence_is_cosine_plus_weighted_normalised_bm25() -> None:
    emb = HashEmbedder(dim=256)
    query = Query("latest stock price")
    _, confidence = HybridRanker(embedder=emb, confidence_bm25_weight=0.5).score_with_confidence(query, CATALOG)
    dense = EmbeddingRanker(embedder=emb).score(query, CATALOG)  # the query as written, no prefix
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
    with pytest.raises(ValueError):
        HybridRanker(decompose_penalty=-0.1)
