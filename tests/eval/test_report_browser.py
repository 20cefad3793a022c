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
from shortlist.eval._report import Miss

pytestmark = pytest.mark.slow  # starts Chromium / the CLI under a terminal

DATA = Path(__file__).resolve().parents[1] / "data"


def _library_misses(name: str) -> list[Miss]:
    """What the library finds for ``name`` on the tiny set (the page must list the same)."""
    from shortlist.eval._datasets import load_dataset
    from shortlist.eval._report import find_misses
    from shortlist.eval._runner import QueryOutcome, run_eval
    from shortlist.rankers._registry import create_builtin_selector

    dataset = load_dataset(DATA / "eval_tiny")
    outcomes: list[QueryOutcome] = []
    selector = create_builtin_selector(name)
    try:
        run_eval(selector, dataset, progress=False, on_query=outcomes.append)
    finally:
        selector.close()
    return find_misses(name, outcomes, dataset.queries, k=5)


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
        misses = _library_misses("bm25") + _library_misses("overlap")
        assert len(misses) >= 2 and page.js(visible) == len(misses)
        word = misses[0].query.split()[-1]  # a word of the worst miss's query

        def shown(m: Miss) -> bool:
            text = " ".join([m.selector, m.kind, m.split, m.query, *m.gold, *m.ranked]).lower()
            return word.lower() in text

        with_word = [m for m in misses if shown(m)]
        page.type_into("#miss-filter", word)
        assert page.js(visible) == len(with_word)
        assert page.js("document.getElementById('miss-count').textContent") == str(len(with_word))
        page.js(
            "const s = document.getElementById('miss-selector'); s.value = 'overlap';"
            "s.dispatchEvent(new Event('change'))"
        )
        assert page.js(visible) == len([m for m in with_word if m.selector == "overlap"])
        page.js("const f = document.getElementById('miss-filter'); f.value = ''; f.dispatchEvent(new Event('input'))")
        assert page.js(visible) == len([m for m in misses if m.selector == "overlap"])
        shot = page.screenshot("eval-report.png")
        assert shot.stat().st_size > 10_000
        assert page.requested_urls() == [report.as_uri()]
        assert page.console_errors() == []


def test_conversation_report_renders_its_charts(tmp_path: Path) -> None:
    report = tmp_path / "conv.html"
    assert main(["eval", "--dataset", str(DATA / "conv_tiny"), "--selector", "bm25", "--report", str(report)]) == 0
    with browser_page() as page:
        page.goto(report.as_uri())
        assert page.js("document.querySelectorAll('#conversation-cost rect.bar').length") == 10  # 5 strategies x 2
        assert page.js("document.querySelectorAll('#conversation tbody tr').length") == 5
        assert page.js("document.querySelectorAll('#conversation-recall rect.bar').length") == 10
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
