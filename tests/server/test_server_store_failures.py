"""Memory store failures answer clear, typed errors (issue 12: item 11 and a Low item).

- a damaged SQLite file: ``serve`` refuses to start, naming the file (before: ready, and writes
  were accepted into the malformed database);
- a full SQLite database (``SQLITE_FULL`` through ``PRAGMA max_page_count``): 507, nothing written;
- a NUL character in an id, a scope or a type on a real PostgreSQL: 400/422, never a 500 (in a recall
  query it only separates words).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from serve_process import serve_process

from loopback import wait_http_ready
from shortlist.memory._record import Memory
from shortlist.memory._sqlite import SqliteMemoryStore

pytestmark = pytest.mark.slow  # starts `shortlist serve` processes and PostgreSQL

SCOPE = {"user_id": "u"}


def _damaged(path: Path) -> Path:
    store = SqliteMemoryStore(path)
    for i in range(300):
        store.save(Memory(type="general", content=f"note {i} about the weather in Paris " * 5, scope=SCOPE))
    store.close()
    rnd = random.Random(1)
    with open(path, "r+b") as f:
        for page in range(2, os.path.getsize(path) // 4096, 3):
            f.seek(page * 4096)
            f.write(bytes(rnd.randrange(256) for _ in range(64)))
    return path


def test_serve_refuses_to_start_on_a_damaged_memory_database(tmp_path: Path) -> None:
    path = _damaged(tmp_path / "memory.db")
    with serve_process(tmp_path, "--memory", f"sqlite:///{path}", wait=False) as srv:
        ready = wait_http_ready(srv.url, proc=srv.proc, seconds=60)
        code = None if ready else srv.proc.wait(30)
        log = srv.log_text()
    assert not ready, "the service reported ready on a damaged memory database"
    assert code == 2, log
    assert str(path) in log and "damaged" in log and "quick_check" in log, log
    assert "Traceback" not in log, log


def test_a_full_sqlite_store_answers_507_and_writes_nothing(server_factory: Any, tmp_path: Path) -> None:
    with server_factory(memory_url=f"sqlite:///{tmp_path / 'm.db'}") as srv:
        store = srv.app.state.service.memory
        with srv.client() as c:
            for i in range(3):
                assert c.post("/v1/memory/remember", json={"scope": SCOPE, "content": f"n {i}"}).status_code == 200
            pages = store._conn().execute("PRAGMA page_count").fetchone()[0]
            opened = store._conn

            def capped() -> Any:  # every thread's connection: the database may not grow
                conn = opened()
                conn.execute(f"PRAGMA max_page_count = {pages}")
                return conn

            store._conn = capped
            r = c.post("/v1/memory/remember", json={"scope": SCOPE, "content": "x" * 90_000})
            assert r.status_code == 507, r.text
            body = r.json()["error"]
            assert body["code"] == "insufficient_storage" and "nothing was written" in body["message"]
            assert str(tmp_path) not in r.text  # the file's path stays in the server log
            listed = c.post("/v1/memory/list", json={"scope": SCOPE}).json()["memories"]
            assert [m["content"] for m in listed] == ["n 0", "n 1", "n 2"]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/memory/forget", {"scope": SCOPE, "id": "a\x00b"}),
        ("/v1/memory/list", {"scope": {"user_id": "u\x00"}}),
        ("/v1/memory/recall", {"scope": SCOPE, "query": "weather", "types": ["a\x00"]}),
        ("/v1/memory/list", {"scope": SCOPE, "types": ["a\x00"]}),
        ("/v1/memory/remember", {"scope": SCOPE, "content": "ok", "id": "x\x00"}),
        ("/v1/memory/remember", {"scope": SCOPE, "content": "ok", "metadata": {"k\x00": 1}}),
        ("/v1/memory/forget", {"scope": {"user_id": "u\x00"}, "all": True}),
    ],
)
def test_a_nul_character_on_postgresql_is_a_4xx_not_a_500(
    server_factory: Any, pg_dsn: str, route: str, body: dict[str, Any]
) -> None:
    with server_factory(memory_url=pg_dsn) as srv, srv.client() as c:
        r = c.post(route, json=body)
        assert r.status_code in (400, 422), r.text  # remember's own 422, else MemoryValueError's 400
        assert "NUL" in r.json()["error"]["message"]
        # the store is fine afterwards
        assert c.post("/v1/memory/remember", json={"scope": SCOPE, "content": "after"}).status_code == 200


def test_a_nul_in_a_recall_query_on_postgresql_is_only_a_separator(server_factory: Any, pg_dsn: str) -> None:
    with server_factory(memory_url=pg_dsn) as srv, srv.client() as c:  # query words never hold a NUL
        c.post("/v1/memory/remember", json={"scope": SCOPE, "content": "the weather in Paris"})
        r = c.post("/v1/memory/recall", json={"scope": SCOPE, "query": "weather\x00paris"})
        assert r.status_code == 200 and len(r.json()["memories"]) == 1
