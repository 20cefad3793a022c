"""One request can never poison a memory scope over HTTP (issue 12, High 2), on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SCOPE = {"user_id": "u1"}


def remember_body(content: str, depth: int) -> str:
    """A ``remember`` body whose metadata is ``depth`` levels deep (built as text: too deep for json.dumps)."""
    metadata = '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1)
    return f'{{"scope": {{"user_id": "u1"}}, "content": "{content}", "metadata": {metadata}}}'


JSON = {"content-type": "application/json"}


@pytest.fixture(params=["sqlite", "postgres"])
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'mem.db'}"
    dsn: str = request.getfixturevalue("pg_dsn")
    return dsn


@pytest.mark.parametrize(
    ("depth", "message"),
    [(254, "nested more than 32 levels"), (999, "error parsing the body")],  # 999: past the body parser already
)
def test_deep_metadata_is_refused_and_the_scope_keeps_answering(
    app_factory: Any, memory_url: str, depth: int, message: str
) -> None:
    with app_factory(memory_url=memory_url) as srv, srv.client() as c:
        ok = c.post("/v1/memory/remember", json={"scope": SCOPE, "content": "likes tea"})
        assert ok.status_code == 200, ok.text
        bad = c.post("/v1/memory/remember", content=remember_body("poison", depth), headers=JSON)
        assert bad.status_code == 400, bad.text
        assert message in bad.json()["error"]["message"]
        listed = c.post("/v1/memory/list", json={"scope": SCOPE})
        assert listed.status_code == 200, listed.text
        assert [m["content"] for m in listed.json()["memories"]] == ["likes tea"]
        recalled = c.post("/v1/memory/recall", json={"scope": SCOPE, "query": "tea"})
        assert recalled.status_code == 200 and len(recalled.json()["memories"]) == 1


def test_json_nested_past_the_parser_is_a_4xx(app_factory: Any, tmp_path: Path) -> None:
    body = remember_body("x", 100_000)
    with app_factory(memory_url=f"sqlite:///{tmp_path / 'm.db'}") as srv, srv.client() as c:
        r = c.post("/v1/memory/remember", content=body, headers=JSON)
        assert 400 <= r.status_code < 500, r.text
        assert c.post("/v1/memory/list", json={"scope": SCOPE}).json()["memories"] == []
