"""API keys, loopback-only mode, memory scopes per key, and the memory endpoints over real HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shortlist.server import ServerSettings, create_app
from shortlist.server._settings import parse_keys_file

TOOLS = [{"id": "a", "description": "alpha tool"}, {"id": "b", "description": "beta tool"}]


@pytest.fixture
def keyed_settings(tmp_path: Path) -> ServerSettings:
    keys = tmp_path / "keys"
    keys.write_text("# admin\nk-admin\nk-alice user_id=alice\nk-team workspace_id=w1 user_id=bob\n")
    return ServerSettings.build(env={"SHORTLIST_API_KEYS": "k-env"}, api_keys_file=str(keys))


def test_keys_file_parsing_keeps_only_digests(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("k1\nk2 user_id=u1,team=red\n")
    parsed = parse_keys_file(keys)
    assert all("k1" not in d and "k2" not in d for d in parsed)
    (p1, p2) = parsed.values()
    assert p1.scopes is None and p2.scopes == ({"user_id": "u1", "team": "red"},)
    assert p2.allows({"user_id": "u1", "team": "red", "session": "s"}) and not p2.allows({"user_id": "u1"})


def test_requests_without_a_valid_key_get_401(keyed_settings: ServerSettings, app_factory: Any) -> None:
    with app_factory(**vars(keyed_settings)) as srv:
        with srv.client() as anon:
            r = anon.post("/v1/select", json={"query": "alpha", "candidates": TOOLS})
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert anon.get("/metrics").status_code == 401
            assert anon.get("/healthz").status_code == 200  # probes stay open
        with srv.client("wrong") as bad:
            assert bad.post("/v1/select", json={"query": "alpha", "candidates": TOOLS}).status_code == 401
        for key in ("k-admin", "k-env", "k-alice"):
            with srv.client(key) as ok:
                assert ok.post("/v1/select", json={"query": "alpha", "candidates": TOOLS}).status_code == 200


def test_a_scope_limited_key_gets_403_and_nothing_is_read(keyed_settings: ServerSettings, app_factory: Any) -> None:
    with app_factory(**vars(keyed_settings)) as srv, srv.client("k-admin") as admin, srv.client("k-alice") as alice:
        bob = {"user_id": "bob"}
        assert admin.post("/v1/memory/remember", json={"scope": bob, "content": "bob likes tea"}).status_code == 200
        for path, body in (
            ("/v1/memory/recall", {"scope": bob, "query": "tea"}),
            ("/v1/memory/list", {"scope": bob}),
            ("/v1/memory/forget", {"scope": bob, "all": True}),
            ("/v1/memory/remember", {"scope": bob, "content": "overwrite"}),
            ("/v1/retrieve", {"scope": bob, "messages": [{"role": "user", "content": "tea"}]}),
        ):
            r = alice.post(path, json=body)
            assert r.status_code == 403, path
            assert "tea" not in r.text
        assert [m["content"] for m in admin.post("/v1/memory/list", json={"scope": bob}).json()["memories"]] == [
            "bob likes tea"
        ]
        own = alice.post("/v1/memory/remember", json={"scope": {"user_id": "alice", "session": "s1"}, "content": "x"})
        assert own.status_code == 200


def test_without_keys_only_loopback_clients_are_answered() -> None:
    app = create_app(ServerSettings())
    with TestClient(app, client=("203.0.113.9", 5000)) as remote:  # an in-process client with a non-loopback address
        r = remote.post("/v1/select", json={"query": "alpha", "candidates": TOOLS})
        assert r.status_code == 403 and "loopback" in r.json()["error"]["message"]
    with TestClient(app, client=("127.0.0.1", 5000)) as local:
        assert local.post("/v1/select", json={"query": "alpha", "candidates": TOOLS}).status_code == 200


def test_memory_round_trip(server_factory: Any, tmp_path: Path) -> None:
    with server_factory(memory_url=f"sqlite:///{tmp_path / 'mem.db'}") as srv, srv.client() as c:
        scope = {"user_id": "u1"}
        saved = c.post(
            "/v1/memory/remember",
            json={
                "scope": scope,
                "content": "prefers dark roast coffee",
                "type": "preference",
                "metadata": {"provenance": "user_requested"},
            },
        )
        assert saved.status_code == 200, saved.text
        mem = saved.json()
        assert mem["id"].startswith("mem_") and mem["scope"] == scope and mem["created_at"]
        c.post("/v1/memory/remember", json={"scope": scope, "content": "lives in Lyon"})
        c.post("/v1/memory/remember", json={"scope": {"user_id": "u2"}, "content": "also likes coffee"})
        recalled = c.post("/v1/memory/recall", json={"scope": scope, "query": "coffee"}).json()["memories"]
        assert [m["content"] for m in recalled] == ["prefers dark roast coffee"]
        listed = c.post("/v1/memory/list", json={"scope": scope}).json()["memories"]
        assert [m["content"] for m in listed] == ["prefers dark roast coffee", "lives in Lyon"]
        assert c.post("/v1/memory/forget", json={"scope": scope, "id": mem["id"]}).json() == {"deleted": 1}
        assert c.post("/v1/memory/forget", json={"scope": scope, "id": mem["id"]}).json() == {"deleted": 0}
        assert c.post("/v1/memory/forget", json={"scope": scope, "all": True}).json() == {"deleted": 1}
        assert len(c.post("/v1/memory/list", json={"scope": {"user_id": "u2"}}).json()["memories"]) == 1
        bad = c.post("/v1/memory/list", json={"scope": {"user_id": ""}})
        assert bad.status_code == 422 and "scope" in bad.json()["error"]["message"]
        assert c.post("/v1/memory/list", json={"scope": {}}).status_code == 422
