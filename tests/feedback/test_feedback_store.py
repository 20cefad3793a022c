"""FeedbackStore: a real SQLite file, persistence across processes, examples, enrichment, the CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from inprocess import run_cli
from shortlist._types import Candidate, Query
from shortlist.errors import CatalogError
from shortlist.feedback import FeedbackStore, apply_examples
from shortlist.rankers._bm25 import Bm25Ranker

DATA = Path(__file__).resolve().parents[1] / "data" / "eval_tiny"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_record_and_examples(tmp_path: Path) -> None:
    with FeedbackStore(tmp_path / "fb.db") as store:
        assert store.record("say hi in french", selected=["translate_text", "search_web"], used=["translate_text"])
        store.record(Query("rain in Oslo?", kind="tool"), used=["get_weather"])
        store.record("say hi in french", used=["translate_text"])  # same text twice: one example
        store.record("book flights and weather", used=["get_weather", "book_flight"])
        ex = store.examples()
        assert ex["translate_text"] == ["say hi in french"]
        assert ex["get_weather"] == ["rain in Oslo?", "book flights and weather"]
        assert store.examples(["get_weather"], limit=1) == {"get_weather": ["book flights and weather"]}
        assert store.examples(["unknown"]) == {}
        store.record("use the pdf skill", used=["get_weather"], kind="skill")
        assert store.examples(["get_weather"], kind="tool") == {"get_weather": ex["get_weather"]}
        assert store.examples(["get_weather"], kind="skill") == {"get_weather": ["use the pdf skill"]}
        stats = store.stats()
        assert stats["turns"] == 5 and stats["uses"] == 6 and stats["candidates"] == 3
        assert stats["top"][0] == {"id": "get_weather", "uses": 3}
        assert stats["kinds"] == {"skill": 1, "tool": 4}


def test_bad_records_are_rejected(tmp_path: Path) -> None:
    with FeedbackStore(tmp_path / "fb.db") as store:
        with pytest.raises(ValueError):
            store.record("   ", used=["x"])
        with pytest.raises(TypeError):
            store.record("q", used="get_weather")  # a string, not a list of ids
        assert store.stats()["turns"] == 0


def test_wal_mode_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "fb.db"
    FeedbackStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"turns", "uses"} <= tables
    db.close()


def test_not_a_database_is_a_catalog_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_text("this is not sqlite" * 100)
    with pytest.raises(CatalogError, match="not a usable feedback database"):
        FeedbackStore(bogus)


@pytest.mark.slow  # a second process writes the file
def test_persists_across_processes_and_sees_other_writers(tmp_path: Path) -> None:
    path = tmp_path / "fb.db"
    reader = FeedbackStore(path)
    assert reader.examples() == {}
    code = (
        "import sys; from shortlist.feedback import FeedbackStore;"
        "s = FeedbackStore(sys.argv[1]); s.record('convert 5 usd to eur', used=['currency']); s.close()"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    # The cached view is invalidated by another connection's commit (PRAGMA data_version).
    assert reader.examples() == {"currency": ["convert 5 usd to eur"]}
    reader.close()
    with FeedbackStore(path) as again:
        assert again.stats()["turns"] == 1


def test_import_jsonl_is_idempotent(tmp_path: Path) -> None:
    with FeedbackStore(tmp_path / "fb.db") as store:
        assert store.import_jsonl(DATA / "queries.jsonl") == 3  # the empty-gold query is skipped
        assert store.import_jsonl(DATA / "queries.jsonl") == 0
        ex = store.examples()
        assert ex["send_email"] == ex["create_event"] == ["email my boss and book a meeting in my calendar"]


def test_apply_examples_enriches_and_keeps_identity(tmp_path: Path) -> None:
    catalog = [
        Candidate("translate_text", description="Translate text"),
        Candidate("get_weather", description="Weather"),
    ]
    with FeedbackStore(tmp_path / "fb.db") as store:
        store.record("say hi in french", used=["translate_text"])
        first = apply_examples(catalog, store)
        assert first[0].examples == ("say hi in french",)
        assert first[1] is catalog[1]  # no feedback: the same object
        second = apply_examples(catalog, store)
        assert second[0] is first[0]  # unchanged log: the same enriched object
        ranker = Bm25Ranker()
        ranker.score(Query("french"), first)
        ranker.score(Query("french"), second)
        assert ranker.index_builds == 1
        store.record("bonjour in english", used=["translate_text"])
        third = apply_examples(catalog, store)
        assert third[0].examples == ("say hi in french", "bonjour in english")
        ranker.score(Query("french"), third)
        assert ranker.index_builds == 2  # examples changed: re-indexed


def test_examples_follow_the_log_reading_only_its_new_turns(tmp_path: Path) -> None:
    """After a write, the examples equal a fresh read of the whole log; only the new turns are read, and
    only the candidates they used get new enriched objects (a ranker re-indexes what changed)."""
    import random

    rng = random.Random(7)
    ids = [f"tool_{i}" for i in range(12)]
    catalog = [Candidate(i, description=f"does {i}") for i in ids]
    store = FeedbackStore(tmp_path / "fb.db")
    for n in range(40):
        store.record(
            f"query {rng.randint(0, 15)}", used=rng.sample(ids, rng.randint(1, 3)), kind=rng.choice(["tool", "skill"])
        )
        if n % 3 == 0:
            for kind in ("tool", "skill", None):
                with FeedbackStore(tmp_path / "fb.db") as fresh:
                    assert store.examples(kind=kind) == fresh.examples(kind=kind)
    before = apply_examples(catalog, store, kind="tool")
    reads: list[str] = []
    store._db.set_trace_callback(reads.append)
    store.record("a brand new request", used=["tool_3"], kind="tool")
    after = apply_examples(catalog, store, kind="tool")
    (read,) = [r for r in reads if "JOIN" in r]
    assert "turn_id >" in read  # only the turns after the last one read (and a lookback), never the whole log
    assert after[3].examples[-1] == "a brand new request" and after[3] is not before[3]
    assert all(a is b for i, (a, b) in enumerate(zip(after, before, strict=True)) if i != 3)
    with FeedbackStore(tmp_path / "fb.db") as other:  # another writer (a replica, a CLI import)
        other.record("from elsewhere", used=["tool_5"], kind="tool")
    again = apply_examples(catalog, store, kind="tool")
    assert again[5].examples[-1] == "from elsewhere" and again[3] is after[3]
    store.record("a brand new request", used=["tool_3"], kind="tool")  # a known example: nothing changes
    assert apply_examples(catalog, store, kind="tool")[3] is after[3]
    store.close()


def test_feedback_raises_the_used_tool(tmp_path: Path) -> None:
    catalog = [
        Candidate("search_web", description="Search the web for pages about a topic"),
        Candidate("translate_text", description="Translate text between languages"),
    ]
    query = Query("how do I say goodbye in french", k=1)
    ranker = Bm25Ranker()
    with FeedbackStore(tmp_path / "fb.db") as store:
        store.record("say thank you in french", used=["translate_text"])
        before = ranker.score(query, catalog)
        after = ranker.score(query, apply_examples(catalog, store))
        assert ranker.select(query, catalog).selected == ("search_web",)
        assert ranker.select(query, apply_examples(catalog, store)).selected == ("translate_text",)
    assert before[1] == 0 and after[1] > 0


@pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)
def test_cli_add_import_stats(tmp_path: Path) -> None:
    db = str(tmp_path / "fb.db")
    out = cli("feedback", "add", "--db", db, "--query", "weather in Rome", "--used", "get_weather", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["used"] == ["get_weather"]
    out = cli("feedback", "import", "--db", db, str(DATA / "train.jsonl"), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"db": db, "added": 3, "turns": 4}
    out = cli("feedback", "stats", "--db", db, "--json")
    stats = json.loads(out.stdout)
    assert stats["turns"] == 4 and stats["top"][0] == {"id": "get_weather", "uses": 2}
    with FeedbackStore(db) as store:
        assert store.examples(["get_weather"]) == {"get_weather": ["weather in Rome", "will it rain in London"]}


@pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)
def test_cli_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    db = str(tmp_path / "fb.db")
    out = cli("feedback", "add", "--db", db, "--query", "weather")
    assert out.returncode == 2 and out.stderr.startswith("shortlist: error:") and "--used" in out.stderr
    out = cli("feedback", "stats", "--db", str(tmp_path / "missing.db"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"qid": "x", "text": "hello"}\n')
    out = cli("feedback", "import", "--db", db, str(bad))
    assert out.returncode == 2 and "missing field 'gold'" in out.stderr


def test_used_sets_feed_co_usage(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.db")
    store.record("start the car", selected=["start_engine"], used=["press_brake", "start_engine"])
    store.record("start it again", selected=["start_engine"], used=["start_engine", "press_brake"])
    store.record("weather?", selected=["get_weather"], used=[])
    store.record("a skill", used=["pdf"], kind="skill")
    assert sorted(map(sorted, store.used_sets())) == [["press_brake", "start_engine"]] * 2
    assert store.used_sets(kind="skill") == [("pdf",)]
    assert len(store.used_sets(limit=1)) == 1
    co = store.co_usage()
    assert co.companions(["start_engine"]) == ["press_brake"]


def test_the_logs_co_usage_follows_the_log_reading_only_its_new_turns(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.db")
    store.record("start the car", used=["press_brake", "start_engine"])
    table = store.co_usage()
    assert store.co_usage() is table and table.frozen  # one shared table
    with pytest.raises(ValueError, match="frozen"):
        table.observe(["start_engine", "honk"])  # a caller cannot teach the shared one
    assert table.companions(["start_engine"]) == ["press_brake"]
    store.record("and lock it", used=["start_engine", "lock_doors"])
    assert store.co_usage() is table and table.companions(["start_engine"]) == ["lock_doors", "press_brake"]
    assert table.turns == 4
    store.record("a skill", used=["pdf", "docx"], kind="skill")
    assert store.co_usage(kind="skill").companions(["pdf"]) == ["docx"]
    assert store.co_usage().companions(["pdf"]) == [] and table.turns == 4
    # another connection (a replica, a CLI import) writes to the same file: this store reads it then
    with FeedbackStore(tmp_path / "fb.db") as other:
        other.record("q", used=["start_engine", "honk"])
    assert "honk" in store.co_usage().companions(["start_engine"]) and table.turns == 6
    reads: list[str] = []
    store._db.set_trace_callback(reads.append)
    store.record("one more", used=["honk", "lock_doors"])
    store.co_usage()
    (read,) = [r for r in reads if "JOIN" in r]
    assert "turn_id >" in read  # only the turns after the last one read (and a lookback), never the whole log
    assert table.turns == 8 and store.co_usage().companions(["honk"]) == ["lock_doors", "start_engine"]
    store.close()


def test_a_turn_committed_late_is_still_counted_once(tmp_path: Path) -> None:
    """PostgreSQL numbers a turn at insert and shows it at commit: a lower id may appear after a higher
    one was read. The fold reads the last ids again and counts what it had not."""
    store = FeedbackStore(tmp_path / "fb.db")

    def turn(turn_id: int, *used: str) -> None:  # a turn written with its own id, as another writer's commit
        with store._lock:
            store._db.execute(
                "INSERT INTO turns (id, ts, kind, query, selected) VALUES (?, 0, 'tool', 'q', '[]')", (turn_id,)
            )
            store._db.executemany(
                "INSERT INTO uses (turn_id, candidate_id) VALUES (?, ?)", [(turn_id, u) for u in used]
            )
            store._writes += 1

    turn(1, "x", "y")
    turn(5, "x", "z")
    table = store.co_usage()
    assert table.turns == 4 and store._co_usage["tool"].last == 5
    turn(3, "x", "v")  # committed after 5 was read
    assert store.co_usage().companions(["v"]) == ["x"] and table.turns == 6
    store._writes += 1  # the log changed again: the same ids are read again, none counted twice
    assert store.co_usage().turns == 6
    store.close()


def test_a_turn_committed_late_gives_its_example_once(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.db")

    def turn(turn_id: int, query: str, *used: str) -> None:  # another writer's commit, with its own id
        with store._lock:
            store._db.execute(
                "INSERT INTO turns (id, ts, kind, query, selected) VALUES (?, 0, 'tool', ?, '[]')", (turn_id, query)
            )
            store._db.executemany(
                "INSERT INTO uses (turn_id, candidate_id) VALUES (?, ?)", [(turn_id, u) for u in used]
            )
            store._writes += 1

    turn(1, "first", "x")
    turn(5, "fifth", "x", "y")
    assert store.examples(kind="tool") == {"x": ["first", "fifth"], "y": ["fifth"]}
    turn(3, "third", "y")  # committed after 5 was read: still read, once
    assert store.examples(kind="tool") == {"x": ["first", "fifth"], "y": ["fifth", "third"]}
    store._writes += 1
    assert store.examples(kind="tool")["y"] == ["fifth", "third"]
    store.close()
