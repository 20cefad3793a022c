"""Memory values: the scope key and the JSON form (the store contract: tests/contracts/)."""

from __future__ import annotations

from shortlist.memory import Memory
from shortlist.memory._record import scope_key

A = {"user_id": "a"}


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
