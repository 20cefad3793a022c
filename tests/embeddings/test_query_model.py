"""The int8 query model: queries embedded on it, close to the float model's vectors, each alone; derived once
and kept with its record; a float fallback, with an event, when it cannot be derived."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from shortlist._events import Event, event_hooks
from shortlist.embeddings import _query_model
from shortlist.embeddings._cache import ENV_CACHE_DIR
from shortlist.embeddings._default import (
    TOOLS_MODEL_NAME,
    DefaultEmbedder,
    ModelGraphRejected,
    QueryModelFallback,
)
from shortlist.errors import UsageError

QUERIES = [
    "send an email to my manager about the delayed invoice",
    "what is the weather in Paris tomorrow",
    "book a flight to Rome and also send an email to Sam",
    "list the files in my documents folder",
]
TOOLS = [
    "send_email: Send an email to a recipient with a subject and a body.",
    "get_weather: Get the current weather and the forecast for a city.",
    "book_flight: Book a flight between two airports on a date.",
    "ls: List the files and folders of a directory.",
]


def _fresh(**kwargs: object) -> DefaultEmbedder:
    options: dict[str, object] = {"query_precision": "int8", **kwargs}
    return DefaultEmbedder(model=TOOLS_MODEL_NAME, vector_cache=None, query_cache_size=0, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module", autouse=True)
def derived() -> None:
    """The int8 query model derived once into the session's cache directory (not charged to one test)."""
    _fresh().load()


def _int8_files(cache: Path) -> list[Path]:
    return sorted((cache / "models").glob("*-query-int8-*.onnx"))


def test_queries_run_on_the_int8_model_close_to_the_float_one() -> None:
    int8 = _fresh().embed_queries(QUERIES)
    floats = _fresh(query_precision="float32").embed_queries(QUERIES)
    assert int8.shape == floats.shape == (len(QUERIES), 384) and int8.dtype == np.float32
    cosines = np.sum(int8 * floats, axis=1)
    assert np.all(cosines > 0.97) and np.all(cosines < 0.99999), cosines  # another model, the same space
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    catalog = _fresh().embed(TOOLS)  # a catalog stays on the float model
    np.testing.assert_array_equal(catalog, _fresh(query_precision="float32").embed(TOOLS))
    assert list(np.argmax(int8 @ catalog.T, axis=1)) == list(np.argmax(floats @ catalog.T, axis=1)) == [0, 1, 2, 3]


def test_float32_precision_is_the_float_model_on_the_query_path() -> None:
    emb = _fresh(query_precision="float32")
    np.testing.assert_array_equal(emb.embed_queries(QUERIES[:1]), emb.embed(QUERIES[:1]))


def test_a_querys_vector_does_not_depend_on_what_runs_beside_it() -> None:
    # Activations are quantised with one scale over the whole input: a text is run alone (no padding, no
    # batch-mates), so its vector is the same alone, among a query's parts, or among concurrent queries.
    alone = {q: _fresh().embed_queries([q])[0] for q in QUERIES}
    together = _fresh().embed_queries(QUERIES)
    for q, vec in zip(QUERIES, together, strict=True):
        np.testing.assert_array_equal(vec, alone[q])
    shared = _fresh(query_concurrency=1)
    got: dict[int, np.ndarray] = {}

    def one(i: int) -> None:
        got[i] = shared.embed_queries([QUERIES[i % len(QUERIES)]])[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 12
    for i, vec in got.items():
        np.testing.assert_array_equal(vec, alone[QUERIES[i % len(QUERIES)]])


def test_the_lru_keeps_each_precisions_vector_apart(tmp_path: Path) -> None:
    from shortlist.embeddings._cache import VectorStore

    store = VectorStore(tmp_path / "v.sqlite3")
    emb = DefaultEmbedder(model=TOOLS_MODEL_NAME, vector_cache=store, query_precision="int8")
    query = emb.embed_queries(QUERIES[:1])
    single = emb.embed(QUERIES[:1])  # a single text through embed() is the float model's, as before
    np.testing.assert_array_equal(single, _fresh(query_precision="float32").embed(QUERIES[:1]))
    assert not np.array_equal(query, single)
    np.testing.assert_array_equal(emb.embed_queries(QUERIES[:1]), query)
    emb.embed_queries(QUERIES)
    assert store.info().vectors == 0  # a query's texts never reach the catalog's store


def test_the_default_is_the_float_model_and_a_config_can_choose_int8() -> None:
    from shortlist._config_sections import EmbeddingProviderConfig
    from shortlist.embeddings._factory import build_embedder
    from shortlist.errors import ConfigError

    assert DefaultEmbedder().query_precision == "float32"
    chosen = build_embedder(EmbeddingProviderConfig(type="default", additional_config={"query_precision": "int8"}))
    assert isinstance(chosen, DefaultEmbedder) and chosen.query_precision == "int8"
    assert chosen.with_model(TOOLS_MODEL_NAME).query_precision == "int8"
    with pytest.raises(ConfigError, match="query_precision must be one of float32, int8"):
        build_embedder(EmbeddingProviderConfig(type="default", additional_config={"query_precision": "int4"}))


def test_an_unknown_precision_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="query_precision must be one of float32, int8"):
        DefaultEmbedder(query_precision="fp16")


