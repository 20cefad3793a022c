"""Bm25Ranker: scores against a reference formula, tokenisation, the content-keyed index cache, examples."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._registry import create_builtin_selector
from shortlist.rankers._text import Analyzer, candidate_fields, parameter_text, split_words
from shortlist.selection._narrowing import NarrowingPolicy, narrow

CATALOG = (
    Candidate("get_weather", description="Get the current weather forecast for a city"),
    Candidate("send_email", description="Send an email message to a recipient; email delivery"),
    Candidate("createCalendarEvent", description="Create an event in the calendar"),
    Candidate(
        "stock.price",
        description="Latest price of a stock",
        parameters={"type": "object", "properties": {"ticker": {"type": "string", "description": "Exchange symbol"}}},
    ),
    Candidate("translate_text", description="Translate text between languages"),
)


def reference_bm25(query: list[str], docs: list[list[str]], k1: float, b: float) -> list[float]:
    """Okapi BM25 with Lucene's idf, ln(1 + (N - df + 0.5) / (df + 0.5)), and tf / (tf + k1 (1 - b + b dl/avgdl))."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in query:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        out.append(s)
    return out


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (1.5, 0.3), (0.9, 1.0)])
def test_scores_match_reference_formula(k1: float, b: float) -> None:
    ranker = Bm25Ranker(k1=k1, b=b)
    analyzer = ranker.analyzer
    docs = []
    for c in CATALOG:
        f = candidate_fields(c)
        docs.append(analyzer.tokens(f["name"]) + analyzer.tokens(f["description"] + "\n" + f["parameters"]))
    for text in ("send an email about the weather", "stock ticker symbol price", "calendar events", "zzz qqq"):
        q = analyzer.tokens(text)
        got = ranker.score(Query(text), CATALOG)
        np.testing.assert_allclose(got, reference_bm25(q, docs, k1, b), rtol=1e-5, atol=1e-6)


def test_scores_agree_with_rank_bm25_ordering() -> None:
    rank_bm25 = pytest.importorskip("rank_bm25")
    ranker = Bm25Ranker()
    docs = [ranker.analyzer.tokens(f"{c.name} {c.description} {parameter_text(c.parameters)}") for c in CATALOG]
    ref = rank_bm25.BM25Okapi(docs)
    text = "weather forecast for my city"
    ours = ranker.score(Query(text), CATALOG)
    theirs = ref.get_scores(ranker.analyzer.tokens(text))
    assert int(np.argmax(ours)) == int(np.argmax(theirs)) == 0


def test_every_candidate_gets_a_score_zero_without_overlap() -> None:
    scores = Bm25Ranker().score(Query("weather"), CATALOG)
    assert scores.shape == (len(CATALOG),)
    assert scores[0] > 0
    assert np.all(scores[1:] == 0)


def test_split_words_handles_identifiers() -> None:
    assert split_words("get_current_weather") == ["get", "current", "weather"]
    assert split_words("createCalendarEvent") == ["create", "calendar", "event"]
    assert split_words("HTTPServer.fetchURL") == ["http", "server", "fetch", "url"]
    assert split_words("fs.read-file/v2, OK!") == ["fs", "read", "file", "v2", "ok"]


def test_analyzer_stems_and_drops_stopwords() -> None:
    assert Analyzer(stopwords="en").tokens("The forecasts are running") == ["forecast", "run"]
    assert Analyzer(stopwords="en_plus").tokens("Can you find my emails") == ["find", "email"]
    assert Analyzer(stopwords="none", stem=False).tokens("The Emails") == ["the", "emails"]
    with pytest.raises(ValueError, match="unknown stopwords"):
        Analyzer(stopwords="klingon")


def test_parameter_names_and_descriptions_are_indexed() -> None:
    ranker = Bm25Ranker()
    top = ranker.select(Query("exchange ticker", k=1), CATALOG)
    assert top.selected == ("stock.price",)
    nested = parameter_text(
        {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"properties": {"sku": {"description": "code"}}}}},
        }
    )
    assert nested.split() == ["items", "sku", "code"]


