"""One behavioural contract, three stores: in-process, SQLite and PostgreSQL (a real server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shortlist.errors import MemoryScopeError
from shortlist.memory import InMemoryStore, Memory, MemoryStore, SqliteMemoryStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s: MemoryStore
    if request.param == "memory":
        s = InMemoryStore()
    elif request.param == "sqlite":
        s = SqliteMemoryStore(tmp_path / "m.db")
    else:
        from shortlist.memory.postgres import PostgresMemoryStore

        s = PostgresMemoryStore(request.getfixturevalue("pg_dsn"))
    yield s
    s.close()


A = {"user_id": "a"}
B = {"user_id": "b"}


def test_save_assigns_id_and_timestamps_and_replace_keeps_created_at(store: MemoryStore) -> None:
    m = store.save(Memory("fact", "likes green tea", A))
    assert m.id.startswith("mem_") and m.created_at is not None and m.accessed_at is not None
    again = store.save(Memory("fact", "likes black tea", A, id=m.id))
    assert again.created_at == m.created_at and again.accessed_at is not None
    assert again.accessed_at >= m.accessed_at  # type: ignore[operator]
    assert [x.content for x in store.list(A)] == ["likes black tea"]


def test_replaced_memory_moves_to_the_end(store: MemoryStore) -> None:
    first = store.save(Memory("fact", "one", A))
    store.save(Memory("fact", "two", A))
    store.save(Memory("fact", "one again", A, id=first.id))
    assert [x.content for x in store.list(A)] == ["two", "one again"]


def test_scopes_never_cross(store: MemoryStore) -> None:
    m = store.save(Memory("fact", "coffee lover", A))
    store.save(Memory("fact", "coffee hater", B, id=m.id))  # same id in another scope: a separate memory
    store.save(Memory("fact", "coffee in workspace", {"user_id": "a", "workspace_id": "w"}))
    assert [x.content for x in store.retrieve(A, "coffee")] == ["coffee lover"]
    assert [x.content for x in store.list(B)] == ["coffee hater"]
    assert store.delete(B, m.id) and [x.content for x in store.list(A)] == ["coffee lover"]
    assert store.delete_all(A) == 1 and len(store.list({"user_id": "a", "workspace_id": "w"})) == 1


def test_recall_is_or_over_stemmed_terms_and_ranks_more_matches_first(store: MemoryStore) -> None:
    store.save(Memory("fact", "The user runs marathons", A))
    store.save(Memory("fact", "The user enjoys running and cycling", A))
    store.save(Memory("fact", "Unrelated note about taxes", A))
    got = [x.content for x in store.retrieve(A, "running cycling")]
    assert got == ["The user enjoys running and cycling", "The user runs marathons"]
    assert [x.content for x in store.retrieve(A, "")][:1] == ["The user runs marathons"]


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


@pytest.mark.parametrize("scope", [{}, {"user_id": ""}, {"": "x"}])
def test_invalid_scopes_are_refused(store: MemoryStore, scope: dict[str, str]) -> None:
    with pytest.raises(MemoryScopeError):
        store.save(Memory("fact", "x", scope))
    with pytest.raises(MemoryScopeError):
        store.list(scope)


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


def test_round_trip_keeps_every_field(store: MemoryStore) -> None:
    expires = datetime.now(UTC) + timedelta(days=1)
    m = Memory(
        "episodic",
        "met at the café",
        A,
        metadata={"provenance": "user_requested", "n": [1, 2]},
        confidence=0.75,
        session_id="s1",
        turn_range=(3, 5),
        expires_at=expires,
    )
    saved = store.save(m)
    (got,) = store.list(A)
    assert got == saved
    assert got.metadata == {"provenance": "user_requested", "n": [1, 2]} and got.turn_range == (3, 5)


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
    assert only.content.startswith("version ") and only.content != "version start"


def test_replacing_a_memory_replaces_what_recall_matches(store: MemoryStore) -> None:
    m = store.save(Memory("preference", "likes green tea", A))
    store.save(Memory("preference", "likes black coffee", A, id=m.id))
    assert store.retrieve(A, "tea") == []
    assert [x.content for x in store.retrieve(A, "coffee")] == ["likes black coffee"]


def test_a_save_is_visible_to_another_store_on_the_same_database(store: MemoryStore, tmp_path: Path) -> None:
    if isinstance(store, InMemoryStore):
        pytest.skip("process-local store")
    saved = store.save(Memory("fact", "committed when save returns", A))
    if isinstance(store, SqliteMemoryStore):
        other: MemoryStore = SqliteMemoryStore(store.path)
    else:
        from shortlist.memory.postgres import PostgresMemoryStore

        assert isinstance(store, PostgresMemoryStore)
        other = PostgresMemoryStore(store.dsn)
    with other:
        assert other.list(A) == [saved]


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_http_bodies_have_every_field_of_the_response_models(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, server_factory: Any
) -> None:
    from shortlist.server.routes.memory import MemoriesOut, MemoryOut

    url = {"memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 'm.db'}"}.get(backend)
    url = url or request.getfixturevalue("pg_dsn")
    fields = list(MemoryOut.model_fields)
    with server_factory(memory_url=url) as srv, srv.client() as c:
        plain = c.post("/v1/memory/remember", json={"scope": A, "content": "plain tea"}).json()
        assert list(plain) == fields  # the model's keys, in its order, none left out
        assert plain["metadata"] == {} and plain["session_id"] is None and plain["expires_at"] is None
        assert plain["scope"] == A and plain["turn_range"] == [0, 0] and plain["confidence"] == 1.0
        full = {
            "scope": A,
            "content": "full tea",
            "type": "fact",
            "id": "m1",
            "metadata": {"a": [1, 2.5, None, "x"], "b": {"c": True}},
            "confidence": 0.5,
            "session_id": "sess",
            "expires_at": "2099-01-01T01:00:00+02:00",
        }
        got = c.post("/v1/memory/remember", json=full).json()
        assert MemoryOut.model_validate(got).model_dump() == got
        assert {k: got[k] for k in ("id", "type", "content", "metadata", "confidence", "session_id")} == {
            k: full[k] for k in ("id", "type", "content", "metadata", "confidence", "session_id")
        }
        assert datetime.fromisoformat(got["expires_at"]) == datetime(2098, 12, 31, 23, tzinfo=UTC)
        for path, body in (("/v1/memory/list", {"scope": A}), ("/v1/memory/recall", {"scope": A, "query": "tea"})):
            listed = c.post(path, json=body).json()
            assert MemoriesOut.model_validate(listed).model_dump() == listed
            assert sorted(m["id"] for m in listed["memories"]) == sorted([plain["id"], "m1"])
            assert all(list(m) == fields for m in listed["memories"])


def _unused(*_: Any) -> None:  # keep imports used when a backend is skipped
    return None
