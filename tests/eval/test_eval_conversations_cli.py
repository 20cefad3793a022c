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
    "preloaded",
    "cost_vs_oracle",
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
    assert list(report["strategies"]) == ["all", "per_turn", "stable", "deferred", "oracle"]
    for row in report["strategies"].values():
        assert set(row) == ROW_KEYS and set(row["cost"]) == {"0", "1000"} == set(row["by_history"])
        assert set(row["cost_vs_oracle"]) == {"0", "1000"}
    assert report["simulation"]["search_query"] == "message" and "added_tools" not in report


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
    assert "x oracle @20,000" in table.stdout and "preloaded" in table.stdout


def test_bad_flags_are_one_line_errors() -> None:
    for args, message in [
        (("--strategies", "sometimes"), "unknown strategy"),
        (("--history", "a,b"), "--history expects"),
        (("--compare", "bm25,overlap"), "one --selector"),
        (("--add-tools", f"{CONV / 'tools.jsonl'}:0"), "N a positive whole number"),
        (("--add-tools", f"{CONV / 'tools.jsonl'}:ten"), "N a positive whole number"),
        (("--add-tools", "no/such/file.json:3"), "does not exist"),
        (("--search-query", "words:zero"), "words:N"),
        (("--miss-rate", "2"), "miss rate"),
    ]:
        out = cli("--dataset", str(CONV), *args, "--no-progress")
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_add_tools_and_the_simulated_model(tmp_path: Path) -> None:
    extra = tmp_path / "extra.jsonl"
    lines = [{"id": f"extra_{i}", "name": f"extra_{i}", "description": f"Extra tool number {i}."} for i in range(6)]
    lines.append({"id": "mv", "name": "mv", "description": "A second mv: skipped, the dataset has one."})
    extra.write_text("".join(json.dumps(x) + "\n" for x in lines))
    base = [*("--dataset", str(CONV), "--selector", "bm25", "--history", "0", "--json", "--no-progress")]
    plain = cli(*base)
    grown = cli(*base, "--add-tools", f"{extra}:4", "--seed", "5")
    assert plain.returncode == 0 and grown.returncode == 0, plain.stderr + grown.stderr
    before, after = json.loads(plain.stdout), json.loads(grown.stdout)
    assert after["added_tools"] == [{"source": str(extra), "requested": 4, "new": 6, "added": 4, "skipped": 1}]
    assert after["strategies"]["all"]["tools_per_turn"] == before["strategies"]["all"]["tools_per_turn"] + 4
    assert after["catalog_tokens"] > before["catalog_tokens"] and "4 tools added" in grown.stderr
    sim = cli(*base, "--search-query", "name", "--miss-rate", "1", "--spurious-rate", "0.5", "--seed", "2")
    assert sim.returncode == 0, sim.stderr
    report = json.loads(sim.stdout)
    assert report["simulation"] == {
        "search_query": "name",
        "miss_rate": 1.0,
        "spurious_rate": 0.5,
        "seed": 2,
        "miss_cost": "call",
        "max_searches": 2,
    }
    assert report["strategies"]["deferred"]["searches_per_turn"] < before["strategies"]["deferred"]["searches_per_turn"]


def test_add_tools_on_a_tool_retrieval_dataset() -> None:
    ds = CONV.parent / "eval_tiny"
    out = cli("--dataset", str(ds), "--selector", "bm25", "--add-tools", str(CONV), "--json", "--no-progress")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["added_tools"][0]["added"] > 0
    bad = cli("--dataset", str(ds), "--selector", "bm25", "--miss-rate", "0.3", "--no-progress")
    assert bad.returncode == 2 and "for conversation datasets" in bad.stderr


@pytest.mark.parametrize("flag", ["--cache-write", "--cache-read"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_a_price_multiplier_that_is_not_a_finite_number_is_refused(flag: str, value: str) -> None:
    out = cli("--dataset", str(CONV), "--selector", "bm25", f"{flag}={value}", "--json", "--no-progress")
    assert out.returncode == 2, out.stdout[:200]
    assert out.stdout == "" and out.stderr.startswith(f"shortlist: error: {flag} ") and out.stderr.count("\n") == 1
