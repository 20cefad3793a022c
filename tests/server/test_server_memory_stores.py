"""The memory routes' bodies on every store (the store contract itself: tests/contracts/)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

A = {"user_id": "a"}


@pytest.mark.parametrize("backend", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_http_bodies_have_every_field_of_the_response_models(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, server_factory: Any
) -> None:
    from shortlist.server._routes.memory import MemoriesOut, MemoryOut

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
