"""The feedback log on PostgreSQL (a real server) behaves as the SQLite one, and replicas learn from each other.

Each behaviour runs on both stores, chosen by what ``FeedbackStore(...)`` is given: a file or a
``postgresql://`` URL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from shortlist._types import Candidate
from shortlist.feedback import FeedbackStore, apply_examples


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "feedback.db")
    pytest.importorskip("psycopg")
    dsn: str = request.getfixturevalue("pgvector_dsn")
    return dsn


@pytest.fixture
def store(location: str) -> Iterator[FeedbackStore]:
    s = FeedbackStore(location)
    yield s
    s.close()


def test_the_url_chooses_the_store(store: FeedbackStore, location: str) -> None:
    want = "PostgresFeedbackStore" if location.startswith("postgresql://") else "FeedbackStore"
    assert type(store).__name__ == want


def test_used_tools_get_the_query_as_an_example_oldest_first_without_duplicates(store: FeedbackStore) -> None:
    assert store.record("weather in Paris", ["weather", "news"], ["weather"]) > 0
    store.record("forecast for Rome", ["weather"], ["weather", "maps"])
    store.record("weather in Paris", ["weather"], ["weather"])
    store.record("skill turn", ["s1"], ["s1"], kind="skill")
    assert store.examples() == {
        "weather": ["weather in Paris", "forecast for Rome"],
        "maps": ["forecast for Rome"],
        "s1": ["skill turn"],
    }
    assert store.examples(["maps", "unknown"]) == {"maps": ["forecast for Rome"]}
    assert store.examples(kind="skill") == {"s1": ["skill turn"]}
    assert store.examples(["weather"], limit=1) == {"weather": ["forecast for Rome"]}
    assert store.used_sets() == [("weather",), ("weather", "maps"), ("weather",)]  # newest turn first


def test_an_external_id_is_recorded_once_and_bad_input_is_refused(store: FeedbackStore) -> None:
    assert store.record("q", [], ["a"], external_id="turn-1") > 0
    assert store.record("q again", [], ["b"], external_id="turn-1") == 0
    assert store.examples() == {"a": ["q"]}
    with pytest.raises(ValueError, match="non-empty query"):
        store.record("  ", [], ["a"])
    with pytest.raises(TypeError, match="list of ids"):
        store.record("q", [], "a")


def test_import_is_idempotent_and_enrich_appends_examples(store: FeedbackStore, tmp_path: Path) -> None:
    path = tmp_path / "queries.jsonl"
    rows = [{"qid": "1", "text": "book a flight", "gold": ["flights"]}, {"qid": "2", "text": "none", "gold": []}]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert store.import_jsonl(path) == 1
    assert store.import_jsonl(path) == 0
    cands = [Candidate("flights", "flights", "Search flights", examples=("fly to Rome",)), Candidate("x", "x", "X")]
    enriched = apply_examples(cands, store)
    assert enriched[0].examples == ("fly to Rome", "book a flight")
    assert enriched[1] is cands[1]
    assert apply_examples(cands, store)[0] is enriched[0]  # unchanged log: the same object
    stats = store.stats()
    assert (stats["turns"], stats["uses"], stats["candidates"], stats["kinds"]) == (1, 1, 1, {"tool": 1})
    assert stats["top"] == [{"id": "flights", "uses": 1}]


@pytest.mark.slow  # a PostgreSQL server
def test_replicas_learn_from_each_others_turns(pgvector_dsn: str, tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    from shortlist.feedback._postgres import PostgresFeedbackStore

    a = PostgresFeedbackStore(pgvector_dsn, refresh_s=0)
    b = FeedbackStore(pgvector_dsn)
    assert isinstance(b, PostgresFeedbackStore)
    b.refresh_s = 0
    try:
        assert b.examples() == {}
        a.record("convert 10 usd to eur", ["fx"], ["fx"])
        assert b.examples() == {"fx": ["convert 10 usd to eur"]}  # recorded on a, served by b
        assert b.co_usage().companions(["fx"]) == []
        a.record("convert and chart it", ["fx"], ["fx", "chart"])
        assert b.co_usage().companions(["fx"]) == ["chart"]  # b's shared table is read again
        assert b.co_usage() is b.co_usage()
        path = tmp_path / "q.jsonl"
        path.write_text("\n".join(json.dumps({"qid": str(i), "text": f"q{i}", "gold": ["t"]}) for i in range(50)))
        added: list[int] = []
        threads = [threading.Thread(target=lambda s=s: added.append(s.import_jsonl(path))) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(added) == 50  # both replicas imported the file: each line once
        assert len(a.examples()["t"]) == 50 and a.stats()["turns"] == 52
        assert "password" not in a.stats()["path"]
    finally:
        a.close()
        b.close()


def test_an_unreachable_database_is_an_operational_error_that_may_pass() -> None:
    pytest.importorskip("psycopg")
    from loopback import free_port
    from shortlist.errors import OperationalError, UsageError

    with pytest.raises(OperationalError, match="feedback database unavailable") as caught:
        FeedbackStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none")
    assert caught.value.retry_after == 1.0 and not isinstance(caught.value, UsageError)


def test_used_sets_and_stats_read_the_same_on_both_stores(store: FeedbackStore) -> None:
    store.record("weather then mail", ["a", "b", "c"], ["get_weather", "send_mail"], ts=1.0)
    store.record("a skill", ["s"], ["summarise"], kind="skill", ts=2.0)
    store.record("nothing used", ["a"], [], ts=3.0)
    store.record("weather again", ["a"], ["get_weather"], ts=4.0)
    assert store.used_sets() == [("get_weather",), ("get_weather", "send_mail")]  # newest first
    assert store.used_sets(kind=None, limit=2) == [("get_weather",), ("summarise",)]
    stats = store.stats()
    assert (stats["turns"], stats["uses"], stats["candidates"]) == (4, 4, 3)
    assert stats["kinds"] == {"skill": 1, "tool": 3}
    assert stats["top"][0] == {"id": "get_weather", "uses": 2}
    assert (stats["first_ts"], stats["last_ts"]) == (1.0, 4.0)


def test_the_postgres_log_reconnects_after_the_server_restarts(pg_dsn: str, postgres: object) -> None:
    pytest.importorskip("psycopg")
    from shortlist.errors import CatalogError, OperationalError

    store = FeedbackStore(pg_dsn)
    try:
        store.record("before", [], ["get_weather"])
        postgres.stop("fast")  # type: ignore[attr-defined]
        try:
            with pytest.raises(OperationalError, match="feedback database unavailable"):
                store.record("while down", [], ["get_weather"])
        finally:
            postgres.start()  # type: ignore[attr-defined]
        store.record("after", [], ["get_weather"])  # a new connection: the broken one was dropped
        assert store.examples()["get_weather"] == ["before", "after"]
    finally:
        store.close()
    with pytest.raises(CatalogError, match="closed"):
        store.record("closed", [], ["x"])


def test_the_cli_reads_and_trains_from_a_postgres_log(
    pgvector_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shortlist.cli import main

    pytest.importorskip("psycopg")
    pairs = [
        ("will it rain tomorrow", "weather"),
        ("forecast for paris", "weather"),
        ("send a note to bob", "email"),
        ("mail the report to alice", "email"),
    ]
    for text, tool in pairs:
        assert main(["feedback", "add", "--db", pgvector_dsn, "--query", text, "--used", tool]) == 0
    capsys.readouterr()
    assert main(["feedback", "stats", "--db", pgvector_dsn, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["turns"], stats["uses"], stats["candidates"]) == (4, 4, 2)
    assert main(["feedback", "stats", "--db", pgvector_dsn]) == 0
    assert "4 turns, 4 uses of 2 candidates" in capsys.readouterr().out
    catalog = tmp_path / "tools.jsonl"
    catalog.write_text(
        json.dumps({"id": "weather", "name": "weather", "description": "the weather forecast for a city"})
        + "\n"
        + json.dumps({"id": "email", "name": "email", "description": "send an email message"})
        + "\n"
    )
    out = tmp_path / "adapter.npz"
    args = ["feedback", "train", "--db", pgvector_dsn, "--catalog", str(catalog), "--out", str(out), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["pairs"], summary["tools"]) == (4, 2) and out.is_file()
    # an unreachable server is one line and exit 2, not a traceback
    assert main(["feedback", "stats", "--db", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"]) == 2
    assert "feedback database unavailable" in capsys.readouterr().err


@pytest.mark.slow  # a PostgreSQL server
def test_a_postgres_log_binds_as_examples_by_argument_and_by_config(pg_dsn: str, tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    from shortlist._types import Candidate
    from shortlist.feedback._postgres import PostgresFeedbackStore
    from shortlist.selection._facade import Shortlist

    catalog = [Candidate("get_weather", description="weather forecast"), Candidate("send_mail", description="email")]
    with FeedbackStore(pg_dsn) as log:
        log.record("is it going to rain", used=["get_weather", "send_mail"])
    config = tmp_path / "runtime.yaml"
    config.write_text(f"spec:\n  selection:\n    examples: {pg_dsn}\n")  # a URL, not a path beside the config
    for sl in (
        Shortlist(catalog, selector="bm25", examples=pg_dsn),
        Shortlist(catalog, selector="bm25", config=config),
    ):
        with sl:
            assert isinstance(sl.examples, PostgresFeedbackStore)
            enriched = sl.enrich(catalog, kind="tool")
            assert enriched[0].examples == ("is it going to rain",)
            table = sl.co_usage()
            assert table is not None and table.companions(["get_weather"]) == ["send_mail"]
