"""The persistent vector cache: hits across instances, misses embedded once, per-model keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shortlist.embeddings.cache import CachingEmbedder
from shortlist.testing import HashEmbedder


def test_vectors_survive_a_restart_and_only_misses_are_embedded(tmp_path: Path) -> None:
    db = tmp_path / "cache" / "vectors.sqlite"
    inner = HashEmbedder(dim=32)
    first = CachingEmbedder(inner, db)
    a = first.embed(["alpha beta", "gamma", "alpha beta"])
    assert inner.texts == ["alpha beta", "gamma"]
    first.close()

    inner2 = HashEmbedder(dim=32)
    second = CachingEmbedder(inner2, db)
    b = second.embed(["gamma", "alpha beta", "delta"])
    assert inner2.texts == ["delta"]
    np.testing.assert_allclose(b[0], a[1])
    np.testing.assert_allclose(b[1], a[0])
    assert (second.hits, second.misses) == (2, 1)


def test_models_do_not_share_vectors(tmp_path: Path) -> None:
    db = tmp_path / "v.sqlite"
    CachingEmbedder(HashEmbedder(dim=8, model_name="m1"), db).embed(["x", "y"])
    other = HashEmbedder(dim=16, model_name="m2")
    out = CachingEmbedder(other, db).embed(["x", "y"])
    assert out.shape == (2, 16) and other.texts == ["x", "y"]


def test_single_texts_bypass_the_cache(tmp_path: Path) -> None:
    inner = HashEmbedder()
    cache = CachingEmbedder(inner, tmp_path / "v.sqlite")
    cache.embed(["query"])
    cache.embed(["query"])
    assert inner.texts == ["query", "query"] and cache.hits == 0


def test_ranker_and_factory_options(tmp_path: Path) -> None:
    from shortlist.config import EmbeddingProviderConfig
    from shortlist.embeddings.factory import build_embedder
    from shortlist.rankers.embedding import EmbeddingRanker
    from shortlist.selection.base import SelectorContext
    from shortlist.types import Candidate, Query

    db = str(tmp_path / "v.sqlite")
    cands = [Candidate("a", "a", "send email"), Candidate("b", "b", "weather forecast")]
    inner = HashEmbedder()
    ranker = EmbeddingRanker(vector_cache=db)
    ranker.init(SelectorContext(embeddings=inner))
    assert isinstance(ranker.embedder, CachingEmbedder) and ranker.embedder.inner is inner
    ranker.select(Query("email"), cands)
    again = HashEmbedder()
    EmbeddingRanker(embedder=again, vector_cache=db).select(Query("email"), cands)
    assert again.texts == ["email"]  # the catalog came from the cache
    built = build_embedder(EmbeddingProviderConfig(type="default", additional_config={"vector_cache": db}))
    assert isinstance(built, CachingEmbedder)