def _fallback_events(seen: list[Event]) -> list[QueryModelFallback]:
    return [e for e in seen if isinstance(e, QueryModelFallback)]


def test_without_onnx_int8_is_an_error_naming_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from shortlist._install import pip_install
    from shortlist.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    for call in (lambda e: e.load(), lambda e: e.embed_queries(QUERIES[:2]), lambda e: e.embed_queries(QUERIES[:1])):
        with pytest.raises(MissingDependencyError) as caught:  # no cache directory: nothing kept to load
            call(_fresh(optimized_model_cache=False))
        assert pip_install("int8") in str(caught.value) and "query_precision float32" in str(caught.value)
    floats = _fresh(query_precision="float32", optimized_model_cache=False)
    assert floats.embed_queries(QUERIES[:1]).shape == (1, 384)  # the float model needs no onnx


def test_a_kept_query_model_loads_without_onnx(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _fresh().embed_queries(QUERIES[:1])  # the session's cache directory holds the derived file
    monkeypatch.setitem(sys.modules, "onnx", None)
    seen: list[Event] = []
    with event_hooks(seen.append):
        np.testing.assert_array_equal(_fresh().embed_queries(QUERIES[:1]), expected)
    assert not _fallback_events(seen)


def test_a_failed_derivation_falls_back_to_the_float_model_with_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(ort: object, model_path: Path, out: Path, rows: object) -> None:
        raise RuntimeError("quantiser refused the graph")

    monkeypatch.setattr(_query_model, "_derive", refused)
    seen: list[Event] = []
    with event_hooks(seen.append):
        emb = _fresh(optimized_model_cache=False)
        emb.load()
        got = emb.embed_queries(QUERIES[:1])
    events = _fallback_events(seen)
    assert [(e.reason, e.error) for e in events] == [("derive_failed", "RuntimeError: quantiser refused the graph")]
    floats = _fresh(query_precision="float32", optimized_model_cache=False).embed_queries(QUERIES[:1])
    np.testing.assert_array_equal(got, floats)


@pytest.mark.slow  # derives the int8 model three times: about 2 s of CPU each
def test_the_query_model_is_derived_once_kept_with_its_record_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(ENV_CACHE_DIR, str(cache))
    first = _fresh().embed_queries(QUERIES)
    [kept] = _int8_files(cache)
    record = json.loads(kept.with_name(kept.name + ".sha256").read_text())
    assert {"sha256", "source_sha256", "onnxruntime", "onnx"} <= set(record)
    assert not [p for p in (cache / "models").iterdir() if p.name.startswith(".") or p.is_dir()]  # no scratch left
    assert not [p for p in Path(tempfile.gettempdir()).glob("shortlist-query-model-*")]

    def never(ort: object, model_path: Path, out: Path, rows: object) -> None:
        raise AssertionError("derived again")

    with monkeypatch.context() as m:
        m.setattr(_query_model, "_derive", never)
        np.testing.assert_array_equal(_fresh().embed_queries(QUERIES), first)  # the kept file, loaded

    kept.write_bytes(b"not an onnx graph")  # damaged: rejected, made again, the same vectors
    seen: list[Event] = []
    with event_hooks(seen.append):
        np.testing.assert_array_equal(_fresh().embed_queries(QUERIES), first)
    assert [(e.reason, e.path) for e in seen if isinstance(e, ModelGraphRejected)] == [("checksum", str(kept))]
    assert not _fallback_events(seen)

    monkeypatch.setenv(ENV_CACHE_DIR, "off")  # no cache directory: derived in memory, the same bytes
    np.testing.assert_array_equal(_fresh().embed_queries(QUERIES), first)
    other = tmp_path / "other"
    monkeypatch.setenv(ENV_CACHE_DIR, str(other))
    np.testing.assert_array_equal(_fresh(optimized_model_cache=False).embed_queries(QUERIES), first)
    assert not other.exists() or not _int8_files(other)


def test_a_rankers_warm_up_loads_the_query_path() -> None:
    # The first turn under a deadline pays only for its query: the query session (and, once per machine,
    # the int8 model's derivation) is start-up, done by warm() with the catalog's vectors.
    from shortlist._types import Candidate
    from shortlist.rankers import HybridRanker

    tools = [Candidate(t.split(":")[0], t.split(":")[0], t.split(": ")[1]) for t in TOOLS]
    for precision in ("int8", "float32"):
        emb = _fresh(query_precision=precision)
        assert not emb._sessions
        HybridRanker(embedder=emb).warm(tools)
        assert (emb.intra_op_num_threads, precision) in emb._sessions
