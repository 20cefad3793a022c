"""Local selectors: newest-first window, relevance with BM25 (checked against bm25s), tie-breaks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import bm25s
import numpy as np
import pytest
import Stemmer
from reduction_doubles import WordCounter

from shortlist.reduction import ContextFragment, ReductionStage, newest_first_selector, relevance_selector
from shortlist.reduction._contract import ContextSelectionCall, ExecutionContext
from shortlist.reduction._fragments import ContextSelectionCandidate
from shortlist.reduction._local import Bm25Scorer, ranker_scorer


def make_call(texts: list[str], keep_words: int) -> ContextSelectionCall:
    counter = WordCounter()
    frags = [ContextFragment(id=f"f{i}", step_id=f"s{i}", kind="assistant", text=t) for i, t in enumerate(texts)]
    cands = [
        ContextSelectionCandidate(
            step_id=f"s{i}", excerpt=t[:50], tokens=counter.count(t), chars=len(t), kind="assistant", position=i
        )
        for i, t in enumerate(texts)
    ]
    current = sum(c.tokens or 0 for c in cands)

    async def no_model(**_: object) -> object:
        raise AssertionError("local selectors never call the model")

    return ContextSelectionCall(
        stage_id="t",
        candidates=cands,
        fragments=frags,
        current_tokens=current,
        required_reduction_tokens=current - keep_words,
        current_chars=sum(c.chars for c in cands),
        required_reduction_chars=0,
        remaining_calls=lambda: 0,
        call_model=no_model,
    )


async def test_newest_first_keeps_a_contiguous_recent_window() -> None:
    call = make_call(["a b", "c d e f g h", "i j", "k l"], keep_words=6)
    kept = await newest_first_selector().select(call, ExecutionContext())
    assert kept == ["s3", "s2"]  # s1 (6 words) does not fit and stops the window; s0 is not reached


async def test_relevance_keeps_relevant_steps_and_skips_large_irrelevant_ones() -> None:
    texts = [
        "the database password rotated on monday to a new vault secret",
        "weather is sunny " * 5,
        "compiled the frontend bundle",
        "ran unit tests all green",
    ]
    selector = relevance_selector(query="which vault secret holds the database password?")
    kept = await selector.select(make_call(texts, keep_words=16), ExecutionContext())
    assert kept[0] == "s0"
    assert "s1" not in kept  # irrelevant and too large once s0 is kept
    assert set(kept) == {"s0", "s3"}  # then the newest that still fit


async def test_relevance_breaks_ties_by_recency_and_uses_the_stage_goal() -> None:
    frags = [
        ContextFragment(id="sys", kind="system", text="sys"),
        ContextFragment(id="a", kind="assistant", text="alpha beta"),
        ContextFragment(id="b", kind="assistant", text="gamma delta"),
        ContextFragment(id="c", kind="assistant", text="alpha epsilon"),
        ContextFragment(id="d", kind="assistant", text="zeta eta"),
        ContextFragment(id="u", kind="user", text="tell me about alpha"),
    ]
    stage = ReductionStage(max_tokens=7, counter=WordCounter(), selector=relevance_selector(), keep_last_steps=0)
    result = await stage.reduce(frags)
    # Room for one 2-word step: "a" and "c" score the same for "alpha"; the newer one wins.
    assert [f.id for f in result.fragments] == ["sys", "c", "u"]
    result = await stage.reduce(frags, goal="tell me about zeta")
    assert [f.id for f in result.fragments] == ["sys", "d", "u"]


async def test_relevance_without_query_degrades_to_newest_that_fit() -> None:
    call = make_call(["a b", "c d e f g h", "i j", "k l"], keep_words=6)
    kept = await relevance_selector(query="").select(call, ExecutionContext())
    assert kept == ["s3", "s2", "s0"]  # greedy by recency, skipping the step that does not fit


async def test_custom_scorer_is_used_and_checked() -> None:
    call = make_call(["x", "y", "z"], keep_words=1)
    kept = await relevance_selector(query="q", scorer=lambda q, docs: [0.0, 5.0, 1.0]).select(call, ExecutionContext())
    assert kept == ["s1"]
    with pytest.raises(ValueError, match="scores"):
        await relevance_selector(query="q", scorer=lambda q, docs: [1.0]).select(call, ExecutionContext())


def test_bm25_matches_bm25s_reference_scores() -> None:
    corpus = [
        "The deployment failed because the database migration timed out",
        "Users reported slow page loads after the cache was flushed",
        "We rotated the API keys and updated the vault secrets",
        "Running migrations on the staging database took three minutes",
        "The frontend bundle size grew by twenty percent",
        "Database connection pool exhausted during peak traffic",
    ]
    query = "why did the database migrations time out"
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    q_tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False)[0]
    reference = retriever.get_scores(q_tokens)
    ours = np.array(Bm25Scorer()(query, corpus))
    assert np.allclose(ours, reference, rtol=1e-4, atol=1e-5)
    assert int(np.argmax(ours)) in (0, 3)


def test_bm25_edge_cases() -> None:
    scorer = Bm25Scorer()
    assert scorer("anything", []) == []
    assert scorer("the and of", ["the cat"]) == [0.0]  # only stop words in the query
    assert scorer("running", ["he runs daily", "nothing here"])[0] > 0  # stemming matches runs/running


async def test_a_ranker_from_the_rankers_package_can_score_steps() -> None:
    from shortlist.rankers import _bm25 as bm25

    texts = ["the kafka consumer lives in ingest/consumer.py", "weather report sunny", "unit tests green"]
    selector = relevance_selector(query="where is the kafka consumer", scorer=ranker_scorer(bm25.Bm25Ranker()))
    kept = await selector.select(make_call(texts, keep_words=7), ExecutionContext())
    assert kept[0] == "s0"


def test_ranker_scorer_passes_query_and_candidates() -> None:
    seen: list[tuple[str, list[str]]] = []

    class Fake:
        def score(self, query: object, candidates: Sequence[Any]) -> list[float]:
            seen.append((query.text, [c.description for c in candidates]))  # type: ignore[attr-defined]
            return [1.0, 2.0]

    assert ranker_scorer(Fake())("q", ["a", "b"]) == [1.0, 2.0]
    assert seen == [("q", ["a", "b"])]
