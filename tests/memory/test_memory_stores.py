"""The MemoryStore contract, run against InMemoryStore and SqliteMemoryStore alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shortlist.errors import MemoryScopeError
from shortlist.memory import InMemoryStore, Memory, MemoryStore, SqliteMemoryStore, scope_key

A = {"user_id": "a"}
A_WS = {"user_id": "a", "workspace_id": "y"}
B = {"user_id": "b"}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    s: MemoryStore = InMemoryStore() if request.param == "memory" else SqliteMemoryStore(tmp_path / "m.db")
    yield s
    s.close()


def test_save_assigns_id_and_timestamps(store: MemoryStore) -> None:
    m = store.save(Memory(type="fact", content="lives in Lyon", scope=A))
    assert m.id.startswith("mem_") and len(m.id) > 10
    assert m.created_at is not None and m.accessed_at is not None
    assert store.list(A) == [m]


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


def test_delete_in_another_scope_does_nothing(store: MemoryStore) -> None:
    m = store.save(Memory(type="fact", content="keep me", scope=A))
    assert store.delete(B, m.id) is False
    assert store.delete(A_WS, m.id) is False
    assert store.list(A) == [m]
    assert store.delete(A, m.id) is True
    assert store.delete(A, m.id) is False  # a missing id is not an error
    assert store.list(A) == []


def test_same_id_in_two_scopes_are_two_memories(store: MemoryStore) -> None:
    store.save(Memory(type="fact", content="a's", scope=A, id="mem_x"))
    store.save(Memory(type="fact", content="b's", scope=B, id="mem_x"))
    assert [m.content for m in store.list(A)] == ["a's"]
    assert [m.content for m in store.list(B)] == ["b's"]


def test_save_with_existing_id_replaces_and_keeps_created_at(store: MemoryStore) -> None:
    first = store.save(Memory(type="fact", content="v1", scope=A))
    second = store.save(Memory(type="fact", content="v2", scope=A, id=first.id))
    assert second.created_at == first.created_at
    assert [m.content for m in store.list(A)] == ["v2"]


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


def test_list_offset_and_limit(store: MemoryStore) -> None:
    for i in range(5):
        store.save(Memory(type="fact", content=f"item {i}", scope=A))
    assert [m.content for m in store.list(A, limit=2, offset=1)] == ["item 1", "item 2"]
    assert store.list(A, offset=5) == []


def test_delete_all_only_touches_its_scope(store: MemoryStore) -> None:
    store.save(Memory(type="fact", content="one", scope=A))
    store.save(Memory(type="fact", content="two", scope=A))
    store.save(Memory(type="fact", content="other", scope=A_WS))
    assert store.delete_all(A) == 2
    assert store.list(A) == []
    assert [m.content for m in store.list(A_WS)] == ["other"]


def test_expired_memories_are_never_returned(store: MemoryStore) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    future = datetime.now(UTC) + timedelta(days=1)
    store.save(Memory(type="fact", content="old coupon code", scope=A, expires_at=past))
    live = store.save(Memory(type="fact", content="new coupon code", scope=A, expires_at=future))
    assert [m.id for m in store.retrieve(A, "coupon")] == [live.id]
    assert [m.id for m in store.retrieve(A, "")] == [live.id]
    assert [m.id for m in store.list(A)] == [live.id]


def test_round_trip_keeps_every_field(store: MemoryStore) -> None:
    expires = datetime(2099, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    m = Memory(
        type="preference",
        content="prefers metric units",
        scope=A_WS,
        metadata={"provenance": "operator_curated", "consent_category": "memory:preferences", "n": [1, 2]},
        confidence=0.65,
        session_id="s1",
        turn_range=(3, 7),
        expires_at=expires,
    )
    saved = store.save(m)
    (loaded,) = store.list(A_WS)
    assert loaded == saved
    assert loaded.provenance == "operator_curated" and loaded.consent_category == "memory:preferences"


def test_scope_key_cannot_collide_through_separators() -> None:
    assert scope_key({"a": "1;b=2"}) != scope_key({"a": "1", "b": "2"})
    assert scope_key({"b": "2", "a": "1"}) == scope_key({"a": "1", "b": "2"})


def test_memory_json_form_follows_the_spec() -> None:
    m = Memory(type="fact", content="x", scope=A)
    d = m.to_dict()
    assert "metadata" not in d and "session_id" not in d and "expires_at" not in d
    assert d["turn_range"] == [0, 0]
    assert Memory.from_dict(d) == m
    assert "scope" not in m.to_dict(include_scope=False)
