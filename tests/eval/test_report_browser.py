"""The HTML report of ``shortlist eval --report`` in a real headless Chromium (Debian's).

The page is opened from ``file://``: it renders, its charts are there, the misses filter
works, no request leaves the file (the page's CSP forbids any, and the recorded network
requests are the file itself), no script error; screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from chromium import browser_page
from shortlist.cli import main

pytestmark = pytest.mark.slow  # starts Chromium / the CLI under a terminal

DATA = Path(__file__).resolve().parents[1] / "data"


def test_tool_retrieval_report_renders_filters_and_stays_offline(tmp_path: Path) -> None:
    report = tmp_path / "eval.html"
    args = ["eval", "--dataset", str(DATA / "eval_tiny"), "--compare", "bm25,overlap", "--curve"]
    assert main([*args, "--report", str(report)]) == 0
    with browser_page() as page:
        page.goto(report.as_uri())
        assert page.js("document.title") == "shortlist eval: eval_tiny"
        assert page.js("document.querySelectorAll('svg.chart').length") == 3
        assert page.js("document.querySelectorAll('#split-ndcg\\\\@10 rect.bar').length") == 6  # 3 splits x 2
        assert page.js("document.querySelectorAll('#abstention-curve polyline').length") == 2
        assert page.js("document.querySelector('#split-ndcg\\\\@10').getBoundingClientRect().height") > 100
        assert page.js("document.querySelectorAll('#metrics tbody tr').length") == 6
        visible = "Array.from(document.querySelectorAll('#misses tr.miss')).filter(r => !r.hidden).length"
        assert page.js(visible) == 4
        page.type_into("#miss-filter", "french")
        assert page.js(visible) == 2 and page.js("document.getElementById('miss-count').textContent") == "2"
        page.js(
            "const s = document.getElementById('miss-selector'); s.value = 'overlap';"
            "s.dispatchEvent(new Event('change'))"
        )
        assert page.js(visible) == 1
        page.js("const f = document.getElementById('miss-filter'); f.value = ''; f.dispatchEvent(new Event('input'))")
        assert page.js(visible) == 2  # overlap's two misses
        shot = page.screenshot("eval-report.png")
        assert shot.stat().st_size > 10_000
        assert page.requested_urls() == [report.as_uri()]
        assert page.console_errors() == []


def test_conversation_report_renders_its_charts(tmp_path: Path) -> None:
    report = tmp_path / "conv.html"
    assert main(["eval", "--dataset", str(DATA / "conv_tiny"), "--selector", "bm25", "--report", str(report)]) == 0
    with browser_page() as page:
        page.goto(report.as_uri())
        assert page.js("document.querySelectorAll('#conversation-cost rect.bar').length") == 8  # 4 strategies x 2
        assert page.js("document.querySelectorAll('#conversation tbody tr').length") == 4
        assert page.js("document.querySelectorAll('#conversation-recall rect.bar').length") == 8
        page.screenshot("eval-report-conversation.png")
        assert page.requested_urls() == [report.as_uri()]
        assert page.console_errors() == []


def _run_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; return its exit code and what the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shortlist.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        stdin=subprocess.DEVNULL,
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def test_progress_is_drawn_on_a_terminal_from_the_start_and_not_with_no_progress() -> None:
    code, shown = _run_on_a_terminal("eval", "--dataset", str(DATA / "eval_tiny"), "--selector", "hybrid")
    assert code == 0
    assert "eval hybrid: loading the selector and indexing 6 tools" in shown  # before the first query
    assert "eval hybrid: 4/4 queries" in shown
    code, shown = _run_on_a_terminal("eval", "--dataset", str(DATA / "eval_tiny"), "--no-progress")
    assert code == 0 and shown == ""
