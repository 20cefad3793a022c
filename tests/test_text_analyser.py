"""Golden outputs of shortlist's text analysis: no token, score or vector moves unless meant to.

``tests/data/text_goldens.json`` was recorded by ``tests/data/make_text_goldens.py`` from the
tokenisers, BM25 paths and hashing embedders as they were before the single analyser; every
entry is recomputed here and compared exactly (floats bit for bit).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

_DATA = Path(__file__).parent / "data"


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_text_goldens", _DATA / "make_text_goldens.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REC = _recorder()
GOLDEN: dict[str, Any] = json.loads((_DATA / "text_goldens.json").read_text(encoding="utf-8"))


def _cases(section: str) -> list[str]:
    return sorted(GOLDEN[section])


def test_the_corpus_is_the_recorded_one() -> None:
    assert GOLDEN["corpus"] == REC.CORPUS
    assert GOLDEN["queries"] == REC.QUERIES


@pytest.fixture(scope="module")
def tokens() -> dict[str, Any]:
    return dict(REC.tokenisers())


@pytest.fixture(scope="module")
def bm25() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(REC.bm25_scores()))
    return out


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    return dict(REC.embeddings())


@pytest.mark.parametrize("name", _cases("tokenisers"))
def test_tokens_are_unchanged(name: str, tokens: dict[str, Any]) -> None:
    assert tokens[name] == GOLDEN["tokenisers"][name]


@pytest.mark.parametrize("name", _cases("bm25"))
def test_bm25_scores_are_unchanged(name: str, bm25: dict[str, Any]) -> None:
    assert bm25[name] == GOLDEN["bm25"][name]  # exact floats: json round-trips them


@pytest.mark.parametrize("name", _cases("embeddings"))
def test_hashing_vectors_are_unchanged(name: str, vectors: dict[str, Any]) -> None:
    assert vectors[name] == GOLDEN["embeddings"][name]


def test_every_recorded_entry_is_still_computed(
    tokens: dict[str, Any], bm25: dict[str, Any], vectors: dict[str, Any]
) -> None:
    assert set(tokens) == set(GOLDEN["tokenisers"])
    assert set(bm25) == set(GOLDEN["bm25"])
    assert set(vectors) == set(GOLDEN["embeddings"])


# -- the analyser itself ------------------------------------------------------------------------


def test_presets_are_shared_and_carry_their_signature() -> None:
    from shortlist._text import ANALYSER_VERSION, PRESETS, analyser

    for name in PRESETS:
        a = analyser(name)
        assert a is analyser(name)
        assert a.signature["preset"] == name and a.signature["version"] == ANALYSER_VERSION
    assert analyser("tools", stopwords="en") != analyser("tools")
    assert analyser("corpus").same_terms({**analyser("corpus").signature, "preset": "renamed"})
    assert not analyser("corpus").same_terms({**analyser("corpus").signature, "version": ANALYSER_VERSION + 1})


def test_unknown_presets_and_parameters_are_refused() -> None:
    from shortlist._text import Analyser, analyser

    with pytest.raises(ValueError, match="unknown analyser preset"):
        analyser("nope")
    with pytest.raises(ValueError, match="unknown stopwords"):
        analyser("tools", stopwords="klingon")
    with pytest.raises(ValueError, match="no stemmer"):
        Analyser(stem="klingon")
    with pytest.raises(ValueError, match="unknown pattern"):
        Analyser(pattern="chars")  # type: ignore[arg-type]


def test_stemmers_are_never_shared_between_threads() -> None:
    import threading

    from shortlist import _text as text
    from shortlist.reduction._local import Bm25Scorer

    seen: list[object] = []
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        Bm25Scorer(max_entries=1).terms("running forecasts connected")
        seen.append(text._thread_stemmer("english"))  # kept alive, so no id is reused

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in seen}) == 4  # one stemmer object per thread


def test_the_test_double_is_the_hashing_embedder() -> None:
    from shortlist.embeddings._hashing import HashingEmbedder
    from shortlist.retrieval._hash_embedder import HashingEmbedder as OldPath
    from shortlist.testing import HashEmbedder

    assert issubclass(HashEmbedder, HashingEmbedder) and OldPath is HashingEmbedder
    double = HashEmbedder(8)
    double.embed(["a b", "c"])
    assert double.calls == 1 and double.texts == ["a b", "c"]


# -- the analyser in the embedded index's manifest ----------------------------------------------


def _index(root: Path) -> None:
    from shortlist.retrieval import Document, EmbeddedBackend

    EmbeddedBackend(root).upsert([Document("a", text="the weather in Paris"), Document("b", text="book a flight")])


def _manifest(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    return out


def test_the_manifest_records_the_analyser(tmp_path: Path) -> None:
    from shortlist._text import analyser
    from shortlist.retrieval import EmbeddedBackend

    _index(tmp_path / "idx")
    assert _manifest(tmp_path / "idx")["analyser"] == analyser("corpus").signature
    assert [h.chunk.document_id for h in EmbeddedBackend(tmp_path / "idx").query("weather")] == ["a"]


def test_an_index_made_by_another_analyser_is_refused(tmp_path: Path) -> None:
    from shortlist.errors import ConfigError
    from shortlist.retrieval import EmbeddedBackend
    from shortlist.retrieval._backends.embedded import verify_index

    root = tmp_path / "idx"
    _index(root)
    manifest = _manifest(root)
    manifest["analyser"] = {**manifest["analyser"], "stopwords": "none"}
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"text analyser.*rebuild it with 'shortlist index build'"):
        EmbeddedBackend(root)
    assert any("text analyser" in p.problem for p in verify_index(root).problems)


def test_an_index_from_before_the_signature_loads_with_a_warning_and_gets_it(tmp_path: Path) -> None:
    from shortlist._events import Event, event_hooks
    from shortlist.retrieval import Document, EmbeddedBackend
    from shortlist.retrieval._backends.embedded import IndexUnverified

    root = tmp_path / "idx"
    _index(root)
    manifest = _manifest(root)
    del manifest["analyser"]
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    seen: list[Event] = []
    with event_hooks(seen.append):
        old = EmbeddedBackend(root)
    warnings = [e for e in seen if isinstance(e, IndexUnverified)]
    assert len(warnings) == 1 and "analyser" in warnings[0].reason
    assert [h.chunk.document_id for h in old.query("flight")] == ["b"]
    old.upsert([Document("a", text="the weather in Paris"), Document("b", text="book a flight")])  # unchanged
    assert "analyser" in _manifest(root)


def test_a_qdrant_collection_made_by_another_analyser_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("qdrant_client")
    from shortlist._text import analyser
    from shortlist.embeddings._hashing import HashingEmbedder
    from shortlist.errors import ConfigError
    from shortlist.retrieval._backends.qdrant import QdrantBackend

    qd = QdrantBackend(path=str(tmp_path / "q"), embedder=HashingEmbedder())
    try:
        assert qd._meta["analyser"] == analyser("corpus").signature
        qd._meta["analyser"] = {**qd._meta["analyser"], "stem": None}
        qd._write_meta()
    finally:
        qd.close()
    with pytest.raises(ConfigError, match="text analyser"):
        QdrantBackend(path=str(tmp_path / "q"), embedder=HashingEmbedder())
