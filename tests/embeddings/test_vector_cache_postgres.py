"""The vector cache in PostgreSQL (a real server): the SQLite store's keys and checks, shared by replicas."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from shortlist._events import Event, event_hooks
from shortlist.embeddings import _cache as cache_module
from shortlist.embeddings._cache import (
    ENV_CACHE_DIR,
    CacheUnavailable,
    CachingEmbedder,
    VectorStore,
    _retry_at,
    _stores,
    cache_dir,
    cache_location,
    default_store,
    text_key,
)
from shortlist.errors import EmbeddingError
from shortlist.testing import HashEmbedder

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def url(pgvector_dsn: str) -> str:
    return pgvector_dsn


@pytest.fixture
def store(url: str) -> Iterator[VectorStore]:
    s = VectorStore(url)
    yield s
    s.close()


def test_the_url_chooses_the_postgres_store_keyed_like_sqlite(store: VectorStore, url: str, tmp_path: Path) -> None:
    assert type(store).__name__ == "PostgresVectorStore"
    assert "password" not in str(store.path)
    inner = HashEmbedder(dim=16)
    vecs = CachingEmbedder(inner, store).embed(["alpha", "beta"])
    lite = VectorStore(tmp_path / "v.sqlite3")
    try:
        CachingEmbedder(HashEmbedder(dim=16), lite).embed(["alpha", "beta"])
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT model, key, dim FROM shortlist_vectors ORDER BY key").fetchall()
        # the same (model identity, sha256 of the text) keys as the SQLite file
        assert sorted((m, bytes(k), d) for m, k, d in rows) == sorted(
            (m, k, d) for m, k, d in lite._db.execute("SELECT model, key, dim FROM vectors")
        )
        assert {bytes(k) for _, k, _ in rows} == {hashlib.sha256(t.encode()).digest() for t in ("alpha", "beta")}
        got = store.get(inner.model_name, [text_key("alpha"), text_key("beta"), text_key("missing")])
        assert set(got) == {text_key("alpha"), text_key("beta")}
        assert np.array_equal(got[text_key("alpha")], vecs[0]) and got[text_key("alpha")].dtype == np.float32
    finally:
        lite.close()


def test_a_second_replica_embeds_nothing_and_models_do_not_share(url: str) -> None:
    first_inner = HashEmbedder(dim=24)
    first = CachingEmbedder(first_inner, url)
    a = first.embed(["book a flight", "weather in Rome", "book a flight"])
    assert first_inner.texts == ["book a flight", "weather in Rome"]
    first.close()

    second_inner = HashEmbedder(dim=24)
    second = CachingEmbedder(second_inner, url)  # another process's store on the same database
    b = second.embed(["weather in Rome", "book a flight", "send a mail"])
    assert second_inner.texts == ["send a mail"]
    assert np.array_equal(a[0], b[1]) and np.array_equal(a[1], b[0])
    assert (second.hits, second.misses) == (2, 1)
    other = CachingEmbedder(HashEmbedder(dim=24), url, identity="another-model@abc")
    other.embed(["book a flight", "x"])
    assert other.misses == 2  # keyed by model identity: nothing shared
    info = second.store.info()
    assert info.vectors == 5 and info.models == {"another-model@abc": 2, first_inner.model_name: 3}
    assert info.bytes >= 5 * 24 * 4
    second.close()
    other.close()


def test_a_malformed_row_is_a_miss_and_is_replaced(store: VectorStore, url: str) -> None:
    inner = HashEmbedder(dim=8)
    good = CachingEmbedder(inner, store).embed(["alpha", "beta"])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE shortlist_vectors SET dim = 9 WHERE key = %s", (text_key("alpha"),))
        conn.execute("UPDATE shortlist_vectors SET vec = '\\x00'::bytea WHERE key = %s", (text_key("beta"),))
    assert store.get(inner.model_name, [text_key("alpha"), text_key("beta")]) == {}
    again = HashEmbedder(dim=8)
    out = CachingEmbedder(again, store).embed(["alpha", "beta"])
    assert again.texts == ["alpha", "beta"] and np.array_equal(out, good)
    assert set(store.get(inner.model_name, [text_key("alpha"), text_key("beta")])) == {
        text_key("alpha"),
        text_key("beta"),
    }


def test_rows_of_another_dimension_are_replaced(store: VectorStore) -> None:
    CachingEmbedder(HashEmbedder(dim=8), store, identity="m").embed(["a", "b"])
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = CachingEmbedder(HashEmbedder(dim=16), store, identity="m").embed(["a", "c"])
    assert out.shape == (2, 16)
    assert [(getattr(e, "reason", ""), getattr(e, "rows", 0)) for e in seen] == [("dim", 1)]


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("UPDATE shortlist_vectors SET vec = %s WHERE key = %s", "not_finite"),
        (
            "UPDATE shortlist_vectors SET (dim, vec, digest) ="
            " (SELECT dim, vec, digest FROM shortlist_vectors WHERE key = %s) WHERE key = %s",
            "digest",
        ),
        ("UPDATE shortlist_vectors SET digest = NULL WHERE %s::bytea IS NOT NULL AND key = %s", "digest"),
    ],
)
def test_a_damaged_or_moved_row_is_dropped_with_an_event(store: VectorStore, url: str, sql: str, reason: str) -> None:
    inner = HashEmbedder(dim=8)
    good = CachingEmbedder(inner, store).embed(["send a mail", "delete all files"])
    first = np.full(8, np.nan, np.float32).tobytes() if reason == "not_finite" else text_key("send a mail")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(sql, (first, text_key("delete all files"))).rowcount == 1
    again = HashEmbedder(dim=8)
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = CachingEmbedder(again, store).embed(["send a mail", "delete all files"])
    assert np.array_equal(out, good) and again.texts == ["delete all files"]
    assert [(e.name, getattr(e, "reason", "")) for e in seen] == [("embeddings.cache_row_dropped", reason)]
    third = HashEmbedder(dim=8)
    CachingEmbedder(third, store).embed(["send a mail", "delete all files"])
    assert third.texts == []  # stored again, with its digest


def test_the_bound_evicts_the_least_recently_used(url: str) -> None:
    store = VectorStore(url, max_mb=1)
    try:
        inner = HashEmbedder(dim=4096)  # 16 KiB a vector: 64 fill the megabyte
        emb = CachingEmbedder(inner, store)
        emb.embed([f"old {i}" for i in range(40)])
        emb.embed([f"new {i}" for i in range(40)])
        info = store.info()
        assert info.bytes <= info.max_bytes and info.vectors < 80
        kept = store.get(inner.model_name, [text_key(f"new {i}") for i in range(40)])
        assert len(kept) == 40  # the newest batch survives
    finally:
        store.close()


def test_replicas_starting_at_once_migrate_once_and_write_the_same_vectors(url: str) -> None:
    stores: list[VectorStore] = []
    errors: list[BaseException] = []
    texts = [f"tool {i}" for i in range(300)]

    def replica() -> None:
        try:
            s = VectorStore(url)
            stores.append(s)
            CachingEmbedder(HashEmbedder(dim=8), s).embed(texts)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors
        assert stores[0].info().vectors == 300
        with psycopg.connect(url) as conn:
            versions = conn.execute("SELECT version FROM shortlist_vector_migrations ORDER BY version").fetchall()
            assert versions == [(1,), (2,)]
    finally:
        for s in stores:
            s.close()


def test_a_lost_connection_is_an_event_and_vectors_are_computed(store: VectorStore, url: str) -> None:
    inner = HashEmbedder(dim=8)
    emb = CachingEmbedder(inner, store)
    want = emb.embed(["alpha", "beta"])
    store.retry_s = 0.0  # type: ignore[attr-defined]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = emb.embed(["alpha", "beta"])  # the pooled connection is dead: computed, not wrong
    assert np.array_equal(out, want)
    assert any(isinstance(e, CacheUnavailable) for e in seen)
    inner.texts.clear()
    assert np.array_equal(emb.embed(["alpha", "beta"]), want)  # a new connection serves them again
    assert inner.texts == []


def test_an_unreachable_database(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopback import free_port

    url = f"postgresql://postgres:secret@127.0.0.1:{free_port()}/none"
    with pytest.raises(EmbeddingError, match="vector cache") as caught:
        VectorStore(url)
    assert "secret" not in str(caught.value)
    monkeypatch.setenv(ENV_CACHE_DIR, url)
    seen: list[Event] = []
    try:
        with event_hooks(seen.append):
            assert default_store() is None  # the cache is skipped, with an event
            assert default_store() is None  # and left alone for a while: no second attempt, no event
        assert [type(e) for e in seen] == [CacheUnavailable] and "secret" not in seen[0].path  # type: ignore[attr-defined]
        monkeypatch.setattr(cache_module, "DATABASE_RETRY_S", 0.0)
        _retry_at.clear()
        with event_hooks(seen.append):
            assert default_store() is None  # tried again once the wait is over
        assert len(seen) == 2
    finally:
        _retry_at.clear()


def test_the_cache_location_setting_takes_a_url(url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_CACHE_DIR, url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_location() == url
    assert cache_dir() == tmp_path / "xdg" / "shortlist"  # files (model graphs) stay on disk
    store = default_store()
    try:
        assert store is not None and type(store).__name__ == "PostgresVectorStore"
        assert default_store() is store
    finally:
        if store is not None:
            store.close()
        _stores.clear()


def test_a_provider_vector_cache_url(url: str) -> None:
    from shortlist._config_sections import EmbeddingProviderConfig
    from shortlist.embeddings._default import DefaultEmbedder
    from shortlist.embeddings._factory import build_embedder

    emb = build_embedder(EmbeddingProviderConfig(type="default", additional_config={"vector_cache": url}))
    assert isinstance(emb, DefaultEmbedder)
    store = emb.vector_store()
    assert store is not None and type(store).__name__ == "PostgresVectorStore"
    store.close()


def test_cache_info_and_clear_on_the_cli(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shortlist.cli import main

    emb = CachingEmbedder(HashEmbedder(dim=8), url)
    emb.embed(["a", "b", "c"])
    emb.close()
    monkeypatch.setenv(ENV_CACHE_DIR, url)
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["vectors"]["vectors"] == 3 and info["vectors"]["path"].startswith("postgresql://")
    assert main(["cache", "clear", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vectors_deleted"] == 3
