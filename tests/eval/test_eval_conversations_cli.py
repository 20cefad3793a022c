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
    "intervals",
    "per_conversation",
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
    for name, row in report["strategies"].items():
        loads = set() if name in ("all", "oracle") else {"loads"}  # what ranks and loads says where it went
        assert set(row) == ROW_KEYS | loads and set(row["cost"]) == {"0", "1000"} == set(row["by_history"])
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
    assert "where deferred's loaded definitions went" in table.stdout and "prefetch 1 " in table.stdout


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


def test_added_mcp_tools_are_ranked_by_the_replayed_offer_not_pinned(tmp_path: Path) -> None:
    """A host's other MCP servers (``mcp__server__tool``) are what grows a catalog: the replay offers
    them as the runtime does, ranked, where narrowing's default pins would put all of them in every block."""
    extra = tmp_path / "mcp.jsonl"
    lines = [
        {"id": f"mcp__srv{i % 3}__tool_{i}", "name": f"mcp__srv{i % 3}__tool_{i}", "description": f"Tool {i}."}
        for i in range(30)
    ]
    extra.write_text("".join(json.dumps(x) + "\n" for x in lines))
    base = [*("--dataset", str(CONV), "--selector", "bm25", "--history", "0", "--json", "--no-progress")]
    plain, grown = cli(*base), cli(*base, "--add-tools", str(extra))
    assert plain.returncode == 0 and grown.returncode == 0, plain.stderr + grown.stderr
    before, after = json.loads(plain.stdout)["strategies"], json.loads(grown.stdout)["strategies"]
    assert after["all"]["tools_per_turn"] == before["all"]["tools_per_turn"] + 30
    for policy in ("deferred", "per_turn"):
        assert after[policy]["tools_per_turn"] < before[policy]["tools_per_turn"] + 5, policy


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


def test_a_price_preset_is_billed_and_recorded() -> None:
    base = [*("--dataset", str(CONV), "--selector", "bm25", "--strategies", "all", "--json", "--no-progress")]
    default, hour, custom = (
        cli(*base),
        cli(*base, "--prices", "anthropic-1h"),
        cli(*base, "--prices", "anthropic-1h", "--cache-read", "0.05"),
    )
    assert default.returncode == hour.returncode == custom.returncode == 0, hour.stderr + custom.stderr
    assert "prices" not in json.loads(default.stdout)  # no preset: the report is what it always was
    report = json.loads(hour.stdout)
    assert report["prices"] == {"preset": "anthropic-1h", "cache_write": 2.0, "cache_read": 0.1, "min_prefix": 1024}
    cost = json.loads(default.stdout)["strategies"]["all"]["cost"]
    assert report["strategies"]["all"]["cost"]["20000"] > cost["20000"]  # writes cost 2x, not 1.25x
    overridden = json.loads(custom.stdout)["prices"]
    assert overridden == {"preset": "anthropic-1h+custom", "cache_write": 2.0, "cache_read": 0.05, "min_prefix": 1024}


def test_grounding_placement_and_budget_flags() -> None:
    base = [*("--dataset", str(CONV), "--selector", "bm25", "--strategies", "deferred", "--history", "20000")]
    base += ["--grounding-tokens", "500", "--json", "--no-progress"]
    appended, system = cli(*base), cli(*base, "--placement", "system")
    budget = cli(*base, "--history-budget", "20000")
    assert appended.returncode == system.returncode == budget.returncode == 0, system.stderr + budget.stderr
    a, s = (json.loads(x.stdout)["strategies"]["deferred"]["cost"]["20000"] for x in (appended, system))
    assert a < s
    reduced = json.loads(budget.stdout)
    assert reduced["context"]["history_budget"] == 20000
    assert reduced["strategies"]["deferred"]["by_history"]["20000"]["reductions"] >= 1


def test_bad_cost_flags_are_one_line_errors() -> None:
    for args, message in [
        (("--prices", "azure"), "invalid choice"),
        (("--grounding-tokens", "-5"), "--grounding-tokens must be >= 0"),
        (("--placement", "user"), "invalid choice"),
        (("--history-budget", "0"), "--history-budget must be a positive"),
        (("--low-water", "1.5"), "--low-water must be"),
    ]:
        out = cli("--dataset", str(CONV), "--selector", "bm25", *args, "--no-progress")
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    retrieval = cli("--dataset", str(CONV.parent / "eval_tiny"), "--prices", "openai-legacy", "--no-progress")
    assert retrieval.returncode == 2 and "for conversation datasets" in retrieval.stderr


