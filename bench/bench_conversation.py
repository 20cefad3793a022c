"""Conversation-aware selection, signal by signal, on a conversation dataset.

Two tables:

1. **Ranking signals** for the per-turn offer (k tools ranked on the turn): the latest user
   message alone (today's query), plus each conversation signal applied to the default
   ranker's z-scored scores: a boost for tools already called in the conversation, a boost for
   tools of the suites/servers (``metadata.suite`` or the ``mcp__server__`` prefix) the
   conversation has used, and earlier turns as decayed evidence (max of the turn's score and
   ``decay**age`` times an earlier turn's). Reported: turn recall and complete turns.
2. **Offer mechanisms** of the ``deferred`` policy through the public ``ToolSession`` and the
   ``shortlist eval`` replay: search only, + prefetch of the turn's top tools, + co-usage
   learned online, both. Reported: complete turns, searches per turn, cost at 0 and 20k
   tokens of prior history as a multiple of offering every tool.

    python bench/bench_conversation.py [--dataset ../shared/data/bfcl-conversations-dev] [--k 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from shortlist._types import Candidate, Query
from shortlist.eval._conversations import load_conversations, run_conversation_eval
from shortlist.eval._datasets import load_tools
from shortlist.offer import OfferPolicy, ToolSession
from shortlist.rankers._base import Ranker
from shortlist.selection._cousage import CoUsage
from shortlist.selection._facade import Shortlist

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "data" / "bfcl-conversations-dev"


def _suite(c: Candidate) -> str:
    suite = c.metadata.get("suite") if c.metadata else None
    if suite:
        return str(suite)
    head, sep, rest = c.id.partition("__")
    return f"{head}__{rest.partition('__')[0]}" if sep and head == "mcp" else ""


def _z(s: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out: np.ndarray[Any, Any] = (s - s.mean()) / (s.std() + 1e-9)
    return out


def ranking_signals(dataset: Path, k: int) -> list[dict[str, Any]]:
    tools = load_tools(dataset / "tools.jsonl")
    cases = load_conversations(dataset / "conversations.jsonl", [t.id for t in tools])
    ranker = Shortlist(tools).selector_for("tool")
    if not isinstance(ranker, Ranker):
        raise SystemExit("the default selector is not a ranker with scores")
    ids = [t.id for t in tools]
    index = {t: i for i, t in enumerate(ids)}
    suites = np.array([_suite(t) for t in tools])
    scores = [[_z(np.asarray(ranker.score(Query(t.user, "tool", 0), tools))) for t in c.turns] for c in cases]
    variants: list[tuple[str, dict[str, float]]] = [
        ("latest user message", {}),
        ("+ called tools (+0.5)", {"called": 0.5}),
        ("+ called tools (+1.0)", {"called": 1.0}),
        ("+ suites in use (+0.5)", {"suite": 0.5}),
        ("+ suites in use (+1.0)", {"suite": 1.0}),
        ("+ earlier turns, decay 0.3", {"decay": 0.3}),
        ("+ earlier turns, decay 0.5", {"decay": 0.5}),
    ]
    rows = []
    for label, w in variants:
        recall = complete = turns = 0.0
        for case, case_scores in zip(cases, scores, strict=True):
            called: set[int] = set()
            used_suites: set[str] = set()
            prev: np.ndarray[Any, Any] | None = None
            for turn, s in zip(case.turns, case_scores, strict=True):
                x = s.copy()
                if "decay" in w and prev is not None:
                    x = np.maximum(x, prev)
                if "called" in w and called:
                    x[list(called)] += w["called"]
                if "suite" in w and used_suites:
                    x[np.isin(suites, list(used_suites))] += w["suite"]
                offered = set(np.argsort(-x)[:k].tolist())
                gold = {index[g] for g in turn.gold}
                hit = len(gold & offered)
                recall += hit / len(gold) if gold else 1.0
                complete += hit == len(gold)
                turns += 1
                called |= gold
                used_suites |= {str(suites[g]) for g in gold}
                # evidence of earlier turns: max over j < t of decay**(t - j) * score_j
                prev = w.get("decay", 0.0) * (s if prev is None else np.maximum(s, prev))
        rows.append(
            {"signal": label, "turn_recall": round(recall / turns, 4), "complete_turns": round(complete / turns, 4)}
        )
    return rows


def offer_mechanisms(dataset: Path, k: int) -> list[dict[str, Any]]:
    shortlist = Shortlist(load_tools(dataset / "tools.jsonl"))
    rows = []
    for label, prefetch, learn in [
        ("search only", 0, False),
        ("+ co-usage", 0, True),
        ("+ prefetch 3", 3, False),
        ("+ prefetch 3 + co-usage (default)", 3, True),
    ]:

        def make(policy: OfferPolicy, co: CoUsage | None, prefetch: int = prefetch) -> ToolSession:
            return ToolSession(shortlist, policy=policy, k=k, search_k=5, prefetch=prefetch, co_usage=co)

        report = run_conversation_eval(dataset, make, strategies=("all", "deferred"), learn=learn, progress=False)
        all_cost, d = report["strategies"]["all"]["cost"], report["strategies"]["deferred"]
        rows.append(
            {
                "mechanism": label,
                "complete_turns": d["complete_turns"],
                "turn_recall": d["turn_recall"],
                "searches_per_turn": d["searches_per_turn"],
                "tool_tokens_per_turn": d["tool_tokens_per_turn"],
                "x_all_cost_0": round(d["cost"]["0"] / all_cost["0"], 3),
                "x_all_cost_20000": round(d["cost"]["20000"] / all_cost["20000"], 3),
            }
        )
    return rows


def _print(rows: list[dict[str, Any]]) -> None:
    keys = list(rows[0])
    widths = [max(len(str(r[c])) for r in [dict(zip(keys, keys, strict=True)), *rows]) for c in keys]
    print("  ".join(c.ljust(w) for c, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(keys, widths, strict=True)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if not (args.dataset / "conversations.jsonl").is_file():
        sys.exit(f"{args.dataset}: no conversations.jsonl")
    out = {
        "ranking_signals": ranking_signals(args.dataset, args.k),
        "offer_mechanisms": offer_mechanisms(args.dataset, args.k),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"per-turn ranking signals (k = {args.k}):")
    _print(out["ranking_signals"])
    print("\ndeferred offer mechanisms:")
    _print(out["offer_mechanisms"])


if __name__ == "__main__":
    main()
