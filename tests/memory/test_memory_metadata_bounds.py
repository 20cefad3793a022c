"""A memory whose metadata could not be returned is refused before it is stored (issue 12, High 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shortlist.errors import MemoryValueError
from shortlist.memory import InMemoryStore, Memory, MemoryStore, MemoryTools, SqliteMemoryStore
from shortlist.memory._record import MAX_METADATA_BYTES, MAX_METADATA_DEPTH

SCOPE = {"user_id": "u1"}


def nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep (the outer object counts as level 1)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryStore:
    return InMemoryStore() if request.param == "memory" else SqliteMemoryStore(tmp_path / "m.db")


def test_metadata_at_the_bound_round_trips(store: MemoryStore) -> None:
    meta = nested(MAX_METADATA_DEPTH)
    saved = store.save(Memory("fact", "deep but fine", SCOPE, metadata=meta))
    assert store.list(SCOPE)[0].metadata == meta
    assert json.dumps(saved.to_dict())


@pytest.mark.parametrize("depth", [MAX_METADATA_DEPTH + 1, 254, 999, 50_000])
def test_too_deep_metadata_is_refused_and_the_scope_stays_readable(store: MemoryStore, depth: int) -> None:
    store.save(Memory("fact", "likes tea", SCOPE))
    with pytest.raises(MemoryValueError, match="nested more than"):
        store.save(Memory("fact", "poison", SCOPE, metadata=nested(depth)))
    listed = store.list(SCOPE)
    assert [m.content for m in listed] == ["likes tea"]
    assert [m.content for m in store.retrieve(SCOPE, "tea")] == ["likes tea"]
    assert json.dumps([m.to_dict() for m in listed])


def test_deep_lists_count_as_levels_too() -> None:
    value: Any = "x"
    for _ in range(MAX_METADATA_DEPTH):
        value = [value]
    with pytest.raises(MemoryValueError):
        Memory("fact", "c", SCOPE, metadata={"k": value})


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"blob": "x" * (MAX_METADATA_BYTES + 1)}, "bytes of JSON"),
        ({"n": float("nan")}, "finite"),
        ({"when": object()}, "must be JSON"),
        ({1: "int key"}, "keys must be strings"),
    ],
)
def test_metadata_json_cannot_hold_is_refused(metadata: dict[Any, Any], message: str) -> None:
    with pytest.raises(MemoryValueError, match=message):
        Memory("fact", "c", SCOPE, metadata=metadata)


def test_memory_remember_tool_refuses_deep_metadata_without_storing(store: MemoryStore) -> None:
    tools = MemoryTools(store, SCOPE)
    result = tools.execute("memory__remember", {"content": "poison", "metadata": nested(999)})
    assert "nested more than" in result["error"]
    # the same through the JSON string a model sends, nested past Python's own recursion limit
    deep_json = '{"content": "poison", "metadata": ' + '{"a": ' * 5000 + "1" + "}" * 5001
    assert "error" in tools.execute("memory__remember", deep_json)
    assert store.list(SCOPE) == []
    assert tools.execute("memory__list", {})["memories"] == []
