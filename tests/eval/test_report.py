"""The misses, the compact table, the progress line and the HTML report of ``shortlist eval``.

In-process (``shortlist.cli.main``), on the tiny datasets of tests/data; the browser checks of
the page are in test_report_browser.py.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from shortlist.cli import main
from shortlist.cli._eval_progress import Progress as _Progress
from shortlist.eval._datasets import EvalQuery
from shortlist.eval._report import CSP, Miss, bar_chart, find_misses, render_html
from shortlist.eval._runner import QueryOutcome

DATA = Path(__file__).resolve().parents[1] / "data"
TINY = DATA / "eval_tiny"
CONV = DATA / "conv_tiny"


def _library_misses(name: str) -> list[Miss]:
    """What the library finds for ``name`` on the tiny set: the CLI must say the same."""
    from shortlist.eval._datasets import load_dataset
    from shortlist.eval._runner import run_eval
    from shortlist.rankers._registry import create_builtin_selector

    dataset = load_dataset(TINY)
    outcomes: list[QueryOutcome] = []
    selector = create_builtin_selector(name)
    try:
        run_eval(selector, dataset, progress=False, on_query=outcomes.append)
    finally:
        selector.close()
    return find_misses(name, outcomes, dataset.queries, k=5)


def _outcome(qid: str, gold: tuple[str, ...], ranked: tuple[str, ...], only_pins: bool = False) -> QueryOutcome:
    return QueryOutcome(qid, "s", gold, ranked, None, None, ranked[:2], only_pins, 1.0, 10)


def test_find_misses_kinds_order_and_gold_rank() -> None:
    queries = [EvalQuery(q, f"text {q}", (), "s") for q in ("q1", "q2", "q3", "q4", "q5")]
    outcomes = [
        _outcome("q1", ("a",), ("a", "b")),  # hit
        _outcome("q2", ("a", "z"), ("a", "b", "z")),  # partial at k=2: z is third
        _outcome("q3", (), ("a", "b")),  # no-tool query, something surfaced
        _outcome("q4", ("z",), ("a", "b", "c", "z")),  # missed, gold at rank 4
        _outcome("q5", (), ("a",), only_pins=True),  # abstained correctly
    ]
    misses = find_misses("bm25", outcomes, queries, k=2)
    assert [(m.qid, m.kind, m.gold_rank) for m in misses] == [
        ("q4", "missed", 4),
        ("q2", "partial", 1),
        ("q3", "no-tool", None),
    ]
    assert misses[0].query == "text q4" and misses[0].to_json()["ranked"] == ["a", "b", "c", "z"]


def test_table_fits_100_columns_with_integer_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "--dataset", str(TINY), "--compare", "bm25,overlap", "--curve", "--misses", "5"])
    out = capsys.readouterr()
    assert code == 0
    lines = out.out.splitlines()
    assert max(len(line) for line in lines) <= 100
    header = next(line for line in lines if line.startswith("selector"))
    assert header.split() == [
        "selector", "queries", "R@1", "R@5", "R@10", "nDCG", "MRR", "abst", "R@5ab", "p50", "ms", "p99", "ms",
        "tokens", "saved", "build", "s",
    ]  # fmt: skip
    bm25 = next(line for line in lines if line.startswith("bm25"))
    tokens = bm25.split()[-3]
    assert re.fullmatch(r"[\d,]+", tokens), bm25  # an integer, not 129.000
    expected = _library_misses("bm25")
    assert expected, "the tiny set should trip bm25 somewhere"
    assert f"misses of bm25: {len(expected)} " in out.out
    assert f"  [{expected[0].kind}] {expected[0].qid}: {expected[0].query}" in out.out
    # not a terminal: whole progress lines (issue 27, item 28), never a redrawn line
    assert "\r" not in out.err and all(line.startswith("shortlist: eval ") for line in out.err.splitlines())
    assert "shortlist: eval bm25: queries: 4/4 (100%)" in out.err


def test_misses_text_lines_fit_100_columns() -> None:
    from shortlist.cli._eval_output import misses_text as _misses_text

    long = Miss(
        "hybrid",
        "similar-0001",
        "s",
        "q" * 300,
        ("g" * 120,),
        tuple(f"tool_{i}" * 5 for i in range(10)),
        "missed",
        None,
    )
    lines = _misses_text({"hybrid": [long, long]}, 1, 5).splitlines()
    assert max(len(line) for line in lines) == 100 and lines[-1] == "  … 1 more"
    assert lines[1].startswith("  [missed] similar-0001: qqq") and lines[1].endswith("…")


def test_misses_in_json_are_capped_per_selector(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--dataset", str(TINY), "--selector", "bm25", "--json", "--misses", "1"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["misses"] == [m.to_json() for m in _library_misses("bm25")[:1]]
    assert set(rep["misses"][0]) == {"selector", "qid", "split", "query", "gold", "ranked", "kind", "gold_rank"}


def test_bad_flags_are_one_line_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["eval", "--dataset", str(TINY), "--misses", "-1"]) == 2
    assert capsys.readouterr().err == "shortlist: error: --misses must be >= 0\n"
    assert main(["eval", "--dataset", str(TINY), "--report", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["eval", "--dataset", str(CONV), "--misses", "3"]) == 2
    assert "--misses are for tool-retrieval datasets" in capsys.readouterr().err
    assert main(["eval", "--dataset", str(TINY), "--report", str(tmp_path / "no" / "dir" / "r.html")]) == 2
    assert "cannot write --report" in capsys.readouterr().err


def test_report_file_is_self_contained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "r.html"
    assert main(["eval", "--dataset", str(TINY), "--compare", "bm25,overlap", "--curve", "--report", str(target)]) == 0
    assert f"report written to {target}" in capsys.readouterr().err
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and CSP in page
    assert not re.search(r"""(src|href)\s*=|@import|url\(|https?://(?!www\.w3)""", page)  # nothing to fetch
    assert page.count('<svg class="chart"') == 3  # nDCG and Recall@5 per split, the curve
    misses = len(_library_misses("bm25")) + len(_library_misses("overlap"))
    assert 'id="abstention-curve"' in page and page.count('class="miss"') == misses
    assert list(tmp_path.iterdir()) == [target]  # written atomically, no temp file left
    intervals = re.findall(r'<p class="interval">(bm25|overlap): 95% bootstrap interval over its 3 queries', page)
    assert intervals == ["bm25", "overlap"]


def test_conversation_report_has_its_charts(tmp_path: Path) -> None:
    target = tmp_path / "c.html"
    assert main(["eval", "--dataset", str(CONV), "--selector", "bm25", "--report", str(target)]) == 0
    page = target.read_text(encoding="utf-8")
    for chart in ("conversation-cost", "conversation-recall", "conversation-tokens"):
        assert f'id="{chart}"' in page
    assert 'id="misses"' not in page and "(1.00×)" in page
    assert "<th>preloaded</th>" in page and "<th>× oracle @20,000</th>" in page
    assert re.search(r"<td>1\.00× \(1\.00–1\.00\)</td>", page)  # the oracle's own, with its interval
    # where deferred's prefetched and searched definitions went, as the text output prints it
    loads = page.split('id="conversation-loads"', 1)[1].split("</table>", 1)[0]
    assert "<td>prefetch 1</td>" in loads and "<td>search result 1</td>" in loads


def test_a_report_without_loads_has_no_loads_table() -> None:
    row: dict[str, Any] = {"turn_recall": 1.0, "complete_turns": 1.0, "tools_per_turn": 1.0}
    row |= {"tool_tokens_per_turn": 5.0, "tool_block_changes": 0.0, "cost": {"0": 10.0}}
    report = {"conversations": 1, "turns": 1, "catalog_tokens": 5, "counter": "c", "default": "deferred"}
    page = render_html(title="t", conversation={**report, "strategies": {"all": row}})
    assert 'id="conversation"' in page and 'id="conversation-loads"' not in page


def test_texts_are_escaped() -> None:
    miss = Miss("bm25", "q1", "s", "<script>alert(1)</script>", ("<b>",), ("x&y",), "missed", None)
    report = {
        "queries": 1,
        "queries_no_tool": 0,
        "tokens": {"counter": "c", "all": 10, "selected_mean": 5.0, "reduction": 0.5},
        "latency_ms": {"p50": 1.0, "p99": 2.0},
        "build_s": 0.1,
        "splits": {"s": {}},
    }
    page = render_html(title="t <i>", reports={"bm25": report}, misses=[miss])
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x&amp;y" in page and "t &lt;i&gt;" in page


def test_bar_chart_skips_missing_values_and_keeps_a_scale() -> None:
    svg = bar_chart("c", "t", ["g1", "g2"], ["s"], {("g1", "s"): 2.0, ("g2", "s"): None})
    assert svg.count('class="bar"') == 1 and 'data-value="2.0"' in svg
    assert bar_chart("z", "t", ["g"], ["s"], {("g", "s"): 0.0}).count('class="bar"') == 1


def test_progress_moves_during_work_and_clears_its_line() -> None:
    stream = io.StringIO()
    with _Progress(True, stream) as progress:
        progress.phase("eval bm25: loading")
        progress.listener("embedding", 5, 10)
        progress._draw()
        drawn = stream.getvalue()
        progress.count(3, 10)
        progress._draw()
    out = stream.getvalue()
    assert "eval bm25: loading: embedding 5/10 …" in drawn
    assert "eval bm25: loading: 3/10 queries" in out
    assert out.endswith("\r") and "\n" not in out  # one line, redrawn, cleared at the end
    quiet = io.StringIO()
    with _Progress(False, quiet) as progress:
        progress.phase("nothing")
        progress.count(1, 2)
    assert quiet.getvalue() == ""


# -- issue 27, item 28: progress when stderr is not a terminal; why no-tool queries are misses ----------


def test_progress_lines_every_step_and_one_per_uncounted_task() -> None:
    from shortlist.cli._progress import ProgressLines

    stream = io.StringIO()
    lines = ProgressLines(stream, step_pct=5, min_interval_s=0)
    lines.on_report("loading the model", 0, None)
    lines.on_report("loading the model", 0, None)  # still loading: no second line
    lines.on_report("loading the model", -1, None)
    for done in range(0, 1001):
        lines.on_report("eval bm25: queries", done, 1000)
    out = stream.getvalue().splitlines()
    assert out[0] == "shortlist: loading the model …"
    counted = out[1:]
    assert len(counted) == 21 and counted[0].startswith("shortlist: eval bm25: queries: 0/1,000 (0%)")
    assert counted[1].startswith("shortlist: eval bm25: queries: 50/1,000 (5%)")
    assert counted[-1].startswith("shortlist: eval bm25: queries: 1,000/1,000 (100%)")
    assert "\r" not in stream.getvalue()


def test_progress_lines_are_throttled_and_survive_a_closed_stream() -> None:
    from shortlist.cli._progress import ProgressLines

    stream = io.StringIO()
    lines = ProgressLines(stream, min_interval_s=3600)  # a fast task: its start and its end only
    for done in range(101):
        lines.on_report("t", done, 100)
    assert [line.split(":")[2].split()[0] for line in stream.getvalue().splitlines()] == ["0/100", "100/100"]
    stream.close()
    lines.on_report("u", 1, 10)  # the reader went away: the work goes on
    lines.note("still fine")
    with pytest.raises(ValueError):
        ProgressLines(io.StringIO(), step_pct=0)


def test_eval_piped_prints_progress_lines_and_no_progress_silences_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--dataset", str(TINY), "--selector", "bm25"]) == 0
    err = capsys.readouterr().err
    assert "shortlist: eval bm25: loading the selector and indexing 6 tools" in err
    assert "shortlist: eval bm25: queries: 1/4 (25%)" in err and "queries: 4/4 (100%)" in err
    assert main(["eval", "--dataset", str(CONV), "--selector", "bm25", "--strategies", "all"]) == 0
    err = capsys.readouterr().err
    assert "shortlist: eval bm25: replaying all @0: 0/3 (0%)" in err and "replaying all @0: 3/3 (100%)" in err
    assert main(["eval", "--dataset", str(TINY), "--selector", "bm25", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def _report(no_tool: int, abstention: float) -> dict[str, object]:
    return {
        "queries": 10,
        "queries_no_tool": no_tool,
        "abstention": abstention,
        "tokens": {"counter": "c", "all": 10, "selected_mean": 5.0, "reduction": 0.5},
        "latency_ms": {"p50": 1.0, "p99": 2.0},
        "build_s": 0.1,
        "splits": {"s": {}},
    }


def test_the_report_says_why_no_tool_queries_are_misses_without_abstention() -> None:
    page = render_html(title="t", reports={"bm25": _report(3, 0.0), "tuned": _report(3, 0.67)}, k=5)
    note = page[page.index('class="note"') :]
    assert "Never abstained: bm25 (3 no-tool queries)" in note and "tuned" not in note.split("</p>")[0]
    assert "<code>min_score</code>" in note and "top 5 tools on every turn" in note and "--curve" in note
    assert 'class="note"' not in render_html(title="t", reports={"bm25": _report(0, 0.0)})  # no no-tool query
    assert 'class="note"' not in render_html(title="t", reports={"tuned": _report(3, 0.67)})
