"""How far an evaluation's figures would move on other conversations (or queries) of the same kind.

A conversation set is a sample. On 100 conversations a lever that moves ``cost_vs_oracle`` by 1% may
be the sample's noise, and a target missed by 2% may be met by the next sample. So the replay
(:func:`~shortlist.eval._conversations.run_conversation_eval`) keeps each conversation's figures and
reads its headline figures again over :data:`DRAWS` resamples of the conversations (drawn with
replacement, seeded): a percentile bootstrap interval at :data:`LEVEL`. Each figure is a ratio of
sums over the resample, as the figure itself is over the set (complete turns over turns, a
strategy's cost over the oracle's), and every strategy and history is read over the same draws.

:func:`diff_reports` compares two replays of the same conversations (before and after a change):
each draw takes the same conversations from both, so the interval of the difference leaves out
how hard the conversations are and keeps what the change did. A change is *clear* when that
interval leaves out zero. A tool-retrieval run (:func:`~shortlist.eval._runner.run_eval`) is read
the same way over its queries: :func:`ranking_intervals` for nDCG@10 and Recall@5, and
:func:`diff_reports` pairs two runs' queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from shortlist.errors import ConfigError

__all__ = [
    "DRAWS",
    "LEVEL",
    "RANKING_METRICS",
    "diff_reports",
    "intervals_of",
    "pooled",
    "ranking_intervals",
    "resamples",
]

#: How many resamples of the conversations an interval is read over.
DRAWS = 2000
#: The intervals' coverage.
LEVEL = 0.95
#: The per-query metrics a tool-retrieval report keeps (``per_query``) and reads intervals of.
RANKING_METRICS = ("ndcg@10", "recall@5")

_Idx = npt.NDArray[np.intp]
_F64 = npt.NDArray[np.float64]


def resamples(n: int, seed: int, draws: int = DRAWS) -> _Idx:
    """``draws`` rows of ``n`` conversation (or query) numbers drawn with replacement (the same for the same seed)."""
    if n <= 0:
        raise ConfigError("an interval needs at least one conversation or query")
    if draws <= 0:
        raise ConfigError(f"draws must be positive, not {draws}")
    return np.random.default_rng(seed).integers(0, n, size=(draws, n), dtype=np.intp)


def _ratios(num: Sequence[float], den: Sequence[float], idx: _Idx) -> _F64:
    """Each draw's ``sum(num) / sum(den)`` over its conversations (NaN where the denominator is 0)."""
    top = np.asarray(num, dtype=np.float64)[idx].sum(axis=1)
    bottom = np.asarray(den, dtype=np.float64)[idx].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom != 0, top / np.where(bottom != 0, bottom, 1.0), np.nan)


