"""The persistent vector cache: hits across instances, misses embedded once, per-model keys."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shortlist._events import Event, event_hooks
from shortlist.embeddings._cache import (
    ENV_CACHE_DIR,
    ENV_CACHE_MAX_MB,
    CacheRowDropped,
    CacheUnavailable,
    CachingEmbedder,
    VectorStore,
    cache_dir,
    cache_max_mb,
    default_store,
    text_key,
)
from shortlist.errors import ConfigError
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
    from shortlist._config_sections import EmbeddingProviderConfig
    from shortlist._types import Candidate, Query
    from shortlist.embeddings._default import DefaultEmbedder
    from shortlist.embeddings._factory import build_embedder
    from shortlist.rankers._embedding import EmbeddingRanker
    from shortlist.selection._base import SelectorContext

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
from shortlist.embeddings._cache import VectorStore, text_key
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


@pytest.mark.slow  # processes racing
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
    from shortlist.embeddings._default import MODEL_SHA256, TOKENIZER_SHA256, DefaultEmbedder

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
    from shortlist.embeddings._default import DefaultEmbedder

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


# -- damaged and moved rows (issue 27, items 2 and 12) -------------------------------------------

DAMAGE = {
    "truncated": ("UPDATE vectors SET vec = substr(vec, 1, 10) WHERE key = ?", (), "length"),
    "text": ("UPDATE vectors SET vec = 'thirty-two characters of text!!' WHERE key = ?", (), "not_bytes"),
    "dim": ("UPDATE vectors SET dim = 4 WHERE key = ?", (), "length"),
    "dim_and_vec": (
        "UPDATE vectors SET dim = 16, vec = ? WHERE key = ?",
        (np.ones(16, np.float32).tobytes(),),
        "digest",
    ),
    "nan": ("UPDATE vectors SET vec = ? WHERE key = ?", (np.full(8, np.nan, np.float32).tobytes(),), "not_finite"),
    "inf": ("UPDATE vectors SET vec = ? WHERE key = ?", (np.full(8, np.inf, np.float32).tobytes(),), "not_finite"),
    "zeroed": ("UPDATE vectors SET vec = zeroblob(32) WHERE key = ?", (), "digest"),
    "no_digest": ("UPDATE vectors SET digest = NULL WHERE key = ?", (), "digest"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_row_is_dropped_recomputed_and_stored_again(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "vectors.sqlite3"
    first = CachingEmbedder(HashEmbedder(dim=8), db)
    good = first.embed(["alpha", "beta", "gamma"])
    first.close()
    sql, args, reason = DAMAGE[damage]
    with sqlite3.connect(db) as conn:
        assert conn.execute(sql, (*args, text_key("beta"))).rowcount == 1

    inner = HashEmbedder(dim=8)
    again = CachingEmbedder(inner, db)
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = again.embed(["alpha", "beta", "gamma"])  # never raises, never serves the damaged row
    np.testing.assert_array_equal(out, good)
    assert inner.texts == ["beta"] and (again.hits, again.misses) == (2, 1)
    dropped = [e for e in seen if isinstance(e, CacheRowDropped)]
    assert [(e.reason, e.rows, e.model) for e in dropped] == [(reason, 1, inner.model_name)]
    assert dropped[0].path == str(db)

    third = HashEmbedder(dim=8)  # repaired in the file: the next process reads all three back
    with event_hooks(seen.append):
        CachingEmbedder(third, db).embed(["alpha", "beta", "gamma"])
    assert third.texts == [] and len([e for e in seen if isinstance(e, CacheRowDropped)]) == 1


def test_a_row_moved_to_another_text_is_not_served(tmp_path: Path) -> None:
    """A poisoned cache: the description's row holds the query's vector (and its digest): refused."""
    db = tmp_path / "vectors.sqlite3"
    emb = CachingEmbedder(HashEmbedder(dim=8), db)
    good = emb.embed(["send an email to bob", "delete every file", "weather in Paris"])
    emb.close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE vectors SET (dim, vec, digest) = (SELECT dim, vec, digest FROM vectors WHERE key = ?)"
            " WHERE key = ?",
            (text_key("send an email to bob"), text_key("delete every file")),
        )
        moved, query = (
            conn.execute("SELECT vec FROM vectors WHERE key = ?", (text_key(t),)).fetchone()[0]
            for t in ("delete every file", "send an email to bob")
        )
    assert moved == query  # the description's row now holds the query's vector
    inner = HashEmbedder(dim=8)
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = CachingEmbedder(inner, db).embed(["send an email to bob", "delete every file", "weather in Paris"])
    np.testing.assert_array_equal(out, good)
    assert inner.texts == ["delete every file"]
    assert [(e.name, getattr(e, "reason", "")) for e in seen] == [("embeddings.cache_row_dropped", "digest")]
    # nor under another model's identity: the digest names the model
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE vectors SET model = 'other' WHERE key = ?", (text_key("weather in Paris"),))
    assert VectorStore(db).get("other", [text_key("weather in Paris")]) == {}


def test_a_file_written_before_digests_is_recomputed_once(tmp_path: Path) -> None:
    db = tmp_path / "vectors.sqlite3"
    with sqlite3.connect(db) as conn:  # the schema and rows of a file written before digests
        conn.execute(
            "CREATE TABLE vectors (model TEXT NOT NULL, key BLOB NOT NULL, dim INTEGER NOT NULL, vec BLOB NOT NULL,"
            " used INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (model, key)) WITHOUT ROWID"
        )
        conn.execute(
            "INSERT INTO vectors (model, key, dim, vec) VALUES (?, ?, 8, ?)",
            ("hash", text_key("alpha"), np.ones(8, np.float32).tobytes()),
        )
    inner = HashEmbedder(dim=8)
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = CachingEmbedder(inner, db).embed(["alpha", "beta"])
    assert inner.texts == ["alpha", "beta"] and not np.array_equal(out[0], np.ones(8) / np.sqrt(8))
    assert [getattr(e, "reason", "") for e in seen] == ["digest"]
    again = HashEmbedder(dim=8)
    np.testing.assert_array_equal(CachingEmbedder(again, db).embed(["alpha", "beta"]), out)
    assert again.texts == []


def test_rows_of_another_dimension_under_one_identity_are_replaced(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.sqlite3")
    CachingEmbedder(HashEmbedder(dim=8), store, identity="m").embed(["a", "b"])
    inner = HashEmbedder(dim=16)
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = CachingEmbedder(inner, store, identity="m").embed(["a", "c"])  # raised "mixed dimensions" before
    assert out.shape == (2, 16) and inner.texts == ["c", "a"]
    assert [(getattr(e, "reason", ""), getattr(e, "rows", 0)) for e in seen] == [("dim", 1)]
    assert {v.shape[0] for v in store.get("m", [text_key("a"), text_key("c")]).values()} == {16}


def test_vectors_that_are_not_finite_are_not_stored(tmp_path: Path) -> None:
    from shortlist.embeddings._base import FunctionEmbedder

    store = VectorStore(tmp_path / "v.sqlite3")
    inner = FunctionEmbedder(lambda texts: [[np.nan, 1.0] if t == "bad" else [1.0, 0.0] for t in texts])
    seen: list[Event] = []
    with event_hooks(seen.append):
        CachingEmbedder(inner, store).embed_batch(["bad", "good"])
    assert set(store.get("function", [text_key("bad"), text_key("good")])) == {text_key("good")}
    assert [(getattr(e, "reason", ""), getattr(e, "stored", True)) for e in seen] == [("not_finite", False)]
