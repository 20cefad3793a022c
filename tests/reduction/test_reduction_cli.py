"""``shortlist reduce`` called in-process, and as a real subprocess (slow; ``cli_mode``): output, exit code 3 with
the overrun, bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import inprocess
from shortlist.reduction._adapters import check_openai_tool_pairs

pytestmark = pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return inprocess.run_cli("reduce", *args, stdin=stdin)


def conversation() -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(12):
        msgs.append({"role": "user", "content": f"step {i}: look at module{i}"})
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": f'{{"path": "module{i}.py"}}'},
                    }
                ],
            }
        )
        body = "def kafka_consumer(): pass\n" if i == 2 else f"def helper_{i}(): return {i}\n"
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": body * 40})
        msgs.append({"role": "assistant", "content": f"module{i} read"})
    msgs.append({"role": "user", "content": "Where is the kafka consumer defined?"})
    return msgs


@pytest.fixture
def messages_file(tmp_path: Path) -> Path:
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(conversation()), encoding="utf-8")
    return path


def test_reduce_json_output(messages_file: Path) -> None:
    proc = run_cli("--messages", str(messages_file), "--max-tokens", "600", "--selector", "relevance", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["tokens_before"] > 600 >= out["tokens_after"]
    msgs = out["messages"]
    assert msgs[0]["role"] == "system" and msgs[-1]["content"] == "Where is the kafka consumer defined?"
    assert check_openai_tool_pairs(msgs) == []
    assert any("kafka_consumer" in str(m.get("content")) for m in msgs)  # the relevant output survived
    names = [d["name"] for d in out["diagnostics"]]
    assert names[0] == "reduction.started" and names[-1] == "reduction.completed"
    assert "reduction.applied" in names


def test_reduce_plain_output_is_the_messages_array(messages_file: Path) -> None:
    proc = run_cli("--messages", str(messages_file), "--max-chars", "3000")
    assert proc.returncode == 0, proc.stderr
    msgs = json.loads(proc.stdout)
    assert isinstance(msgs, list) and sum(len(str(m.get("content") or "")) for m in msgs) <= 3000


def test_reduce_reads_stdin() -> None:
    proc = run_cli("--messages", "-", "--max-tokens", "100000", stdin=json.dumps(conversation()))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == conversation()  # within budget: unchanged


def test_budget_that_cannot_be_met_exits_3_and_says_by_how_much(messages_file: Path) -> None:
    proc = run_cli("--messages", str(messages_file), "--max-tokens", "5")
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shortlist: error:")
    assert "tokens over max_tokens=5" in lines[0]


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("{not json", ["--max-tokens", "10"], "not valid JSON"),
        ('{"a": 1}', ["--max-tokens", "10"], "JSON array"),
        ('[{"role": "wizard", "content": "x"}]', ["--max-tokens", "10"], "unknown role"),
        ("[]", [], "--max-tokens"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: str, args: list[str], message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    proc = run_cli("--messages", str(path), *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_missing_file_exits_2(tmp_path: Path) -> None:
    proc = run_cli("--messages", str(tmp_path / "nope.json"), "--max-tokens", "10")
    assert proc.returncode == 2 and "cannot read" in proc.stderr
