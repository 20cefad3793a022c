"""Run a selector over a dataset and compute the report of ``shortlist eval``.

Every query is ranked against the whole catalog. Two views of each turn are measured:

* the **ranking view**: the selector's ranked list at ``max(10, k)`` with its abstention
  switched off (Recall@1/5/10, nDCG@10, MRR@10, tokens of the top ``k``);
* the **abstaining view**: the turn as :func:`~shortlist.selection._narrowing.narrow`
  resolves it with ``on_abstain="pins"`` (abstention on empty-gold queries = nothing but
  pins surfaced; ``recall@5_abstaining`` on the others). Its selector time is the latency.

For a selector without abstention both views come from the same call.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from tqdm import tqdm

from shortlist._tokens import default_counter, definition_text
from shortlist._types import Query
from shortlist.errors import UsageError
from shortlist.eval._datasets import Dataset, EvalQuery, apply_train_examples
from shortlist.eval._intervals import ranking_intervals
from shortlist.eval._metrics import mean, mrr_at_k, ndcg_at_k, percentile, recall_at_k
from shortlist.rankers._base import Ranker
from shortlist.selection._base import Selector
from shortlist.selection._narrowing import NarrowingPolicy, PinPolicy, narrow

__all__ = [
    "Match",
    "QueryOutcome",
    "abstention_curve",
    "by_name",
    "run_eval",
    "summarise",
]

#: How a ranked id counts against the gold: by ``"id"``, or by ``"name"`` (ids sharing a name are one).
Match = Literal["id", "name"]

#: Pins used by the evaluation: none, so the whole catalog is ranked.
NO_PINS = PinPolicy(namespaces=(), always_include=(), pin_wildcards=False)


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What the selector did for one query.

    Attributes:
        qid: the query id.
        split: its split.
        gold: its gold ids.
        ranked: the ranking view (top ``max(10, k)``).
        best_score: the top score of the ranking view, when the selector gives scores.
        confidence: the best confidence score (what a ranker's abstention judges), when asked.
        surfaced: the ids the abstaining view surfaced (pins included).
        only_pins: nothing but pins surfaced in the abstaining view.
        latency_ms: selector time of the abstaining view.
        selected_tokens: tokens of the definitions of the top ``k`` of the ranking view.
        fallback: why the abstaining view's turn fell back (``"error"``, ``"empty"``, …), or None.
    """

    qid: str
    split: str
    gold: tuple[str, ...]
    ranked: tuple[str, ...]
    best_score: float | None
    confidence: float | None
    surfaced: tuple[str, ...]
    only_pins: bool
    latency_ms: float
    selected_tokens: int
    fallback: str | None = None


def _ranking_selector(selector: Selector) -> Selector:
    if isinstance(selector, Ranker) and selector.abstention is not None:
        twin = copy.copy(selector)  # shares the index caches; only the policy differs
        twin.abstention = None
        return twin
    return selector