def test_learn_examples_is_recorded_and_refused_on_a_tool_retrieval_set() -> None:
    out = cli("--dataset", str(CONV), "--selector", "bm25", "--learn-examples", "--json", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["learn"] == {"co_usage": True, "examples": True}
    tiny = Path(__file__).resolve().parents[1] / "data" / "eval_tiny"
    out = cli("--dataset", str(tiny), "--selector", "bm25", "--learn-examples", "--no-progress")
    assert out.returncode == 2 and "--learn-examples is for conversation datasets" in out.stderr
    assert "Traceback" not in out.stderr


def test_query_precision_is_recorded() -> None:
    out = cli(
        "--dataset", str(CONV), "--strategies", "deferred", "--query-precision", "int8", "--json", "--no-progress"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["query_precision"] == "int8"
    out = cli("--dataset", str(CONV), "--strategies", "deferred", "--json", "--no-progress")
    assert "query_precision" not in json.loads(out.stdout)  # the default float model: the report as before


def test_offer_settings_are_recorded_and_prefetch_max_reaches_the_session(tmp_path: Path) -> None:
    # four tools with the same words: the ranking's top is flat, so the prefetch widens up to --prefetch-max
    tools = [{"id": f"send_{w}", "name": f"send_{w}", "description": "Send a message."} for w in ("a", "b", "c", "d")]
    (tmp_path / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tools))
    turn = {"user": "send a message to bob", "calls": [{"name": "send_a", "arguments": {}}]}
    (tmp_path / "conversations.jsonl").write_text(json.dumps({"cid": "c", "turns": [turn]}) + "\n")
    base = ("--dataset", str(tmp_path), "--selector", "bm25", "--strategies", "deferred", "--json", "--no-progress")
    default, wide, narrow = (
        cli(*base, "--prefetch", "1", "--prefetch-cold", "0", *extra)
        for extra in ((), ("--prefetch-max", "3"), ("--prefetch-max", "0"))
    )
    assert default.returncode == wide.returncode == narrow.returncode == 0, default.stderr + wide.stderr + narrow.stderr
    reports = [json.loads(out.stdout) for out in (default, wide, narrow)]
    assert reports[0]["offer"] == {
        "k": 5,
        "search_k": 5,
        "prefetch": 1,
        "prefetch_max": 4,
        "prefetch_cold": 0,
        "prefetch_tokens": 250,
        "search_tokens": 300,
    }
    assert reports[1]["offer"]["prefetch_max"] == 3 and reports[2]["offer"]["prefetch_max"] == 0
    slots = [r["strategies"]["deferred"]["loads"]["prefetch"]["by_slot"] for r in reports]
    assert list(slots[0]) == ["1", "2", "3", "4"] and list(slots[1]) == ["1", "2", "3"] and list(slots[2]) == ["1"]
    cold = json.loads(cli(*base, "--prefetch", "1", "--prefetch-max", "1").stdout)  # the first turn: 1 + 2
    assert cold["offer"]["prefetch_cold"] == 2
    assert list(cold["strategies"]["deferred"]["loads"]["prefetch"]["by_slot"]) == ["1", "2", "3"]
    for flag in ("--prefetch-max", "--prefetch-cold"):
        bad = cli(*base, flag, "-2")
        assert bad.returncode != 0 and f"{flag} must be >= 0" in bad.stderr and "Traceback" not in bad.stderr
    any_size = json.loads(cli(*base, "--prefetch-tokens", "none", "--search-tokens", "120").stdout)
    assert any_size["offer"]["prefetch_tokens"] is None and any_size["offer"]["search_tokens"] == 120
    for flag in ("--prefetch-tokens", "--search-tokens"):
        for raw in ("-2", "many"):
            bad = cli(*base, flag, raw)
            assert bad.returncode != 0 and flag in bad.stderr and "Traceback" not in bad.stderr


def test_diff_compares_two_saved_replays_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    base = [*("--dataset", str(CONV), "--selector", "bm25", "--k", "2", "--history", "0,1000", "--json")]
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    for path, extra in ((one, ()), (two, ("--search-k", "1"))):
        out = cli(*base, "--no-progress", *extra)
        assert out.returncode == 0, out.stderr
        path.write_text(out.stdout)
    report = json.loads(one.read_text())
    assert report["conversation_ids"] == ["c0", "c1", "c2"] and report["intervals"]["draws"] == 2000
    same = cli("diff", str(one), str(one), "--json")
    assert same.returncode == 0, same.stderr
    result = json.loads(same.stdout)
    assert result["strategy"] == "deferred" and result["conversations"] == 3
    assert set(result["cost_vs_oracle"]) == {"0", "1000"}
    for fig in [result["complete_turns"], *result["cost_vs_oracle"].values()]:
        assert fig["difference"] == 0.0 and fig["interval"] == [0.0, 0.0] and not fig["clear"]
    moved = cli("diff", str(one), str(two), "--strategy", "stable")
    assert moved.returncode == 0, moved.stderr
    assert "stable over 3 conversations" in moved.stdout and "x oracle @1,000" in moved.stdout
    assert "95% interval" in moved.stdout and max(len(line) for line in moved.stdout.splitlines()) <= 120
    seeds = tmp_path / "seeds.json"  # bench/bench_conversation_scale.py --save: one replay per seed
    seeds.write_text(json.dumps([json.loads(one.read_text()), json.loads(two.read_text())]))
    pooled = cli("diff", str(one), str(seeds))
    assert pooled.returncode == 0 and "(seeds pooled: 1 / 2)" in pooled.stdout, pooled.stderr
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "other.json").write_text('{"a": 1}')
    for args, message in [
        ((str(one), str(tmp_path / "missing.json")), "cannot read"),
        ((str(one), str(tmp_path / "bad.json")), "is not JSON (line 1)"),
        ((str(tmp_path / "list.json"), str(one)), "is a list, but not of conversation replays"),
        ((str(tmp_path / "other.json"), str(one)), "is not a `shortlist eval --dataset DIR --json` report"),
        ((str(one), str(two), "--strategy", "sometimes"), "no 'sometimes' strategy"),
    ]:
        out = cli("diff", *args)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
