"""The misses of an evaluation: the queries a selector got wrong (gold not all in the top ``k``; or, on
a no-tool query, something other than pins surfaced), from :func:`~shortlist.eval._runner.run_eval`'s
per-query outcomes. Re-exported by :mod:`shortlist.eval._report`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shortlist.eval._datasets import EvalQuery

__all__ = ["KIND_ORDER", "Miss", "find_misses"]


@dataclass(frozen=True, slots=True)
class Miss:
    """A query a selector got wrong.

    Attributes:
        selector: the selector's name.
        qid: the query id.
        split: its split.
        query: the query text.
        gold: its gold ids (empty: no tool fits).
        ranked: the selector's ranking (top ``max(10, k)``).
        kind: ``"missed"`` (no gold id in the top ``k``), ``"partial"`` (some gold ids are not),
            or ``"no-tool"`` (no tool fits, but more than pins surfaced).
        gold_rank: the 1-based rank of the first gold id in ``ranked``, or None (not in it).
    """

    selector: str
    qid: str
    split: str
    query: str
    gold: tuple[str, ...]
    ranked: tuple[str, ...]
    kind: str
    gold_rank: int | None

    def to_json(self) -> dict[str, Any]:
        """The miss as a JSON-ready dict (what ``--json`` lists)."""
        return {
            "selector": self.selector,
            "qid": self.qid,
            "split": self.split,
            "query": self.query,
            "gold": list(self.gold),
            "ranked": list(self.ranked),
            "kind": self.kind,
            "gold_rank": self.gold_rank,
        }


KIND_ORDER = {"missed": 0, "partial": 1, "no-tool": 2}


def find_misses(selector: str, outcomes: Iterable[Any], queries: Sequence[EvalQuery], *, k: int) -> list[Miss]:
    """The queries ``selector`` got wrong, worst first (missed, partial, no-tool), then in dataset order.

    Args:
        selector: the selector's name (recorded in each miss).
        outcomes: the :class:`~shortlist.eval._runner.QueryOutcome` of each query.
        queries: the dataset's queries (for the texts), matched by ``qid``.
        k: the tools a turn selects.
    """
    texts = {q.qid: q.text for q in queries}
    out: list[Miss] = []
    for o in outcomes:
        top = set(o.ranked[:k])
        if o.gold:
            hit = sum(1 for g in o.gold if g in top)
            if hit == len(o.gold):
                continue
            kind = "missed" if hit == 0 else "partial"
        elif o.only_pins:
            continue
        else:
            kind = "no-tool"
        gold = set(o.gold)
        rank = next((i for i, cid in enumerate(o.ranked, 1) if cid in gold), None)
        out.append(Miss(selector, o.qid, o.split, texts.get(o.qid, ""), tuple(o.gold), tuple(o.ranked), kind, rank))
    return sorted(out, key=lambda m: KIND_ORDER[m.kind])


# --- formatting ----------------------------------------------------------------------------------