def run_eval(
    selector: Selector,
    dataset: Dataset,
    *,
    k: int = 5,
    train: Sequence[EvalQuery] | None = None,
    limit: int | None = None,
    progress: bool = True,
    pins: PinPolicy = NO_PINS,
    counter: Any = None,
    on_query: Callable[[QueryOutcome], None] | None = None,
    confidence: bool = False,
    match: Match = "id",
) -> dict[str, Any]:
    """Evaluate ``selector`` on ``dataset`` and return the report (the ``--json`` object).

    Args:
        selector: the selector to evaluate.
        dataset: the catalog and queries.
        k: the number of tools a turn selects (tokens, abstaining view).
        train: queries whose texts become examples of their gold tools before ranking.
        limit: evaluate only the first ``limit`` queries.
        progress: show a progress bar on stderr.
        pins: the pin policy of the abstaining view (default: no pins).
        counter: a token counter (``.name``, ``.count(text)``); default :func:`shortlist._tokens.default_counter`.
        on_query: called with each query's outcome.
        confidence: also record each query's best confidence score (one more scoring call per
            query, rankers only) for :func:`abstention_curve`.
        match: ``"name"`` adds ``by_name``: the same metrics where ids that share a name count
            as one (see :func:`by_name`); the top-level metrics stay exact-id.

    Returns:
        The report: see ``docs/evaluation.md`` for every key.
    """
    if k <= 0:
        raise UsageError("k must be positive")
    if match not in ("id", "name"):
        raise UsageError(f"match must be 'id' or 'name', got {match!r}")
    tools = dataset.tools
    examples_added = 0
    if train:
        tools, examples_added = apply_train_examples(tools, train)
    queries = dataset.queries[:limit] if limit else dataset.queries
    counter = counter or default_counter()
    def_tokens = {c.id: counter.count(definition_text(c)) for c in dataset.tools}
    rank_k = max(10, k)
    ranker_view = _ranking_selector(selector)
    policy = NarrowingPolicy(pins=pins, on_abstain="pins")

    start = time.perf_counter()
    selector.prepare(tools)  # the model load and the index: build time, not a query's latency
    build_s = time.perf_counter() - start

    outcomes: list[QueryOutcome] = []
    for q in tqdm(queries, desc=f"eval {selector.name}", unit="q", file=sys.stderr, disable=not progress):
        turn = narrow(selector, Query(q.text, k=rank_k), tools, policy)
        if ranker_view is selector:
            ranked, scores = turn.ranked, [turn.scores.get(i) for i in turn.ranked]
        else:
            sel = ranker_view.select(Query(q.text, k=rank_k), tools)
            ranked, scores = sel.selected[:rank_k], list(sel.scores or ())
        pinned = set(turn.pinned)
        best_conf: float | None = None
        if confidence and isinstance(selector, Ranker):
            conf = np.asarray(selector.score_with_confidence(Query(q.text, k=rank_k), tools)[1], dtype=np.float64)
            best_conf = float(conf.max()) if conf.size else None
        outcome = QueryOutcome(
            qid=q.qid,
            split=q.split,
            gold=q.gold,
            ranked=tuple(ranked),
            best_score=float(scores[0]) if scores and scores[0] is not None else None,
            confidence=best_conf,
            surfaced=(*turn.ranked[:k], *turn.pinned) if turn.fallback is None else turn.ids,
            only_pins=turn.fallback is None and all(i in pinned for i in turn.ids),
            latency_ms=turn.elapsed_ms,
            selected_tokens=sum(def_tokens[i] for i in ranked[:k] if i in def_tokens),
            fallback=turn.fallback,
        )
        outcomes.append(outcome)
        if on_query is not None:
            on_query(outcome)

    all_tokens = sum(def_tokens.values())
    report: dict[str, Any] = {"selector": selector.name, "dataset": dataset.name, "k": k}
    report.update(summarise(outcomes, k=k, all_tokens=all_tokens))
    report["build_s"] = round(build_s, 4)
    report["tokens"]["counter"] = counter.name
    report["train_examples"] = examples_added
    report["splits"] = {
        split: summarise([o for o in outcomes if o.split == split], k=k, all_tokens=all_tokens)
        for split in dict.fromkeys(o.split for o in outcomes)
    }
    scored = [o for o in outcomes if o.gold]  # what the ranking metrics average over, query by query
    report["per_query"] = {
        "qids": [o.qid for o in scored],
        "ndcg@10": [round(ndcg_at_k(o.ranked, o.gold, 10), 6) for o in scored],
        "recall@5": [round(recall_at_k(o.ranked, o.gold, 5), 6) for o in scored],
    }
    report["intervals"] = ranking_intervals(report["per_query"])
    if match == "name":
        named = by_name(outcomes, {c.id: c.name for c in dataset.tools})
        report["by_name"] = summarise(named, k=k, all_tokens=all_tokens)
        report["by_name"]["splits"] = {
            split: summarise([o for o in named if o.split == split], k=k, all_tokens=all_tokens)
            for split in dict.fromkeys(o.split for o in named)
        }
    return report


