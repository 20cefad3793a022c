"""Dataset loading, validation errors, train examples, the runner on a tiny fixture with hand-computed metrics."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from shortlist._types import Candidate, Query, Selection
from shortlist.errors import CatalogError
from shortlist.eval._datasets import EvalQuery, apply_train_examples, load_dataset, load_queries
from shortlist.eval._runner import abstention_curve, run_eval
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.selection._base import FunctionSelector

TINY = Path(__file__).resolve().parents[1] / "data" / "eval_tiny"


class OneTokenPerTool:
    name = "one-per-tool"

    def count(self, text: str) -> int:
        return 1


RANKINGS = {
    "what is the weather in Paris tomorrow": ["send_email", "get_weather", "search_web", "stock_price", "create_event"],
    "email my boss and book a meeting in my calendar": ["create_event", "stock_price", "send_email", "get_weather"],
    "say hello in french": ["get_weather", "send_email", "create_event", "stock_price", "search_web", "translate_text"],
}


def scripted(query: Query, candidates: Sequence[Candidate]) -> Selection:
    ranked = RANKINGS.get(query.text)
    if ranked is None:  # "tell me a joke": nothing fits
        return Selection(abstained=True)
    return Selection(tuple(ranked[: query.k]))


def test_load_tiny_dataset() -> None:
    ds = load_dataset(TINY)
    assert ds.name == "eval_tiny"
    assert [t.id for t in ds.tools][:2] == ["get_weather", "send_email"]
    assert ds.tools[0].parameters is not None
    assert ds.queries[2].gold == () and ds.splits == ("a", "b")


def test_runner_hand_computed_metrics() -> None:
    rep = run_eval(
        FunctionSelector(scripted, name="scripted"), load_dataset(TINY), k=5, progress=False, counter=OneTokenPerTool()
    )
    # gains at 0-based rank i weigh 1/log2(i + 2): q1 hit at i=1, q2 at i=0 and 2, q4 at i=5.
    l3, l4, l7 = math.log2(3), math.log2(4), math.log2(7)
    ndcg = [1 / l3, (1 + 1 / l4) / (1 + 1 / l3), 1 / l7]
    assert rep["recall@1"] == pytest.approx(1 / 3, abs=1e-4)  # only q2's top tool is gold
    assert rep["recall@5"] == pytest.approx(2 / 3, abs=1e-4)  # q4's tool is 6th
    assert rep["recall@10"] == pytest.approx(1.0)
    assert rep["ndcg@10"] == pytest.approx(sum(ndcg) / 3, abs=1e-4)
    assert rep["mrr@10"] == pytest.approx((1 / 2 + 1 + 1 / 6) / 3, abs=1e-4)
    assert rep["abstention"] == 1.0
    assert rep["recall@5_abstaining"] == pytest.approx(2 / 3, abs=1e-4)
    assert rep["queries"] == 4 and rep["queries_with_gold"] == 3 and rep["queries_no_tool"] == 1
    # Tokens: 1 per tool; top-5 sizes 5, 4, 0 (abstained), 5 -> mean 3.5 of 6.
    assert rep["tokens"] == {
        "all": 6,
        "selected_mean": 3.5,
        "reduction": pytest.approx(1 - 3.5 / 6, abs=1e-4),
        "counter": "one-per-tool",
    }
    a, b = rep["splits"]["a"], rep["splits"]["b"]
    assert a["recall@5"] == 1.0 and a["abstention"] == 1.0 and a["queries"] == 2
    assert b["abstention"] is None and b["recall@5"] == pytest.approx(0.5)
    assert b["ndcg@10"] == pytest.approx((ndcg[1] + ndcg[2]) / 2, abs=1e-4)
    assert set(rep["latency_ms"]) == {"p50", "p99"} and rep["build_s"] >= 0
    assert rep["fallbacks"] == {}


def test_a_failing_selector_is_reported_not_hidden() -> None:
    def broken(query: Query, candidates: Sequence[Candidate]) -> Selection:
        raise RuntimeError("backend down")

    selector = FunctionSelector(lambda q, c: Selection(), name="warm")
    rep = run_eval(selector, load_dataset(TINY), progress=False)
    assert rep["fallbacks"] == {"empty": 4} and rep["recall@5"] == 0.0
    # the warm-up is Selector.prepare, which a plain selector does not have: every query is a call
    rep = run_eval(FunctionSelector(broken, name="broken"), load_dataset(TINY), progress=False)
    assert rep["fallbacks"] == {"error": 4}
    assert rep["abstention"] == 0.0  # a failure is not an abstention


def test_ranking_view_ignores_abstention_but_abstaining_view_does_not() -> None:
    ds = load_dataset(TINY)
    plain = run_eval(Bm25Ranker(), ds, progress=False)
    assert plain["abstention"] == 0.0  # BM25 without a threshold never abstains
    strict = run_eval(Bm25Ranker(min_score=1e9), ds, progress=False)
    assert strict["abstention"] == 1.0
    assert strict["recall@5_abstaining"] == 0.0
    for key in ("recall@1", "recall@5", "ndcg@10", "mrr@10"):
        assert strict[key] == plain[key]


def test_train_examples_help_and_curve() -> None:
    ds = load_dataset(TINY)
    train = load_queries(TINY / "train.jsonl")
    outcomes: list[object] = []
    zero = run_eval(Bm25Ranker(), ds, progress=False)
    trained = run_eval(Bm25Ranker(), ds, train=train, progress=False, on_query=outcomes.append)
    assert trained["train_examples"] == 3
    assert trained["splits"]["b"]["mrr@10"] > zero["splits"]["b"]["mrr@10"]
    curve = abstention_curve(outcomes)  # type: ignore[arg-type]
    assert curve[0]["abstention"] == 0.0 and curve[-1]["abstention"] == 1.0


def test_apply_train_examples() -> None:
    tools = load_dataset(TINY).tools
    enriched, added = apply_train_examples(tools, load_queries(TINY / "train.jsonl"))
    assert added == 3
    by_id = {t.id: t for t in enriched}
    assert by_id["translate_text"].examples == ("how do you say good morning in spanish", "say thank you in german")
    with pytest.raises(CatalogError, match="names none"):
        apply_train_examples(tools, [EvalQuery("x", "t", ("nope",))])


def write(dir_: Path, tools: str, queries: str) -> Path:
    dir_.mkdir(exist_ok=True)
    (dir_ / "tools.jsonl").write_text(tools)
    (dir_ / "queries.jsonl").write_text(queries)
    return dir_


GOOD_TOOL = '{"id": "a", "name": "a", "description": "alpha"}\n'
GOOD_QUERY = '{"qid": "1", "text": "alpha", "gold": ["a"]}\n'


@pytest.mark.parametrize(
    ("tools", "queries", "message"),
    [
        ("", GOOD_QUERY, "empty catalog"),
        (GOOD_TOOL + GOOD_TOOL, GOOD_QUERY, "duplicate tool id 'a' (first on line 1)"),
        ('{"id": "a", "description": "alpha"}\n', GOOD_QUERY, "tools.jsonl:1: missing field 'name'"),
        ('{"id": "a", "name": "a", "description": 3}\n', GOOD_QUERY, "field 'description' must be a string"),
        (GOOD_TOOL + "{not json\n", GOOD_QUERY, "tools.jsonl:2: invalid JSON"),
        (GOOD_TOOL, '{"qid": "1", "text": "alpha"}\n', "queries.jsonl:1: missing field 'gold'"),
        (GOOD_TOOL, '{"qid": "1", "gold": []}\n', "missing field 'text'"),
        (GOOD_TOOL, GOOD_QUERY + GOOD_QUERY, "duplicate qid '1'"),
        (GOOD_TOOL, '{"qid": "1", "text": "x", "gold": ["zzz"]}\n', "unknown tool id(s) ['zzz']"),
        (GOOD_TOOL, '{"qid": "1", "text": "x", "gold": "a"}\n', "must be a list of strings"),
        (GOOD_TOOL, "", "no queries"),
        ('{"id": "a", "name": "a", "description": "x", "parameters": []}\n', GOOD_QUERY, "JSON Schema object"),
    ],
)
def test_bad_input_is_a_clear_catalog_error(tmp_path: Path, tools: str, queries: str, message: str) -> None:
    with pytest.raises(CatalogError) as err:
        load_dataset(write(tmp_path / "ds", tools, queries))
    assert message in str(err.value)


def test_missing_directory_or_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="not a dataset directory"):
        load_dataset(tmp_path / "nope")
    (tmp_path / "only_tools").mkdir()
    (tmp_path / "only_tools" / "tools.jsonl").write_text(GOOD_TOOL)
    with pytest.raises(CatalogError, match=r"queries\.jsonl: no such file"):
        load_dataset(tmp_path / "only_tools")


def test_each_query_adds_up_to_the_report_and_the_intervals_hold_it() -> None:
    rep = run_eval(Bm25Ranker(), load_dataset(TINY), progress=False)
    per = rep["per_query"]
    assert len(per["qids"]) == len(per["ndcg@10"]) == len(per["recall@5"]) == rep["queries_with_gold"]
    for metric in ("ndcg@10", "recall@5"):
        assert sum(per[metric]) / len(per[metric]) == pytest.approx(rep[metric], abs=1e-4)
        low, high = rep["intervals"][metric]
        assert 0.0 <= low <= rep[metric] <= high <= 1.0
    assert {k: rep["intervals"][k] for k in ("level", "draws", "seed", "unit")} == {
        "level": 0.95,
        "draws": 2000,
        "seed": 0,
        "unit": "query",
    }
    dataset = load_dataset(TINY)
    no_tool = dataclasses.replace(dataset, queries=tuple(q for q in dataset.queries if not q.gold))
    empty = run_eval(Bm25Ranker(), no_tool, progress=False)  # nothing to resample
    assert empty["per_query"]["qids"] == [] and empty["intervals"]["ndcg@10"] is None