def _interval(values: _F64, level: float = LEVEL) -> list[float] | None:
    """The central ``level`` share of the finite draws, rounded as the figures are (None when none is)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    low, high = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return [round(float(low), 4) or 0.0, round(float(high), 4) or 0.0]  # never -0.0


def intervals_of(
    per_conversation: Mapping[str, Any], oracle: Mapping[str, Any], turns: Sequence[int], idx: _Idx, first: str
) -> dict[str, Any]:
    """One strategy's intervals: complete turns (at the ``first`` history) and ``cost_vs_oracle`` at each.

    Args:
        per_conversation: the strategy's ``{"complete": {H: [...]}, "cost": {H: [...]}}``.
        oracle: the oracle's, of the same conversations.
        turns: each conversation's turn count.
        idx: the draws (:func:`resamples`).
        first: the history the top-level figures are read at.
    """
    ratios = {h: _interval(_ratios(costs, oracle["cost"][h], idx)) for h, costs in per_conversation["cost"].items()}
    return {
        "complete_turns": _interval(_ratios(per_conversation["complete"][first], turns, idx)),
        "cost_vs_oracle": ratios,
    }


def ranking_intervals(per_query: Mapping[str, Sequence[float]], seed: int = 0) -> dict[str, Any]:
    """A tool-retrieval report's ``intervals``: each of :data:`RANKING_METRICS` (a mean over the queries
    with a gold tool) over :data:`DRAWS` resamples of those queries (None for a metric when there is none)."""
    out: dict[str, Any] = {"level": LEVEL, "draws": DRAWS, "seed": seed, "unit": "query"}
    n = len(per_query.get("qids", ()))
    idx = resamples(n, seed) if n else None
    for metric in RANKING_METRICS:
        out[metric] = None if idx is None else _interval(_ratios(per_query[metric], [1.0] * n, idx))
    return out


def _diff_rankings(before: Mapping[str, Any], after: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """:func:`diff_reports` for two tool-retrieval runs: their queries paired."""
    for which, r in (("before", before), ("after", after)):
        if "compare" in r:
            raise ConfigError(f"the {which} report holds several selectors (--compare): diff runs of one --selector")
        if "per_query" not in r:
            raise ConfigError(
                f"the {which} report has no per-query figures: run it again with `shortlist eval --dataset DIR --json` "
                "of this version"
            )
    ids = list(before["per_query"]["qids"])
    _same(ids, list(after["per_query"]["qids"]), "queries")
    idx = resamples(len(ids), seed)
    ones = [1.0] * len(ids)
    out: dict[str, Any] = {
        "kind": "ranking",
        "selector": [before.get("selector"), after.get("selector")],
        "queries": len(ids),
        "level": LEVEL,
        "draws": DRAWS,
        "seed": seed,
    }
    for metric in RANKING_METRICS:
        out[metric] = _paired((before["per_query"][metric], ones), (after["per_query"][metric], ones), idx)
    return out


_Sums = tuple[Sequence[float], Sequence[float]]


def _paired(before: _Sums, after: _Sums, idx: _Idx) -> dict[str, Any]:
    """One figure (``sum(num) / sum(den)``) of two runs: each over the whole set, and the interval of
    their difference over the same draws."""
    whole = np.arange(idx.shape[1], dtype=np.intp)[None, :]
    b, a = float(_ratios(*before, whole)[0]), float(_ratios(*after, whole)[0])
    spread = _interval(_ratios(*after, idx) - _ratios(*before, idx))
    return {
        "before": round(b, 4),
        "after": round(a, 4),
        "difference": round(a - b, 4),
        "interval": spread,
        "clear": spread is not None and (spread[0] > 0 or spread[1] < 0),
    }


def _same(ids: list[Any], other: list[Any], what: str) -> None:
    if ids != other:
        first = next((f"{a!r} / {b!r}" for a, b in zip(ids, other, strict=False) if a != b), "one is longer")
        raise ConfigError(
            f"the two reports measured different {what} ({len(ids)} and {len(other)}; first difference: "
            f"{first}); compare runs of the same dataset"
        )


def pooled(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Replays of the same conversations under several seeds of the simulated model, as one report to
    read intervals of and to compare: each conversation's figures summed over the runs.

    A conversation stays the unit resampled (its runs are not independent draws), and each pooled
    figure is the mean of the runs' figures: the oracle costs the same under every seed, so the
    pooled ``cost_vs_oracle`` is the mean of the runs' and complete turns the mean share.

    Raises:
        ConfigError: no report, or reports of different conversations, strategies or history sizes.
    """
    if not reports:
        raise ConfigError("no report to pool")
    first = reports[0]
    ids = list(first.get("conversation_ids") or [])
    if not ids:
        raise ConfigError("the reports have no per-conversation figures: replay them with this version")
    strategies: dict[str, Any] = {}
    for name in dict.fromkeys([*first["strategies"], "oracle"]):
        runs = [_per_conversation(r, name, f"#{i + 1}") for i, r in enumerate(reports)]
        for i, r in enumerate(reports):
            _same(ids, list(r.get("conversation_ids") or []), "conversations")
            if set(runs[i]["cost"]) != set(runs[0]["cost"]):
                raise ConfigError(f"report #{i + 1} was priced at other history sizes than the first")
        summed = {
            part: {h: [sum(vals) for vals in zip(*(run[part][h] for run in runs), strict=True)] for h in runs[0][part]}
            for part in ("complete", "cost")
        }
        strategies[name] = {"per_conversation": summed}
    turns = [t * len(reports) for t in first["conversation_turns"]]
    return {"conversation_ids": ids, "conversation_turns": turns, "runs": len(reports), "strategies": strategies}


