"""`shortlist select` as a user types it: called in-process, and as a real subprocess (slow; ``cli_mode``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inprocess import run_cli as run

pytestmark = pytest.mark.usefixtures("cli_mode", "bundled_ranked")  # in-process, and as a real subprocess (slow)


@pytest.fixture(scope="module")
def bundled_ranked() -> None:
    """The default model loaded and the bundled catalog embedded once for these tests, as the fast loop's
    guard expects of a one-time cost (tests/slow_guard.py): on a fresh cache it is the ONNX graph's
    optimisation and 38 embeddings, charged otherwise to whichever test runs first (1.3-2.4 s by the host)."""
    assert run("select", "warm up").returncode == 0  # in-process: the module-scoped fixture precedes cli_mode


def test_quick_start_on_the_bundled_catalog() -> None:
    out = run("select", "what's the weather in Paris tomorrow")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("get_weather_forecast")


def test_json_output_keys() -> None:
    out = run("select", "--json", "--k", "3", "book a hotel room in Rome")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"selected", "ranked", "scores", "reason", "fallback", "elapsed_ms"} <= set(data)
    assert data["fallback"] is None and len(data["ranked"]) <= 3
    assert "book_hotel" in data["ranked"]
    assert "memory__recall" in data["selected"]  # pinned


def test_fallback_reported_in_json(tmp_path: Path) -> None:
    cat = tmp_path / "c.json"
    cat.write_text(json.dumps([{"name": "a", "description": "alpha"}, {"name": "b", "description": "beta"}]))
    data = json.loads(run("select", "--json", "--catalog", str(cat), "--selector", "lexical", "zzz").stdout)
    assert data["fallback"] == "empty" and data["selected"] == ["a", "b"]


def test_skills_directory(tmp_path: Path) -> None:
    d = tmp_path / "skills" / "pdf"
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text("---\nname: pdf\ndescription: Fill PDF forms\n---\nbody\n")
    data = json.loads(run("select", "--json", "--catalog", str(tmp_path / "skills"), "fill a pdf form").stdout)
    assert data["selected"] == ["pdf"]


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        ("missing", "does not exist"),
        ("badjson", "invalid JSON"),
        ("dupes", "duplicate ids"),
        ("empty", "empty"),
        ("badconfig", "spec.selectors.x"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, setup: str, words: str) -> None:
    cat = tmp_path / "c.json"
    args = ["select", "--catalog", str(cat), "q"]
    if setup == "badjson":
        cat.write_text("{oops")
    elif setup == "dupes":
        cat.write_text('[{"name": "a"}, {"name": "a"}]')
    elif setup == "empty":
        cat.write_text("[]")
    elif setup == "badconfig":
        cat.write_text('[{"name": "a"}]')
        cfg = tmp_path / "r.yaml"
        cfg.write_text("spec:\n  selectors:\n    x: {args: [1]}\n")
        args = ["select", "--catalog", str(cat), "--config", str(cfg), "q"]
    out = run(*args)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert words in out.stderr


def test_runtime_schema_command() -> None:
    out = run("schema", "runtime")
    assert out.returncode == 0 and json.loads(out.stdout)["title"] == "shortlist runtime configuration"
