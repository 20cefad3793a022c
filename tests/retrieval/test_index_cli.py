"""``shortlist index build|query`` as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shortlist.retrieval import Document
from terminal import run_on_terminal

pytestmark = pytest.mark.slow  # the CLI as subprocesses


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "shortlist.cli", *args], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def docs_jsonl(tmp_path: Path, help_center: list[Document]) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"id": d.id, "title": d.title, "text": d.text, "metadata": dict(d.metadata)})
            for d in help_center
        ),
        encoding="utf-8",
    )
    return path


def test_build_query_and_incremental_rebuild(tmp_path: Path, docs_jsonl: Path, help_center: list[Document]) -> None:
    index = tmp_path / "idx"
    built = _cli("index", "build", "--docs", str(docs_jsonl), "--path", str(index), "--json")
    assert json.loads(built.stdout)["added"] == len(help_center)
    assert built.stderr == ""  # stderr is no terminal: no progress drawn (the next test draws it)
    out = json.loads(_cli("index", "query", "--path", str(index), "--json", "I forgot my password").stdout)
    assert out["results"][0]["id"] == "pw-reset"
    assert set(out["results"][0]) >= {"id", "title", "score", "text"}
    none = json.loads(_cli("index", "query", "--path", str(index), "--json", "Explain Plato's cave").stdout)
    assert none == {"results": []}

    lines = docs_jsonl.read_text(encoding="utf-8").splitlines()
    changed = json.loads(lines[0])
    changed["text"] += " Passwords must have 12 characters."
    docs_jsonl.write_text("\n".join([json.dumps(changed), *lines[1:-1]]), encoding="utf-8")
    again = json.loads(_cli("index", "build", "--docs", str(docs_jsonl), "--path", str(index), "--json").stdout)
    assert (again["added"], again["updated"], again["unchanged"], again["deleted"]) == (0, 1, 4, 1)


def test_folder_of_markdown_with_qdrant_local(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    (folder / "sub").mkdir(parents=True)
    (folder / "refunds.md").write_text("# Refund policy\n\nReturn items within 30 days for a refund.\n")
    (folder / "sub" / "shipping.txt").write_text("Orders ship in two days; delivery takes a week.\n")
    (folder / "image.png").write_bytes(b"\x89PNG")
    index = tmp_path / "qidx"
    _cli(
        "index",
        "build",
        "--docs",
        str(folder),
        "--path",
        str(index),
        "--backend",
        "qdrant",
        "--quiet",
        "--embedder",
        "hashing",
    )
    out = json.loads(_cli("index", "query", "--path", str(index), "--json", "--k", "1", "refund for a return").stdout)
    assert [(r["id"], r["title"]) for r in out["results"]] == [("refunds.md", "Refund policy")]
    text = _cli("index", "query", "--path", str(index), "when do orders ship, how long does delivery take").stdout
    assert "sub/shipping.txt" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "invalid JSON"), ('{"title": "no id", "text": "x"}', "'id' is required"), ("", "no documents")],
)
def test_bad_input_is_a_one_line_error(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content, encoding="utf-8")
    proc = _cli(
        "index", "build", "--docs", str(bad), "--path", str(tmp_path / "i"), "--embedder", "hashing", check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("shortlist: error:") and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_query_without_an_index_is_an_error(tmp_path: Path) -> None:
    proc = _cli("index", "query", "--path", str(tmp_path), "anything", check=False)
    assert proc.returncode == 2 and "no shortlist index" in proc.stderr


def test_build_draws_its_progress_on_a_terminal(tmp_path: Path, docs_jsonl: Path) -> None:
    args = [sys.executable, "-m", "shortlist.cli", "index", "build", "--docs", str(docs_jsonl)]
    cold = {**os.environ, "SHORTLIST_CACHE_DIR": str(tmp_path / "cache")}  # a cold cache: the model and docs
    # take long enough for the line to be drawn
    proc, drawn = run_on_terminal([*args, "--path", str(tmp_path / "idx")], env=cold, timeout=120)
    assert proc.returncode == 0
    assert "indexing" in drawn.decode(errors="replace")


@pytest.mark.parametrize("corpus", ["a%00b", "Bad-Name", "x" * 41])
def test_a_bad_postgres_corpus_name_is_refused_before_any_query(
    pg_dsn: str, docs_jsonl: Path, tmp_path: Path, corpus: str
) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a database that has corpora: describe() queries
        conn.execute("CREATE TABLE shortlist_index_corpora (corpus TEXT PRIMARY KEY)")
    url = f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}corpus={corpus}"
    proc = _cli("index", "build", "--docs", str(docs_jsonl), "--backend", "postgres", "--url", url, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("shortlist: error: corpus name") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and "DataError" not in proc.stderr
