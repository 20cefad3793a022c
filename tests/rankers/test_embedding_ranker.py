"""The cosine ranker: numpy reference, the (id, description) cache, K caps, provider override, examples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.embeddings._base import Embedder, FunctionEmbedder, Vectors
from shortlist.errors import EmbeddingError
from shortlist.rankers._base import Abstention
from shortlist.rankers._embedding import EmbeddingRanker
from shortlist.selection._base import SelectorContext
from shortlist.testing import HashEmbedder

CATALOG = [
    Candidate("weather", "get_weather", "current weather and forecast for a city"),
    Candidate("email", "send_email", "send an email message to a recipient"),
    Candidate("calendar", "create_event", "create a calendar event meeting"),
    Candidate("stocks", "stock_quote", "latest stock price quote for a ticker"),
]


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_scores_match_numpy_cosine() -> None:
    emb = HashEmbedder(dim=128)
    ranker = EmbeddingRanker(embedder=emb, use_examples=False)
    query = "what is the weather forecast in Paris"
    got = ranker.score(Query(query), CATALOG)
    q = unit(emb.vector(query))
    want = [float(unit(emb.vector(f"{c.name}: {c.description}")) @ q) for c in CATALOG]
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert ranker.select(Query(query), CATALOG).selected[0] == "weather"


def test_one_embed_call_per_turn_on_a_stable_catalog() -> None:
    emb = HashEmbedder()
    ranker = EmbeddingRanker(embedder=emb)
    ranker.select(Query("send an email"), CATALOG)
    assert emb.calls == 2  # one batch for every candidate, one for the query
    assert len(emb.texts) == len(CATALOG) + 1
    ranker.select(Query("weather please"), CATALOG)
    ranker.select(Query("a meeting"), list(CATALOG))  # a new list of the same candidates
    assert emb.calls == 4


def test_changed_description_is_re_embedded_renamed_is_not() -> None:
    emb = HashEmbedder()
    ranker = EmbeddingRanker(embedder=emb)
    ranker.select(Query("x"), CATALOG)
    before = len(emb.texts)
    renamed = [Candidate("weather", "weather_v2", CATALOG[0].description), *CATALOG[1:]]
    ranker.select(Query("y"), renamed)
    assert emb.texts[before:] == ["y"]
    changed = [Candidate("weather", "get_weather", "hourly rain radar"), *CATALOG[1:]]
    ranker.select(Query("z"), changed)
    assert emb.texts[before + 1 :] == ["get_weather: hourly rain radar", "z"]


def test_k_and_top_k_caps() -> None:
    emb = HashEmbedder()
    assert len(EmbeddingRanker(embedder=emb).select(Query("email", k=2), CATALOG).selected) == 2
    assert len(EmbeddingRanker(embedder=emb, top_k=1).select(Query("email"), CATALOG).selected) == 1
    assert len(EmbeddingRanker(embedder=emb).select(Query("email", k=50), CATALOG).selected) == len(CATALOG)
    assert len(EmbeddingRanker(embedder=emb).select(Query("email"), CATALOG).selected) == len(CATALOG)


def test_empty_candidates_make_no_call() -> None:
    emb = HashEmbedder()
    sel = EmbeddingRanker(embedder=emb).select(Query("anything"), [])
    assert sel.selected == () and emb.calls == 0


def test_init_provider_overrides_the_constructor() -> None:
    ctor, shared = HashEmbedder(model_name="ctor"), HashEmbedder(model_name="shared")
    ranker = EmbeddingRanker(embedder=ctor)
    ranker.init(SelectorContext(embeddings=shared))
    ranker.select(Query("send email"), CATALOG)
    assert ctor.calls == 0 and shared.calls == 2
    assert ranker.embedder is shared


def test_init_without_any_provider_uses_the_default_model() -> None:
    ranker = EmbeddingRanker()
    ranker.init(SelectorContext())
    from shortlist.embeddings._default import DefaultEmbedder

    assert isinstance(ranker.embedder, DefaultEmbedder)


def test_embedding_errors_are_raised() -> None:
    def boom(texts: Sequence[str]) -> Vectors:
        raise RuntimeError("provider down")

    with pytest.raises(EmbeddingError, match="provider down"):
        EmbeddingRanker(embedder=FunctionEmbedder(boom)).select(Query("x"), CATALOG)


def test_a_wrong_vector_count_is_an_error() -> None:
    emb = FunctionEmbedder(lambda texts: np.ones((1, 8)))
    with pytest.raises(EmbeddingError, match="expected 4 vectors"):
        EmbeddingRanker(embedder=emb).select(Query("x"), CATALOG)


def test_dimension_mismatch_between_query_and_catalog_is_an_error() -> None:
    class Shifty(Embedder):
        def embed_batch(self, texts: Sequence[str]) -> Vectors:
            return np.ones((len(texts), 8 if len(texts) > 1 else 4), dtype=np.float32)

    with pytest.raises(EmbeddingError, match="dims"):
        EmbeddingRanker(embedder=Shifty()).select(Query("x"), CATALOG)


def test_examples_pull_a_candidate_up_and_are_embedded_once() -> None:
    emb = HashEmbedder(dim=256)
    plain = EmbeddingRanker(embedder=emb)
    query = Query("remind me about the dentist tomorrow")
    assert plain.select(query, CATALOG).selected[0] != "calendar"
    taught = [c.with_examples(["remind me about the dentist"]) if c.id == "calendar" else c for c in CATALOG]
    ranker = EmbeddingRanker(embedder=emb)
    assert ranker.select(query, taught).selected[0] == "calendar"
    calls = len(emb.texts)
    more = [c.with_examples([*c.examples, "book the team sync"]) if c.id == "calendar" else c for c in taught]
    ranker.select(query, more)
    assert emb.texts[calls:] == ["book the team sync", query.text]  # only the new example


def test_example_score_formula() -> None:
    emb = HashEmbedder(dim=256)
    exs = ("dentist appointment tomorrow", "team meeting on friday", "lunch with anna")
    cands = [CATALOG[0], CATALOG[2].with_examples(exs)]
    ranker = EmbeddingRanker(embedder=emb, example_weight=0.6, example_top=2, example_aggregation="top_mean")
    query = "dentist meeting"
    got = ranker.score(Query(query), cands)
    q = unit(emb.vector(query))
    desc = float(unit(emb.vector(f"{cands[1].name}: {cands[1].description}")) @ q)
    sims = sorted((float(unit(emb.vector(e)) @ q) for e in exs), reverse=True)
    want = max(desc, 0.4 * desc + 0.6 * (sims[0] + sims[1]) / 2)
    assert got[1] == pytest.approx(want, abs=1e-6)
    off = EmbeddingRanker(embedder=emb, use_examples=False).score(Query(query), cands)
    assert off[1] == pytest.approx(desc, abs=1e-6)


def test_log_sum_exp_aggregation_formula() -> None:
    emb = HashEmbedder(dim=256)
    exs = ("dentist appointment tomorrow", "team meeting on friday", "lunch with anna")
    other = ("weather in oslo",)
    cands = [CATALOG[0].with_examples(other), CATALOG[2].with_examples(exs)]
    ranker = EmbeddingRanker(embedder=emb, example_weight=0.6, example_tau=0.05)
    assert ranker.example_aggregation == "lse"  # the default
    query = "dentist meeting"
    got = ranker.score(Query(query), cands)
    q = unit(emb.vector(query))
    for i, group in ((0, other), (1, exs)):
        desc = float(unit(emb.vector(f"{cands[i].name}: {cands[i].description}")) @ q)
        sims = np.array([float(unit(emb.vector(e)) @ q) for e in group])
        lse = sims.max() + 0.05 * np.log(np.exp((sims - sims.max()) / 0.05).sum())
        assert got[i] == pytest.approx(max(desc, 0.4 * desc + 0.6 * lse), abs=1e-6)


def test_log_sum_exp_is_a_soft_max() -> None:
    # One example: exactly its cosine. Two identical examples: the max plus tau * log 2.
    vecs = {"q": [1.0, 0.0], "a": [0.6, 0.8], "d": [0.0, 1.0]}
    emb = FunctionEmbedder(lambda texts: np.array([vecs[t.split(": ")[-1]] for t in texts]))
    one = [Candidate("t", "t", "d", examples=("a",))]
    two = [Candidate("t", "t", "d", examples=("a", "a "))]
    vecs["a "] = vecs["a"]
    r = EmbeddingRanker(embedder=emb, example_weight=1.0, example_tau=0.1)
    assert r.score(Query("q"), one)[0] == pytest.approx(0.6, abs=1e-6)
    assert r.score(Query("q"), two)[0] == pytest.approx(0.6 + 0.1 * np.log(2), abs=1e-6)


def test_bad_aggregation_options_are_rejected() -> None:
    with pytest.raises(ValueError):
        EmbeddingRanker(example_aggregation="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EmbeddingRanker(example_tau=0)


def test_abstains_on_an_unrelated_query_with_the_default_model() -> None:
    ranker = EmbeddingRanker(abstention=Abstention(min_score=0.25))
    tools = [
        Candidate("weather", "get_weather", "Get the current weather and the forecast for a city."),
        Candidate("email", "send_email", "Send an email to a recipient with a subject and a body."),
        Candidate("stocks", "stock_quote", "Look up the latest price of a stock by its ticker symbol."),
    ]
    unrelated = ranker.select(Query("Write a sonnet about my grandmother's knitting"), tools)
    assert unrelated.abstained and unrelated.selected == ()
    related = ranker.select(Query("what is the weather in Oslo tomorrow?"), tools)
    assert not related.abstained and related.selected[0] == "weather"


def test_options_from_yaml_are_plain_values() -> None:
    ranker = EmbeddingRanker(name="emb", top_k=3, min_score=0.3, min_margin=0.05, example_weight=0.5)
    assert ranker.abstention == Abstention(min_score=0.3, min_margin=0.05)
    assert EmbeddingRanker(abstention={"min_score": 0.2}).abstention == Abstention(min_score=0.2)
    with pytest.raises(ValueError):
        EmbeddingRanker(example_weight=2.0)


@pytest.mark.parametrize(("rows", "texts"), [(1000, 3), (1000, 1), (1000, 0), (0, 2), (7, 5)])
def test_matvecs_is_matvec_per_vector_bit_for_bit(rows: int, texts: int) -> None:
    from shortlist.embeddings._base import matvec, matvecs

    rng = np.random.default_rng(rows + texts)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    vectors = rng.standard_normal((texts, 384)).astype(np.float32)
    got = matvecs(matrix, vectors)
    assert got.shape == (texts, rows) and got.dtype == np.float32 and got.flags.c_contiguous
    for j in range(texts):
        np.testing.assert_array_equal(got[j], matvec(matrix, vectors[j]))  # the same bits, not just close
