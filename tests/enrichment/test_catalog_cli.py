"""``shortlist catalog enrich|show`` against a scripted OpenAI-compatible server on loopback (in-process CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from enrich_chat_server import chat_server

from shortlist.cli import main
from shortlist.feedback import FeedbackStore

TOOLS = [
    {"name": "weather", "description": "Current weather and forecasts for any city."},
    {"name": "flights", "description": "Search and book flights."},
]


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS))
    return path


def test_enrich_then_show(tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "fb.sqlite"
    with chat_server() as srv:
        args = ["catalog", "enrich", "--catalog", str(catalog), "--db", str(db), "--base-url", srv.base_url]
        code = main([*args, "--model", "m1", "--examples", "4", "--json"])
        first = json.loads(capsys.readouterr().out)
        assert code == 0 and first["generated"] == 2 and first["examples"] == 8 and first["tokens"]["total"] > 0
        assert main([*args, "--model", "m1", "--examples", "4"]) == 0
        text = capsys.readouterr().out
        assert "0 enriched, 2 already were" in text and "0 prompt + 0 completion tokens" in text
    with FeedbackStore(db) as log:
        assert len(log.examples()["weather"]) == 4
    assert main(["catalog", "show", "--db", str(db), "--tool", "flights"]) == 0
    shown = capsys.readouterr().out
    assert "2 tools enriched" in shown and "  - Please help me with flights task 0" in shown


@pytest.mark.slow  # the CLI as a process against a keep-alive server
def test_enrich_against_a_keep_alive_server_exits_0_with_its_json(tmp_path: Path, catalog: Path) -> None:
    """Issue 27, item 6: a pooled keep-alive connection was closed from a second event loop.

    Real providers keep the connection open; closing the client after the run's loop ended
    raised "Event loop is closed" (exit 1, a traceback, no JSON) after the examples were saved.
    """
    db = tmp_path / "fb.sqlite"
    with chat_server(keep_alive=True) as srv:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "shortlist.cli", "catalog", "enrich", "--catalog", str(catalog)),
                *("--db", str(db), "--base-url", srv.base_url, "--model", "m", "--examples", "3", "--json"),
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Event loop is closed" not in proc.stderr
    out = json.loads(proc.stdout)
    assert out["generated"] == 2 and out["examples"] == 6 and out["failed"] == 0
    with FeedbackStore(db) as log:
        assert len(log.examples()["flights"]) == 3


def test_failures_exit_1_and_are_listed(tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with chat_server(fail_first=100) as srv:
        code = main(
            [
                *("catalog", "enrich", "--catalog", str(catalog), "--db", str(tmp_path / "fb.sqlite")),
                *("--base-url", srv.base_url, "--model", "m", "--retries", "0"),
            ]
        )
    assert code == 1
    assert "failed: weather: ModelError" in capsys.readouterr().out


def test_off_without_a_model(tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["catalog", "enrich", "--catalog", str(catalog), "--db", str(tmp_path / "fb.sqlite")])
    assert code == 2
    assert "enrichment is off until a model is configured" in capsys.readouterr().err
    assert not (tmp_path / "fb.sqlite").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--examples", "1"], "at least 2"),
        (["--callable", "x:y"], "not both"),
    ],
)
def test_bad_flags(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code = main(
        [
            *("catalog", "enrich", "--catalog", str(catalog), "--db", str(tmp_path / "fb.sqlite")),
            *("--base-url", "http://127.0.0.1:9/v1", "--model", "m"),
            *extra,
        ]
    )
    assert code == 2 and message in capsys.readouterr().err


def test_db_comes_from_the_config(tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "runtime.yaml"
    config.write_text("apiVersion: v1\nkind: RuntimeConfig\nspec:\n  selection:\n    examples: logs/fb.sqlite\n")
    with chat_server() as srv:
        code = main(
            [
                *("catalog", "enrich", "--catalog", str(catalog), "--config", str(config)),
                *("--base-url", srv.base_url, "--model", "m", "--json"),
            ]
        )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and Path(out["db"]) == tmp_path / "logs" / "fb.sqlite" and out["generated"] == 2


def test_show_a_missing_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "show", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "no such feedback log" in capsys.readouterr().err


def test_the_model_and_settings_come_from_spec_enrichment(
    tmp_path: Path, catalog: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with chat_server() as srv:
        config = tmp_path / "runtime.yaml"
        config.write_text(
            "apiVersion: v1\nkind: RuntimeConfig\nspec:\n  enrichment:\n"
            f"    base_url: {srv.base_url}\n    model: from-config\n    db: fb.sqlite\n    examples: 3\n"
        )
        code = main(["catalog", "enrich", "--catalog", str(catalog), "--config", str(config), "--json"])
        assert srv.bodies[0]["model"] == "from-config"
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["examples"] == 6 and Path(out["db"]) == tmp_path / "fb.sqlite"


def test_spec_enrichment_is_validated(tmp_path: Path) -> None:
    from shortlist._config import parse_runtime_config
    from shortlist.errors import ConfigError

    with pytest.raises(ConfigError, match="examples"):
        parse_runtime_config({"apiVersion": "v1", "kind": "RuntimeConfig", "spec": {"enrichment": {"examples": 1}}})
