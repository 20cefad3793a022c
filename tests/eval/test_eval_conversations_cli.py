"""``shortlist eval`` on a conversation dataset, as a real subprocess: the --json object and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the CLI as subprocesses

CONV = Path(__file__).resolve().parents[1] / "data" / "conv_tiny"
ROW_KEYS = {
    "turn_recall",
    "complete_turns",
    "tools_per_turn",
    "tool_tokens_per_turn",
    "tool_block_changes",
    "model_calls_per_turn",
    "searches_per_turn",
    "cost",
    "by_history",
}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "eval", *args], capture_output=True, text=True, timeout=120
    )


def test_json_object_has_the_documented_shape() -> None:
    out = cli(
        "--dataset", str(CONV), "--selector", "bm25", "--k", "2", "--history", "0,1000", "--json", "--no-progress"
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"conversations", "turns", "catalog_tokens", "default", "strategies"} <= set(report)
    assert report["default"] == "deferred" and report["conversations"] == 3
    assert list(report["strategies"]) == ["all", "per_turn", "stable", "deferred"]
    for row in report["strategies"].values():
        assert set(row) == ROW_KEYS and set(row["cost"]) == {"0", "1000"} == set(row["by_history"])


def test_text_table_and_cheaper_prices() -> None:
    base = cli("--dataset", str(CONV), "--selector", "bm25", "--strategies", "all", "--json", "--no-progress")
    cheap = cli(
        "--dataset",
        str(CONV),
        "--selector",
        "bm25",
        "--strategies",
        "all",
        "--cache-write",
        "1",
        "--json",
        "--no-progress",
    )
    assert base.returncode == 0 and cheap.returncode == 0, base.stderr + cheap.stderr
    cost = json.loads(base.stdout)["strategies"]["all"]["cost"]["0"]
    assert json.loads(cheap.stdout)["strategies"]["all"]["cost"]["0"] < cost
    table = cli("--dataset", str(CONV), "--selector", "bm25", "--no-progress")
    assert table.returncode == 0 and "deferred" in table.stdout and "cost @20,000" in table.stdout
    assert "(1.00x)" in table.stdout and max(len(line) for line in table.stdout.splitlines()) <= 100


def test_bad_flags_are_one_line_errors() -> None:
    for args, message in [
        (("--strategies", "sometimes"), "unknown strategy"),
        (("--history", "a,b"), "--history expects"),
        (("--compare", "bm25,overlap"), "one --selector"),
    ]:
        out = cli("--dataset", str(CONV), *args, "--no-progress")
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


@pytest.mark.parametrize("flag", ["--cache-write", "--cache-read"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_a_price_multiplier_that_is_not_a_finite_number_is_refused(flag: str, value: str) -> None:
    out = cli("--dataset", str(CONV), "--selector", "bm25", f"{flag}={value}", "--json", "--no-progress")
    assert out.returncode == 2, out.stdout[:200]
    assert out.stdout == "" and out.stderr.startswith(f"shortlist: error: {flag} ") and out.stderr.count("\n") == 1