def _per_conversation(report: Mapping[str, Any], strategy: str, which: str) -> Mapping[str, Any]:
    rows = dict(report.get("strategies", {}))
    if strategy == "oracle" and "oracle" not in rows and "oracle" in report:  # replayed, not asked for
        rows["oracle"] = report["oracle"]
    if strategy not in rows:
        raise ConfigError(f"the {which} report has no {strategy!r} strategy (it has {', '.join(rows) or 'none'})")
    row = rows[strategy].get("per_conversation")
    if row is None or "conversation_ids" not in report:
        raise ConfigError(
            f"the {which} report has no per-conversation figures: replay it again with "
            "`shortlist eval --dataset DIR --json` of this version"
        )
    return dict(row)


def diff_reports(
    before: Mapping[str, Any], after: Mapping[str, Any], strategy: str = "deferred", *, seed: int = 0
) -> dict[str, Any]:
    """How ``strategy`` moved from ``before`` to ``after`` (two ``--json`` replays of the same conversations,
    or two tool-retrieval runs of the same queries, whose ``strategy`` is not read).

    Returns:
        For conversations ``{"kind": "conversation", "strategy", "conversations", "runs" (each report's
        seeds pooled, :func:`pooled`), "level", "draws", "seed",
        "complete_turns": {...}, "cost_vs_oracle": {H: {...}}}``; for tool retrieval ``{"kind": "ranking",
        "selector": [before's, after's], "queries", "level", "draws", "seed", "ndcg@10": {...},
        "recall@5": {...}}``. Each figure is ``{"before", "after", "difference", "interval", "clear"}``:
        the difference is ``after - before`` over the whole set, its interval the paired draws', and
        ``clear`` says the interval leaves out zero.

    Raises:
        ConfigError: a report without per-conversation (per-query) figures or without the strategy,
            two reports of different kinds, of different conversations (queries), or with no history
            size in common.
    """
    kinds = ["conversation" if "strategies" in r else "ranking" for r in (before, after)]
    if kinds[0] != kinds[1]:
        raise ConfigError(f"cannot compare a {kinds[0]} report with a {kinds[1]} report")
    if kinds[0] == "ranking":
        return _diff_rankings(before, after, seed)
    rows = {which: _per_conversation(r, strategy, which) for which, r in (("before", before), ("after", after))}
    oracles = {which: _per_conversation(r, "oracle", which) for which, r in (("before", before), ("after", after))}
    ids = list(before["conversation_ids"])
    _same(ids, list(after["conversation_ids"]), "conversations")
    histories = [h for h in rows["before"]["cost"] if h in rows["after"]["cost"]]
    if not histories:
        raise ConfigError("the two reports have no history size in common (see --history)")
    turns = {"before": list(before["conversation_turns"]), "after": list(after["conversation_turns"])}
    idx = resamples(len(ids), seed)

    def complete(which: str, h: str) -> _Sums:  # complete turns over turns (each report's: pooled seeds count each)
        return rows[which]["complete"][h], turns[which]

    def cost(which: str, h: str) -> _Sums:  # the strategy's cost over the oracle's of the same report
        return rows[which]["cost"][h], oracles[which]["cost"][h]

    first = histories[0]  # the history the reports' top-level figures are read at
    return {
        "kind": "conversation",
        "strategy": strategy,
        "conversations": len(ids),
        "runs": [int(before.get("runs", 1)), int(after.get("runs", 1))],
        "level": LEVEL,
        "draws": DRAWS,
        "seed": seed,
        "complete_turns": _paired(complete("before", first), complete("after", first), idx),
        "cost_vs_oracle": {h: _paired(cost("before", h), cost("after", h), idx) for h in histories},
    }
