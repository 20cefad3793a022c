"""The persistent vector cache: hits across instances, misses embedded once, per-model keys."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shortlist.embeddings.cache import (
    ENV_CACHE_DIR,
    ENV_CACHE_MAX_MB,
    CacheUnavailable,
    CachingEmbedder,
    VectorStore,
    cache_dir,
    cache_max_mb,
    default_store,
    text_key,
)
from shortlist.errors import ConfigError
from shortlist.events import Event, event_hooks
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
    from shortlist.embeddings.default import DefaultEmbedder
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
    assert isinstance(built, DefaultEmbedder)
    store = built.vector_store()
    assert store is not None and str(store.path) == db


# -- the persistent store: where, identity, bound, concurrent processes, failure ----------------

WRITER = """
import sys
import numpy as np
from shortlist.embeddings.cache import VectorStore, text_key
store = VectorStore(sys.argv[1], max_mb=64)
me = int(sys.argv[2])
for round_ in range(20):
    items = [(text_key(f"{me}-{round_}-{i}"), np.full(8, me, dtype=np.float32)) for i in range(25)]
    items.append((text_key("shared"), np.ones(8, dtype=np.float32)))
    store.put("m", items)
    got = store.get("m", [k for k, _ in items])
    assert len(got) == len(items), (me, round_, len(got))
print("ok")
"""


def test_concurrent_processes_write_one_store(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "vectors.sqlite3"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for n in range(6)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err.decode()[-400:] for _, err in outs]
    info = VectorStore(db).info()
    assert info.vectors == 6 * 20 * 25 + 1 and info.models == {"m": 6 * 20 * 25 + 1}
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_identity_not_name_keys_the_vectors(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.sqlite3")
    a = CachingEmbedder(HashEmbedder(dim=8, model_name="same"), store, identity="same@aaaa")
    b = CachingEmbedder(HashEmbedder(dim=8, model_name="same"), store, identity="same@bbbb")
    a.embed(["x", "y"])
    b.embed(["x", "y"])
    assert b.misses == 2 and b.hits == 0  # same name, another model file: computed again
    assert store.info().models == {"same@aaaa": 2, "same@bbbb": 2}


def test_default_model_identity_is_its_files_hashes() -> None:
    from shortlist.embeddings.default import MODEL_SHA256, TOKENIZER_SHA256, DefaultEmbedder

    identity = DefaultEmbedder(vector_cache=None).model_identity
    assert MODEL_SHA256[:16] in identity and TOKENIZER_SHA256[:16] in identity
    assert DefaultEmbedder(vector_cache=None, max_length=128).model_identity != identity  # truncation changes vectors


def test_size_bound_evicts_least_recently_used(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.sqlite3", max_mb=1)
    old = [(text_key(f"old{i}"), np.zeros(384, dtype=np.float32)) for i in range(300)]
    store.put("m", old)
    for batch in range(6):
        store.put("m", [(text_key(f"new{batch}-{i}"), np.ones(384, dtype=np.float32)) for i in range(300)])
    info = store.info()
    assert info.bytes <= info.max_bytes
    assert 0 < info.vectors < 2100
    assert store.get("m", [text_key("new5-0")])  # the newest stay
    assert not store.get("m", [k for k, _ in old])  # the oldest went first


def test_cache_dir_env_xdg_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.setenv(ENV_CACHE_DIR, "off")
    assert cache_dir() is None and default_store() is None
    monkeypatch.delenv(ENV_CACHE_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "shortlist"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "shortlist"


def test_bad_max_mb_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CACHE_MAX_MB, "lots")
    with pytest.raises(ConfigError, match="SHORTLIST_CACHE_MAX_MB"):
        cache_max_mb()


def test_unusable_cache_dir_is_an_event_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(ENV_CACHE_DIR, str(blocker / "cache"))
    seen: list[Event] = []
    with event_hooks(seen.append):
        assert default_store() is None
    assert [e.name for e in seen] == ["embeddings.cache_unavailable"]
    assert isinstance(seen[0], CacheUnavailable) and str(blocker) in seen[0].path


def test_default_embedder_vectors_are_the_same_through_the_cache(tmp_path: Path) -> None:
    from shortlist.embeddings.default import DefaultEmbedder

    texts = ["send an email", "get the weather forecast for Paris", "book a flight", "convert currency"]
    plain = DefaultEmbedder(vector_cache=None, optimized_model_cache=False).embed(texts)
    store = VectorStore(tmp_path / "v.sqlite3")
    cold = DefaultEmbedder(vector_cache=store).embed(texts)  # computed (through the optimised graph), stored
    warm = DefaultEmbedder(vector_cache=store).embed(texts)  # read back
    np.testing.assert_array_equal(cold, plain)
    np.testing.assert_array_equal(warm, plain)
    assert store.info().vectors == len(texts)


def test_clear(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.sqlite3")
    store.put("a", [(text_key("x"), np.ones(4, dtype=np.float32))])
    store.put("b", [(text_key("x"), np.ones(4, dtype=np.float32))])
    assert store.clear("a") == 1 and store.info().models == {"b": 1}
    assert store.clear() == 1 and store.info().vectors == 0
