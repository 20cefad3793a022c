"""Tool and skill rankers use the fine-tuned model unless a model is named; everything else keeps MiniLM."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from shortlist._config_sections import EmbeddingProviderConfig
from shortlist._types import Candidate, Query
from shortlist.embeddings._default import (
    DEFAULT_MODEL_NAME,
    EMBEDDED_MODELS,
    TOOL_RANKING_MODEL,
    TOOLS_MODEL_NAME,
    DefaultEmbedder,
    default_embedder,
    for_tool_ranking,
)
from shortlist.embeddings._factory import build_embedder
from shortlist.rankers._embedding import EmbeddingRanker
from shortlist.rankers._hybrid import HybridRanker
from shortlist.selection._base import SelectorContext
from shortlist.testing import HashEmbedder


def test_the_tool_ranking_model_is_the_fine_tuned_one() -> None:
    assert TOOL_RANKING_MODEL == TOOLS_MODEL_NAME != DEFAULT_MODEL_NAME


def test_a_ranker_without_an_embedder_ranks_with_the_tools_model() -> None:
    assert EmbeddingRanker().embedder.model_name == TOOLS_MODEL_NAME
    assert HybridRanker().dense.embedder.model_name == TOOLS_MODEL_NAME
    assert default_embedder().model_name == DEFAULT_MODEL_NAME  # documents, memory, /v1/embeddings


def test_an_unnamed_default_embedder_becomes_its_tools_sibling_with_its_settings() -> None:
    base = DefaultEmbedder(batch_size=7, max_length=64, vector_cache=None)
    ranker = EmbeddingRanker(embedder=base)
    used = ranker.embedder
    assert isinstance(used, DefaultEmbedder) and used is not base
    assert used.model_name == TOOLS_MODEL_NAME and (used.batch_size, used.max_length) == (7, 64)
    assert used.vector_store() is None
    assert for_tool_ranking(base) is used  # one sibling per model, kept by the base
    assert EmbeddingRanker(embedder=base).embedder is used


@pytest.mark.parametrize("model", EMBEDDED_MODELS)
def test_a_named_model_is_used_as_given(model: str) -> None:
    named = DefaultEmbedder(model=model, vector_cache=None)
    assert for_tool_ranking(named) is named
    assert EmbeddingRanker(embedder=named).embedder is named


def test_other_providers_are_used_as_given() -> None:
    other = HashEmbedder(dim=16)
    assert for_tool_ranking(other) is other
    assert EmbeddingRanker(embedder=other).embedder is other


def test_config_type_default_without_a_model_ranks_tools_with_the_tools_model() -> None:
    ranker = EmbeddingRanker()
    ranker.init(SelectorContext(embeddings=build_embedder(EmbeddingProviderConfig(type="default"))))
    assert ranker.embedder.model_name == TOOLS_MODEL_NAME
    for name in ("all-MiniLM-L6-v2", DEFAULT_MODEL_NAME):
        ranker = EmbeddingRanker()
        ranker.init(SelectorContext(embeddings=build_embedder(EmbeddingProviderConfig(type="default", model=name))))
        assert ranker.embedder.model_name == DEFAULT_MODEL_NAME


def test_the_two_models_rank_with_different_vectors() -> None:
    text = ["book a flight to Rome next Friday"]
    tools = np.asarray(EmbeddingRanker().embedder.embed(text))
    minilm = np.asarray(DefaultEmbedder(model=DEFAULT_MODEL_NAME, vector_cache=None).embed(text))
    assert tools.shape == minilm.shape == (1, 384)
    assert float(tools[0] @ minilm[0]) < 0.999


def test_the_old_model_stays_selectable_for_ranking() -> None:
    cands = [Candidate(id="search_flights", description="Search flights between two airports on a date")]
    old = EmbeddingRanker(embedder=DefaultEmbedder(model=DEFAULT_MODEL_NAME, vector_cache=None))
    new = EmbeddingRanker()
    q = Query(text="book a flight to Rome")
    assert float(old.score(q, cands)[0]) != pytest.approx(float(new.score(q, cands)[0]), abs=1e-6)


def test_eval_embedder_choices_are_the_embedded_models() -> None:
    from shortlist.cli._eval import EMBEDDER_CHOICES
    from shortlist.cli._eval_inputs import with_embedder as _with_embedder

    assert EMBEDDER_CHOICES == EMBEDDED_MODELS
    args = argparse.Namespace(embedder=DEFAULT_MODEL_NAME)
    opts = _with_embedder("hybrid", {"top_k": 3}, args)
    assert opts["top_k"] == 3 and opts["embedder"].model_name == DEFAULT_MODEL_NAME
    assert _with_embedder("bm25", {"top_k": 3}, args) == {"top_k": 3}
    assert _with_embedder("hybrid", {}, argparse.Namespace(embedder=None)) == {}