def test_stable_catalog_is_indexed_once_even_as_new_lists() -> None:
    ranker = Bm25Ranker()
    for text in ("weather", "email", "stock"):
        ranker.select(Query(text), list(CATALOG))  # a new list each turn, same candidates
    assert ranker.index_builds == 1
    # Same content in new objects (a reloaded catalog): served by the content key, no rebuild.
    reloaded = [Candidate(c.id, c.name, c.description, c.metadata, c.parameters) for c in CATALOG]
    ranker.select(Query("weather"), reloaded)
    assert ranker.index_builds == 1


def test_changed_description_is_reindexed() -> None:
    ranker = Bm25Ranker()
    assert ranker.select(Query("currency", k=1), CATALOG).selected != ("translate_text",)
    changed = [*CATALOG[:4], Candidate("translate_text", description="Convert a currency amount")]
    assert ranker.select(Query("currency", k=1), changed).selected == ("translate_text",)
    assert ranker.index_builds == 2
    # The old catalog is still in the LRU.
    ranker.select(Query("weather"), CATALOG)
    assert ranker.index_builds == 2


def test_lru_evicts_old_indexes() -> None:
    ranker = Bm25Ranker(cache_size=1)
    other = [Candidate("a", description="alpha"), Candidate("b", description="beta")]
    ranker.score(Query("x"), CATALOG)
    ranker.score(Query("x"), other)
    ranker.score(Query("x"), CATALOG)
    assert ranker.index_builds == 3


@pytest.mark.parametrize("mode", ["field", "merge"])
def test_examples_raise_the_right_tool(mode: str) -> None:
    query = Query("say hello in french", k=1)
    ranker = Bm25Ranker(examples_mode=mode)  # type: ignore[arg-type]
    assert ranker.select(query, CATALOG).selected != ("translate_text",)
    enriched = [
        c.with_examples(["how do I say thanks in french", "say goodbye in italian"]) if c.id == "translate_text" else c
        for c in CATALOG
    ]
    assert ranker.select(query, enriched).selected == ("translate_text",)


def test_min_score_abstains_on_an_unrelated_query() -> None:
    ranker = Bm25Ranker(min_score=0.5)
    sel = ranker.select(Query("tell me a joke about pirates"), CATALOG)
    assert sel.abstained and sel.selected == ()
    turn = narrow(ranker, Query("tell me a joke about pirates"), CATALOG, NarrowingPolicy(on_abstain="pins"))
    assert turn.ids == () and turn.abstained
    assert ranker.select(Query("weather forecast"), CATALOG).selected[0] == "get_weather"


def test_registry_builds_it_with_plain_options() -> None:
    sel = create_builtin_selector("bm25", k1=1.0, b=0.5, min_score=2.0, top_k=3)
    assert isinstance(sel, Bm25Ranker)
    assert (sel.k1, sel.b, sel.top_k) == (1.0, 0.5, 3)
    assert sel.abstention is not None and sel.abstention.min_score == 2.0


def test_empty_inputs() -> None:
    ranker = Bm25Ranker()
    assert ranker.score(Query("x"), []).shape == (0,)
    assert np.all(ranker.score(Query(""), CATALOG) == 0)
    assert np.all(ranker.score(Query("weather"), [Candidate("blank")]) >= 0)


def test_normalized_scores_keep_the_ranking_and_fall_below_one() -> None:
    raw, norm = Bm25Ranker(), Bm25Ranker(normalize=True)
    for text in ("send an email about the weather", "stock ticker", "weather zzzunknownzzz"):
        a, b = raw.score(Query(text), CATALOG), norm.score(Query(text), CATALOG)
        assert np.all((b >= 0) & (b < 1))
        assert list(np.argsort(-a, kind="stable")) == list(np.argsort(-b, kind="stable"))
    # An unknown word lowers the normalised score of the same match (less of the query is covered).
    known = norm.score(Query("weather"), CATALOG)[0]
    assert norm.score(Query("weather zzzunknownzzz"), CATALOG)[0] < known
    assert raw.score(Query("weather zzzunknownzzz"), CATALOG)[0] == pytest.approx(
        raw.score(Query("weather"), CATALOG)[0]
    )
