"""Scale-out on shared state: two service instances on one PostgreSQL database, and a database restart."""

from __future__ import annotations

from typing import Any

import pytest

from loopback import PostgresServer

pytestmark = pytest.mark.slow  # a real PostgreSQL server


def test_two_replicas_share_memories_through_postgres(server_factory: Any, pg_dsn: str) -> None:
    with (
        server_factory(memory_url=pg_dsn) as one,
        server_factory(memory_url=pg_dsn) as two,
        one.client() as c1,
        two.client() as c2,
    ):
        scope = {"user_id": "shared"}
        r = c1.post("/v1/memory/remember", json={"scope": scope, "content": "written by replica one"})
        assert r.status_code == 200, r.text
        got = c2.post("/v1/memory/recall", json={"scope": scope, "query": "replica"}).json()["memories"]
        assert [m["content"] for m in got] == ["written by replica one"]
        assert c2.post("/v1/memory/forget", json={"scope": scope, "all": True}).json() == {"deleted": 1}
        assert c1.post("/v1/memory/list", json={"scope": scope}).json() == {"memories": []}


def test_database_restart_fails_cleanly_then_recovers(
    server_factory: Any, pg_dsn: str, postgres: PostgresServer
) -> None:
    scope = {"user_id": "restart"}
    with server_factory(memory_url=pg_dsn) as srv, srv.client() as c:
        for i in range(5):
            assert c.post("/v1/memory/remember", json={"scope": scope, "content": f"before {i}"}).status_code == 200
        postgres.stop("fast")
        try:
            r = c.post("/v1/memory/remember", json={"scope": scope, "content": "during outage"})
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "unavailable" and "Traceback" not in r.text
            assert c.post("/v1/memory/list", json={"scope": scope}).status_code == 503
            assert c.post("/v1/select", json={"query": "x", "candidates": [{"id": "a"}]}).status_code == 200
        finally:
            postgres.start()
        r = c.post("/v1/memory/remember", json={"scope": scope, "content": "after restart"})
        assert r.status_code == 200, r.text
        listed = [m["content"] for m in c.post("/v1/memory/list", json={"scope": scope}).json()["memories"]]
        assert listed == [f"before {i}" for i in range(5)] + ["after restart"]


def test_a_corpus_index_database_that_is_down_answers_503_then_recovers(
    server_factory: Any, pgvector_dsn: str, pgvector: PostgresServer
) -> None:
    from shortlist.embeddings._hashing import HashingEmbedder
    from shortlist.retrieval import Document
    from shortlist.retrieval._backends.postgres import PostgresBackend

    built = PostgresBackend(pgvector_dsn, corpus="outage", embedder=HashingEmbedder(64))
    built.upsert([Document("refunds", "Refunds", "A refund reaches your card within five working days.")])
    built.close()
    ask = {"scope": {"user_id": "u"}, "messages": [{"role": "user", "content": "when does my refund arrive"}]}
    with server_factory(corpus_index=f"{pgvector_dsn}?corpus=outage") as srv, srv.client() as c:
        assert c.post("/v1/retrieve", json=ask).json()["documents"]
        pgvector.stop("fast")
        try:
            r = c.post("/v1/retrieve", json=ask)
            # the database is down, not the request wrong: 503 and a retry, never 400 bad_request
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "unavailable" and r.headers["retry-after"] == "1"
            assert "index database unavailable" in r.json()["error"]["message"]
        finally:
            pgvector.start()
        assert c.post("/v1/retrieve", json=ask).json()["documents"]


def test_after_a_restart_one_broken_connection_discards_the_idle_ones(pg_dsn: str, postgres: PostgresServer) -> None:
    from shortlist.memory import Memory
    from shortlist.memory._postgres import MemoryStoreUnavailable, PostgresMemoryStore

    scope = {"user_id": "pool"}
    store = PostgresMemoryStore(pg_dsn)
    with store:
        with store._conn(), store._conn(), store._conn(), store._conn():
            pass  # four connections, now idle in the pool
        store.save(Memory("fact", "before", scope))
        postgres.stop("fast")
        try:
            with pytest.raises(MemoryStoreUnavailable):
                store.list(scope)
        finally:
            postgres.start()
        failures = 0
        for _ in range(4):
            try:
                store.list(scope)
            except MemoryStoreUnavailable:
                failures += 1
        # the first dead connection met after the restart takes the other idle ones with it
        assert failures <= 1
        assert [m.content for m in store.list(scope)] == ["before"]


def test_queries_are_never_prepared_so_each_is_planned_for_its_own_scope(pg_dsn: str) -> None:
    from shortlist.memory import Memory
    from shortlist.memory._postgres import PostgresMemoryStore

    scope = {"user_id": "plans"}
    store = PostgresMemoryStore(pg_dsn, pool_size=1)
    with store:
        for i in range(8):  # psycopg prepares a statement on its 5th run by default
            store.save(Memory("fact", f"tea number {i}", scope))
            store.list(scope)
            store.retrieve(scope, "tea")
        with store._conn() as conn:  # the one pooled connection that ran them all
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert prepared == (0,)
