"""The anchor confidence: the softmax of tools against no-tool requests, its caching, and how the
hybrid ranker abstains on it (the old cosine confidence stays selectable)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from shortlist._builtins import validate_options
from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._confidence import DEFAULT_TAU, NO_TOOL_ANCHORS, AnchorConfidence, log_sum_exp
from shortlist.rankers._embedding import EmbeddingRanker
from shortlist.rankers._hybrid import HybridRanker
from shortlist.rankers._registry import create_builtin_selector
from shortlist.testing import HashEmbedder

CATALOG = [
    Candidate("weather", "get_weather", "current weather and forecast for a city"),
    Candidate("email", "send_email", "send an email message to a recipient"),
    Candidate("stocks", "stock_quote", "latest stock price quote for a ticker"),
]
ANCHORS = ["write a poem about the sea", "tell me a joke", "explain how rainbows form"]


def test_log_sum_exp_matches_the_formula_and_tends_to_the_max() -> None:
    x = [0.2, 0.5, 0.1]
    want = 0.05 * math.log(sum(math.exp(v / 0.05) for v in x))
    assert log_sum_exp(x, 0.05) == pytest.approx(want, abs=1e-12)
    assert log_sum_exp(x, 1e-4) == pytest.approx(0.5, abs=1e-3)
    assert log_sum_exp([0.3], 0.05) == pytest.approx(0.3)
    assert log_sum_exp([], 0.05) == float("-inf")
    assert log_sum_exp([900.0, 899.0], 0.01) == pytest.approx(900.0, abs=1e-6)  # no overflow


def test_confidence_is_the_tools_softmax_against_the_anchors() -> None:
    emb = HashEmbedder(dim=256, model_name="hash-softmax")
    conf = AnchorConfidence(ANCHORS, tau=0.05)
    q = emb.embed(["latest stock price"])[0]
    scores = np.array([0.1, 0.05, 0.6])
    got = conf.confidence(scores, q, emb)
    anchors = emb.embed(ANCHORS)
    anchor_lse = log_sum_exp(anchors @ q, 0.05)
    assert float(got.max()) == pytest.approx(log_sum_exp(scores, 0.05) - anchor_lse, abs=1e-6)
    np.testing.assert_allclose(got - got[0], scores - scores[0], atol=1e-12)  # margins keep their units
    assert conf.confidence(np.zeros(0), q, emb).size == 0


def test_a_query_like_an_anchor_scores_lower_than_a_tool_query() -> None:
    emb = HashEmbedder(dim=256, model_name="hash-order")
    ranker = HybridRanker(embedder=emb, confidence="anchors", confidence_anchors=ANCHORS)
    _, tool = ranker.score_with_confidence(Query("latest stock price for a ticker"), CATALOG)
    _, chat = ranker.score_with_confidence(Query("write a poem about the sea"), CATALOG)
    assert float(tool.max()) > 0 > float(chat.max())
    gated = HybridRanker(embedder=emb, confidence="anchors", confidence_anchors=ANCHORS, min_score=0.0)
    assert gated.select(Query("write a poem about the sea"), CATALOG).abstained
    picked = gated.select(Query("latest stock price for a ticker", k=1), CATALOG)
    assert picked.selected == ("stocks",)


def test_anchors_are_embedded_once_per_process_and_model() -> None:
    emb = HashEmbedder(dim=128, model_name="hash-once")
    first = HybridRanker(embedder=emb, confidence="anchors", confidence_anchors=ANCHORS)
    second = HybridRanker(embedder=emb, confidence="anchors", confidence_anchors=ANCHORS)
    for ranker in (first, second, first):
        ranker.score_with_confidence(Query("stock price"), CATALOG)
    assert emb.texts.count(ANCHORS[0]) == 1
    other = HashEmbedder(dim=64, model_name="hash-once")  # same name, another size: embedded again
    HybridRanker(embedder=other, confidence="anchors", confidence_anchors=ANCHORS).score_with_confidence(
        Query("stock price"), CATALOG
    )
    assert other.texts.count(ANCHORS[0]) == 1


def test_warm_embeds_the_anchors_so_no_turn_pays_for_them() -> None:
    emb = HashEmbedder(dim=96, model_name="hash-warm")
    ranker = HybridRanker(embedder=emb, confidence="anchors", confidence_anchors=ANCHORS)
    ranker.warm(CATALOG)
    assert emb.texts.count(ANCHORS[0]) == 1
    embedded = len(emb.texts)
    ranker.score_with_confidence(Query("stock price"), CATALOG)
    assert emb.texts[embedded:] == ["stock price"]  # the turn embeds its query, nothing else
    cosine = HybridRanker(embedder=HashEmbedder(dim=96, model_name="hash-warm-cos"), confidence="cosine")
    cosine.warm(CATALOG)
    assert not any(a in cosine.dense.embedder.texts for a in NO_TOOL_ANCHORS)  # type: ignore[attr-defined]


def test_the_cosine_confidence_is_the_old_one() -> None:
    emb = HashEmbedder(dim=256)
    query = Query("latest stock price")
    _, conf = HybridRanker(embedder=emb, confidence="cosine").score_with_confidence(query, CATALOG)
    dense = EmbeddingRanker(embedder=emb).score(query, CATALOG)
    lexical = Bm25Ranker(normalize=True).score(query, CATALOG)
    np.testing.assert_allclose(conf, dense + 0.5 * lexical, atol=1e-9)
    assert not any(a in emb.texts for a in NO_TOOL_ANCHORS)


def test_the_anchor_confidence_has_no_bm25_term_unless_asked() -> None:
    emb = HashEmbedder(dim=256, model_name="hash-bm25")
    query = Query("latest stock price")
    conf = AnchorConfidence(ANCHORS)
    qvec = emb.embed([query.text])[0]
    dense = EmbeddingRanker(embedder=emb).score(query, CATALOG)
    lexical = Bm25Ranker(normalize=True).score(query, CATALOG)
    _, got = HybridRanker(embedder=emb, confidence="anchors", confidence_anchors=ANCHORS).score_with_confidence(
        query, CATALOG
    )
    np.testing.assert_allclose(got, conf.confidence(dense, qvec, emb), atol=1e-6)
    _, weighted = HybridRanker(
        embedder=emb, confidence="anchors", confidence_anchors=ANCHORS, confidence_bm25_weight=0.5
    ).score_with_confidence(query, CATALOG)
    np.testing.assert_allclose(weighted, conf.confidence(dense + 0.5 * lexical, qvec, emb), atol=1e-6)


def test_the_default_anchors_are_generic_requests() -> None:
    assert len(NO_TOOL_ANCHORS) == len(set(NO_TOOL_ANCHORS)) >= 100
    assert all(a.strip() == a and a for a in NO_TOOL_ANCHORS)
    assert AnchorConfidence().anchors == NO_TOOL_ANCHORS
    assert AnchorConfidence().describe() == {"anchors": len(NO_TOOL_ANCHORS), "tau": DEFAULT_TAU}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"anchors": []}, "non-empty"),
        ({"anchors": ["ok", "  "]}, "non-empty"),
        ({"anchors": "tell me a joke"}, "not one string"),
        ({"tau": 0.0}, "tau must be positive"),
        ({"tau": -1.0}, "tau must be positive"),
    ],
)
def test_bad_anchor_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnchorConfidence(**kwargs)  # type: ignore[arg-type]


def test_bad_confidence_options_are_refused() -> None:
    with pytest.raises(ValueError, match="'anchors' or 'cosine'"):
        HybridRanker(embedder=HashEmbedder(), confidence="softmax")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="confidence"):
        validate_options("hybrid", {"confidence": "softmax"})
    with pytest.raises(ValidationError, match="confidence_anchors"):
        validate_options("hybrid", {"confidence_anchors": []})
    validate_options("hybrid", {"confidence": "cosine", "confidence_bm25_weight": 0.5})


def test_the_registry_builds_a_hybrid_with_its_own_anchors() -> None:
    ranker = create_builtin_selector("hybrid", confidence="anchors", confidence_anchors=["hi", "thanks"])
    assert isinstance(ranker, HybridRanker)
    assert ranker.anchor_confidence is not None
    assert ranker.anchor_confidence.anchors == ("hi", "thanks")
    with pytest.raises(ConfigError, match="non-empty"):
        create_builtin_selector("hybrid", confidence="anchors", confidence_anchors=[""])


def test_abstains_on_generic_requests_with_the_default_model() -> None:
    tools = [
        Candidate("weather", "get_weather", "Get the current weather and the forecast for a city."),
        Candidate("email", "send_email", "Send an email to a recipient with a subject and a body."),
        Candidate("stocks", "stock_quote", "Look up the latest price of a stock by its ticker symbol."),
    ]
    ranker = HybridRanker(confidence="anchors", min_score=0.0)
    for text in ("Write a sonnet about my grandmother's knitting", "Thanks, that's all for today!"):
        assert ranker.select(Query(text), tools).abstained, text
    picked = ranker.select(Query("what is the weather in Oslo tomorrow?"), tools)
    assert picked.selected[0] == "weather"
