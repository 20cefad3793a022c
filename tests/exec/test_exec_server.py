"""`shortlist exec-selector`: shortlist as an external selector, for the Go reference and for ourselves."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from exec_helpers import PYTHON

import inprocess
from shortlist._events import Event
from shortlist._types import Candidate, Query
from shortlist.exec._events import ExecSpawned
from shortlist.exec._server import answer_quietly, serve_worker
from shortlist.rankers._exec_client import ExecSelector
from shortlist.rankers._registry import DEFAULT_SELECTOR, create_builtin_selector
from shortlist.selection._base import FunctionSelector
from shortlist.selection._narrowing import narrow

CLI = [PYTHON, "-m", "shortlist.cli", "exec-selector"]
CANDS = [
    Candidate("get_weather", description="Get the weather forecast for a city"),
    Candidate("refund_order", description="Refund a customer's order"),
    Candidate("track_package", description="Track where a package is"),
]
GO_PAYLOAD = {  # what the Go reference really sends: no version, Go field names, Metadata null, K=0 for skills
    "Query": {"Text": "please refund my order", "Kind": "skill", "PackID": "", "AgentID": "", "K": 0},
    "Candidates": [{"ID": c.id, "Name": c.id, "Description": c.description, "Metadata": None} for c in CANDS],
}


def run_cli(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False)


def call_cli(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The same command called in this process (a message or an exit code needs no process of its own)."""
    return inprocess.run_cli("exec-selector", *args, stdin=stdin)


@pytest.mark.slow  # `shortlist exec-selector` processes
def test_go_shaped_payload_through_the_real_cli() -> None:
    proc = run_cli(stdin=json.dumps(GO_PAYLOAD))
    assert proc.returncode == 0, proc.stderr
    response = json.loads(proc.stdout)
    assert response["selected"][0] == "refund_order"
    assert len(response["scores"]) == len(response["selected"])
    expected = create_builtin_selector(DEFAULT_SELECTOR).select(Query("please refund my order", kind="skill"), CANDS)
    assert tuple(response["selected"]) == expected.selected


@pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)
def test_bad_request_is_a_json_error_on_stderr_and_exit_1() -> None:
    proc = call_cli(stdin="INFO not a request")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "not exactly one JSON document" in json.loads(proc.stderr.strip().splitlines()[-1])["error"]


@pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)
def test_unknown_selector_name_is_a_one_line_error_exit_2() -> None:
    proc = call_cli("--selector", "nope", stdin="{}")
    assert proc.returncode == 2
    assert proc.stderr.startswith("shortlist: error:") and "nope" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)
def test_config_declared_selector(tmp_path: Path) -> None:
    config = tmp_path / "runtime.yaml"
    config.write_text("spec:\n  selectors:\n    mine:\n      type: overlap\n      options: {top_k: 1}\n")
    proc = call_cli("--config", str(config), "--selector", "mine", stdin=json.dumps(GO_PAYLOAD))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["selected"] == ["refund_order"]


@pytest.mark.slow  # `shortlist exec-selector` processes
def test_worker_mode_answers_lines_and_errors_in_band() -> None:
    lines = [
        json.dumps(
            {
                "id": 1,
                "query": {"text": "weather in paris"},
                "candidates": [{"id": c.id, "description": c.description} for c in CANDS],
            }
        ),
        "garbage",
        json.dumps({"ID": "x", **GO_PAYLOAD}),
    ]
    proc = run_cli("--worker", stdin="\n".join(lines) + "\n\n")
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == 3
    assert out[0]["id"] == 1 and out[0]["selected"][0] == "get_weather"
    assert "error" in out[1] and "id" not in out[1]
    assert out[2]["id"] == "x" and out[2]["selected"][0] == "refund_order"


@pytest.mark.slow  # `shortlist exec-selector` processes
def test_our_exec_client_round_trips_through_exec_selector_worker(events: list[Event]) -> None:
    """Same answers as in-process; after the first call the unchanged list travels as candidates_ref."""
    with ExecSelector(
        "shortlist", PYTHON, ["-m", "shortlist.cli", "exec-selector", "--worker"], worker=True, timeout_ms=30000
    ) as sel:
        local = create_builtin_selector(DEFAULT_SELECTOR)
        for text in ("refund my order", "weather in paris", "where is my package"):
            query = Query(text, k=2)
            remote, here = sel.select(query, CANDS), local.select(query, CANDS)
            assert remote.selected == here.selected
            assert remote.scores == pytest.approx(here.scores, abs=1e-5)
        turn = narrow(sel, Query("track my package"), CANDS)
        assert turn.fallback is None and turn.ranked[0] == "track_package"
    assert sum(isinstance(e, ExecSpawned) for e in events) == 1


@pytest.mark.slow  # `shortlist exec-selector` processes
def test_our_exec_client_spawn_per_call_through_exec_selector() -> None:
    sel = ExecSelector("shortlist", PYTHON, ["-m", "shortlist.cli", "exec-selector"], timeout_ms=30000)
    assert sel.select(Query("refund my order"), CANDS).selected[0] == "refund_order"


def test_selector_prints_cannot_corrupt_stdout() -> None:
    def noisy(query: Query, cands: object) -> list[str]:
        sys.stdout.write("debug output from a selector\n")
        return ["a"]

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        sys_stderr = sys.stderr
        doc = '{"id": 3, "query": {"text": "x"}, "candidates": [{"id": "a"}]}'
        out, rid = answer_quietly(FunctionSelector(noisy), doc)
        assert sys.stderr is sys_stderr
    assert json.loads(out) == {"id": 3, "selected": ["a"], "reason": "", "scores": None}
    assert rid == 3
    assert "debug output from a selector" in err.getvalue()


def test_serve_worker_in_process() -> None:
    stdin = io.BytesIO(b'{"id": 1, "query": {"text": "x"}, "candidates": [{"id": "a"}]}\n\n{"id": 2}\n')
    stdout = io.BytesIO()
    assert serve_worker(FunctionSelector(lambda q, c: [c[0].id]), stdin, stdout) == 0
    first, second = (json.loads(line) for line in stdout.getvalue().splitlines())
    assert first["selected"] == ["a"]
    assert second["id"] == 2 and "query" in second["error"]


def test_serve_worker_keeps_acknowledged_candidate_lists() -> None:
    full = {"id": 1, "candidates_ref": "r1", "query": {"text": "x", "k": 1}, "candidates": [{"id": "a"}, {"id": "b"}]}
    by_ref = {"id": 2, "candidates_ref": "r1", "query": {"text": "x", "k": 2}}
    unknown = {"id": 3, "candidates_ref": "nope", "query": {"text": "x"}}
    stdin = io.BytesIO(b"\n".join(json.dumps(d).encode() for d in (full, by_ref, unknown)) + b"\n")
    stdout = io.BytesIO()
    serve_worker(FunctionSelector(lambda q, c: [x.id for x in c][: q.k or None]), stdin, stdout)  # k=2 of 2: k=0
    first, second, third = (json.loads(line) for line in stdout.getvalue().splitlines())
    assert first == {"id": 1, "candidates_ref": "r1", "selected": ["a"], "reason": "", "scores": None}
    assert second["selected"] == ["a", "b"] and second["candidates_ref"] == "r1"
    assert third["id"] == 3 and "unknown candidates_ref" in third["error"]
