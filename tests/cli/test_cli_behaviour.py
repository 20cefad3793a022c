"""The CLI as a user meets it, as real processes: pipes closed early, missing extras, progress on a
terminal only, ``reduce``'s default and summary, usage examples from a feedback log, the cache command,
``serve``'s start-up lines, and a cold ``select`` under the README's ``timeout_ms: 2000``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shortlist._install import install_origin, pip_install_for
from terminal import run_on_terminal

pytestmark = pytest.mark.slow  # every test runs the CLI as subprocesses

REPO = Path(__file__).resolve().parents[2]
BLOCKER = """
import sys
BLOCK = {"fastapi", "uvicorn", "prometheus_client", "starlette", "mcp", "qdrant_client", "psycopg"}
class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Blocker())
"""


def env(cache: Path | None = None, **extra: str) -> dict[str, str]:
    out = dict(os.environ)
    if cache is not None:
        out["SHORTLIST_CACHE_DIR"] = str(cache)
    out.update(extra)
    return out


def cli(*args: str, cache: Path | None = None, timeout: float = 180, **kw: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shortlist.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(cache, **kw),
    )


def conversation(tmp_path: Path) -> Path:
    filler = " ".join(["Rome had many emperors and wars and buildings."] * 12)
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "I am allergic to peanuts. Please remember that."},
        {"role": "assistant", "content": "Noted: you are allergic to peanuts."},
        {"role": "user", "content": "Tell me about the history of Rome."},
        {"role": "assistant", "content": filler},
        {"role": "user", "content": "And Paris?"},
        {"role": "assistant", "content": " ".join(["Paris has streets, cafes and museums."] * 12)},
        {"role": "user", "content": "Can I eat a snickers bar given my allergy to peanuts?"},
    ]
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    return path


# -- pipes closed early ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["select", "what's the weather in Paris tomorrow", "--selector", "bm25"],
        ["select", "weather", "--selector", "bm25", "--k", "0", "--json"],
        ["reduce", "--max-tokens", "100000"],
        ["cache", "info"],
        ["schema", "runtime"],
    ],
)
def test_a_reader_that_stops_early_gets_no_traceback(args: list[str], tmp_path: Path) -> None:
    if args[0] == "reduce":
        args = [*args, "--messages", str(conversation(tmp_path))]
    proc = subprocess.Popen(
        [sys.executable, "-m", "shortlist.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(tmp_path / "cache"),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before the first write
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=180) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err


def test_head_reads_the_first_line_of_a_long_output(tmp_path: Path) -> None:
    catalog = tmp_path / "tools.jsonl"
    with catalog.open("w") as fh:
        for i in range(3000):
            fh.write(
                json.dumps({"id": f"t{i}", "name": f"t{i}", "description": f"weather tool number {i} " * 8}) + "\n"
            )
    shell = f"{sys.executable} -m shortlist.cli select weather --catalog {catalog} --selector bm25 --k 3000 | head -1"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=180, env=env(tmp_path))
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


# -- missing extras ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["serve"], "server"),
        (["mcp-proxy", "--mcp-server", "t=true"], "mcp"),
        (["select", "hi", "--mcp-server", "t=true"], "mcp"),
        (["index", "build", "--docs", "docs", "--path", "{tmp}/q", "--backend", "qdrant"], "qdrant"),
    ],
)
def test_a_missing_extra_is_an_install_hint(args: list[str], extra: str, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env=env(
            tmp_path / "cache", PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
        ),
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shortlist: error:")
    assert pip_install_for(install_origin(), extra, cwd=REPO) in lines[0]  # the command for this installation


# -- progress ----------------------------------------------------------------------------------


def test_progress_moves_on_a_terminal_and_is_off_otherwise(tmp_path: Path) -> None:
    cache = tmp_path / "cold"  # a cold cache: the model graph is optimised, the catalog embedded
    args = [sys.executable, "-m", "shortlist.cli", "select", "weather in Paris", "--selector", "embedding"]
    proc, raw = run_on_terminal(args, env=env(cache))
    drawn = raw.decode(errors="replace")
    assert proc.returncode == 0
    assert "loading the embedding model" in drawn
    assert len(re.findall(r"\r", drawn)) >= 3  # redrawn while the work runs, not once at the end
    assert drawn.endswith("\r\x1b[K")  # erased: stdout's answer is all that stays
    assert b"loading" not in proc.stdout
    piped = cli("select", "weather in Paris", "--selector", "embedding", cache=cache)
    assert piped.returncode == 0 and piped.stderr == ""  # stderr is no terminal: nothing drawn
    quiet, rest = run_on_terminal([*args, "--no-progress"], env=env(tmp_path / "c2"))
    assert quiet.returncode == 0 and b"loading" not in rest


# -- select ------------------------------------------------------------------------------------


def test_k_zero_is_explained_and_bm25_does_not_pad() -> None:
    helped = cli("select", "--help")
    assert "0: the selector's own default" in " ".join(helped.stdout.split())
    proc = cli("select", "what's the weather in Paris tomorrow", "--selector", "bm25", "--k", "0", "--json")
    out = json.loads(proc.stdout)
    assert out["fallback"] is None
    assert 0 < len(out["ranked"]) < 10  # only the tools that share a term with the query
    assert len(out["scores"]) == len(out["ranked"]) and all(score > 0 for score in out["scores"])


def test_examples_option_uses_the_feedback_log(tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    added = cli("feedback", "add", "--db", str(db), "--query", "zorblax my quarterly figures", "--used", "send_email")
    assert added.returncode == 0, added.stderr
    plain = json.loads(cli("select", "zorblax", "--selector", "bm25", "--json").stdout)
    assert set(plain["scores"]) == {0.0}  # no tool knows the word
    taught = json.loads(cli("select", "zorblax", "--selector", "bm25", "--examples", str(db), "--json").stdout)
    assert taught["fallback"] is None and taught["ranked"] == ["send_email"] and taught["scores"][0] > 0
    missing = cli("select", "zorblax", "--examples", str(tmp_path / "typo.db"))
    assert missing.returncode == 2 and "no such feedback log" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def readme_config() -> str:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    found = [b for b in blocks if "timeout_ms: 2000" in b and "tool_selector" in b]
    assert found, "README.md no longer has the example runtime.yaml with selection.timeout_ms: 2000"
    return found[0]


def test_a_cold_select_with_the_readme_config_narrows(tmp_path: Path) -> None:
    config = tmp_path / "runtime.yaml"
    config.write_text(readme_config())
    # (a query above the config's min_score: 0.57, which its hybrid abstains below)
    proc = cli(
        "select",
        "get the weather forecast for Paris tomorrow",
        "--config",
        str(config),
        "--json",
        cache=tmp_path / "cold",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["fallback"] is None, out  # not "timeout": the model load and the catalog's embedding are off it
    assert "get_weather_forecast" in out["ranked"] and len(out["selected"]) < 38


# -- reduce ------------------------------------------------------------------------------------


def test_reduce_defaults_to_relevance_and_says_what_it_did(tmp_path: Path) -> None:
    helped = " ".join(cli("reduce", "--help").stdout.split())
    assert "relevance (default" in helped
    proc = cli("reduce", "--messages", str(conversation(tmp_path)), "--max-tokens", "120")
    assert proc.returncode == 0, proc.stderr
    kept = json.loads(proc.stdout)
    assert any("allergic to peanuts. Please" in m["content"] for m in kept)  # the first message survives
    summary = proc.stderr.splitlines()
    assert summary[0].startswith("reduce (relevance): kept ") and "of 8 messages" in summary[0]
    assert any(line.strip().startswith("dropped: m") for line in summary[1:])


# -- cache -------------------------------------------------------------------------------------


def test_cache_info_and_clear(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    empty = json.loads(cli("cache", "info", "--json", cache=cache).stdout)
    assert empty["enabled"] and empty["vectors"]["vectors"] == 0
    first = cli("select", "weather", "--selector", "embedding", "--json", cache=cache)
    assert first.returncode == 0, first.stderr
    info = json.loads(cli("cache", "info", "--json", cache=cache).stdout)
    assert info["path"] == str(cache) and info["vectors"]["vectors"] == 36  # the 38 tools but the 2 pins
    [(model, count)] = info["vectors"]["models"].items()
    assert model.startswith("minilm-tools-int8@") and count == 36  # tools rank with the fine-tuned model
    assert len(info["model_graphs"]) == 1
    text = cli("cache", "info", cache=cache).stdout
    assert "vectors: 36" in text and str(cache) in text
    cleared = json.loads(cli("cache", "clear", "--json", cache=cache).stdout)
    assert cleared["vectors_deleted"] == 36 and cleared["model_graphs_deleted"] == 1
    assert json.loads(cli("cache", "info", "--json", cache=cache).stdout)["vectors"]["vectors"] == 0
    off = cli("cache", "info", SHORTLIST_CACHE_DIR="off")
    assert off.returncode == 0 and "off" in off.stdout


def test_a_second_select_reads_the_catalog_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    counts, answers = [], []
    for _ in range(2):
        proc = cli("select", "weather", "--selector", "embedding", "--json", cache=cache)
        assert proc.returncode == 0, proc.stderr
        answers.append(json.loads(proc.stdout))
        counts.append(json.loads(cli("cache", "info", "--json", cache=cache).stdout)["vectors"]["vectors"])
    assert counts == [36, 36]  # the second process embedded nothing new
    assert answers[0]["ranked"] == answers[1]["ranked"] and answers[0]["scores"] == answers[1]["scores"]


# -- serve -------------------------------------------------------------------------------------


def test_serve_says_where_it_listens_and_when_it_is_ready(tmp_path: Path) -> None:
    from loopback import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(port), "--selector", "bm25"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(tmp_path / "cache"),
    )
    assert proc.stderr is not None
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "ready on" in line:
                break
        assert lines[0].startswith(f"shortlist serve: starting on http://127.0.0.1:{port}")
        assert re.match(rf"shortlist serve: ready on http://127\.0\.0\.1:{port} after \d+\.\d s", lines[-1]), lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