def by_name(outcomes: Sequence[QueryOutcome], names: dict[str, str]) -> list[QueryOutcome]:
    """The outcomes with every id replaced by its tool's name (duplicates dropped, order kept).

    Ids that share a name then count as one gold: a catalog with 30 definitions of
    ``get_current_weather`` is scored on whether the right *name* was chosen. Ids outside
    ``names`` keep their id.
    """

    def rename(ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(names.get(i, i) for i in ids))

    return [
        dataclasses.replace(o, gold=rename(o.gold), ranked=rename(o.ranked), surfaced=rename(o.surfaced))
        for o in outcomes
    ]


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def summarise(outcomes: Sequence[QueryOutcome], *, k: int, all_tokens: int) -> dict[str, Any]:
    """Aggregate query outcomes into the report's metric keys.

    Ranking metrics average over queries with a non-empty gold; ``abstention`` is the share of
    empty-gold queries where nothing but pins surfaced (None when there are none);
    ``recall@5_abstaining`` is Recall@5 of what the abstaining view surfaced, on the others;
    ``fallbacks`` counts turns where the selector failed or answered nothing, by reason.
    """
    pos = [o for o in outcomes if o.gold]
    neg = [o for o in outcomes if not o.gold]
    lat = [o.latency_ms for o in outcomes]
    sel_mean = mean([float(o.selected_tokens) for o in outcomes])
    return {
        "recall@1": _r(mean([recall_at_k(o.ranked, o.gold, 1) for o in pos])),
        "recall@5": _r(mean([recall_at_k(o.ranked, o.gold, 5) for o in pos])),
        "recall@10": _r(mean([recall_at_k(o.ranked, o.gold, 10) for o in pos])),
        "ndcg@10": _r(mean([ndcg_at_k(o.ranked, o.gold, 10) for o in pos])),
        "mrr@10": _r(mean([mrr_at_k(o.ranked, o.gold, 10) for o in pos])),
        "abstention": _r(mean([1.0 if o.only_pins else 0.0 for o in neg])),
        "recall@5_abstaining": _r(mean([recall_at_k(o.surfaced, o.gold, 5) for o in pos])),
        "latency_ms": {"p50": _r(percentile(lat, 50), 3), "p99": _r(percentile(lat, 99), 3)},
        "tokens": {
            "all": all_tokens,
            "selected_mean": _r(sel_mean, 1),
            "reduction": _r(1 - sel_mean / all_tokens) if sel_mean is not None and all_tokens else None,
        },
        "queries": len(outcomes),
        "queries_with_gold": len(pos),
        "queries_no_tool": len(neg),
        "fallbacks": dict(Counter(o.fallback for o in outcomes if o.fallback)),
    }


def abstention_curve(outcomes: Sequence[QueryOutcome], *, points: int = 21) -> list[dict[str, float]]:
    """The trade-off of a ``min_score`` threshold: correct abstention vs Recall@5 on the rest.

    Thresholds are the quantiles of the best scores of the empty-gold queries (so the curve
    spans 0 to 100% abstention). Uses each query's best confidence when it was recorded
    (``run_eval(confidence=True)``), else the ranking view's best score; a query abstains
    when that value is below the threshold.

    Returns:
        Points ``{"min_score", "abstention", "recall@5_abstaining"}``; empty when the selector
        gave no scores or there are no empty-gold queries.
    """

    def value(o: QueryOutcome) -> float | None:
        return o.confidence if o.confidence is not None else o.best_score

    neg = [v for o in outcomes if not o.gold and (v := value(o)) is not None]
    pos = [(o, v) for o in outcomes if o.gold and (v := value(o)) is not None]
    if not neg or not pos:
        return []
    curve: list[dict[str, float]] = []
    for i in range(points):
        t = percentile(neg, 100 * i / (points - 1))
        assert t is not None
        t = t + 1e-9 if i == points - 1 else t
        abst = sum(1 for s in neg if s < t) / len(neg)
        rec = sum(recall_at_k(o.ranked, o.gold, 5) for o, v in pos if v >= t) / len(pos)
        curve.append({"min_score": round(t, 4), "abstention": round(abst, 4), "recall@5_abstaining": round(rec, 4)})
    return curve
