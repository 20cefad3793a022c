"""Where a turn's grounding goes, priced under every provider's cache rules (issue 28, part 5).

Replays a conversation set (default: the development conversations) with ``shortlist eval``
once per price preset (``shortlist.offer.PRICE_PRESETS``) and grounding placement
(``--placement history``: appended with the turn; ``system``: rendered into the system prompt,
which then changes every turn), with ``--grounding-tokens`` of grounding a turn at
``--history`` tokens of prior history, and prints, for each strategy, the cost of each
placement and the ratio history / system (target: <= 0.45x for the default strategy at 20k).

Run: ``python bench/bench_placement.py [--dataset DIR] [--grounding-tokens 500] [--history 20000]
[--strategies all,deferred] [--history-budget N] [--json]``. Each replay is one ``shortlist eval``
subprocess (two at a time), so the figures are exactly what the CLI prints.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shortlist.offer import PRICE_PRESETS

DEV = "/work/shared/data/bfcl-conversations-dev"


def replay(args: argparse.Namespace, preset: str, placement: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "shortlist.cli",
        "eval",
        "--dataset",
        args.dataset,
        "--json",
        "--no-progress",
        "--prices",
        preset,
        "--grounding-tokens",
        str(args.grounding_tokens),
        "--placement",
        placement,
        "--history",
        str(args.history),
        "--strategies",
        args.strategies,
    ]
    if args.history_budget:
        cmd += ["--history-budget", str(args.history_budget)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=DEV)
    ap.add_argument("--grounding-tokens", type=int, default=500)
    ap.add_argument("--history", type=int, default=20_000)
    ap.add_argument("--strategies", default="all,deferred")
    ap.add_argument("--history-budget", type=int)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    jobs = [(p, pl) for p in PRICE_PRESETS for pl in ("history", "system")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = dict(zip(jobs, pool.map(lambda job: replay(args, *job), jobs), strict=True))
    h = str(args.history)
    rows: list[dict[str, Any]] = []
    for preset in PRICE_PRESETS:
        appended, system = reports[(preset, "history")], reports[(preset, "system")]
        for strategy in appended["strategies"]:
            a = appended["strategies"][strategy]["cost"][h]
            s = system["strategies"][strategy]["cost"][h]
            rows.append(
                {
                    "prices": preset,
                    "strategy": strategy,
                    "history_placement": a,
                    "system_placement": s,
                    "ratio": round(a / s, 3) if s else None,
                }
            )
    if args.json:
        print(json.dumps({"settings": vars(args), "rows": rows}, indent=2))
        return 0
    print(
        f"{args.grounding_tokens} grounding tokens a turn, {args.history:,} tokens of prior history"
        + (f", history budget {args.history_budget:,}" if args.history_budget else "")
        + "; cost = base-price input tokens per conversation"
    )
    print(f"{'prices':16} {'strategy':9} {'history':>10} {'system':>10} {'history/system':>15}")
    for r in rows:
        print(
            f"{r['prices']:16} {r['strategy']:9} {r['history_placement']:>10,.0f} {r['system_placement']:>10,.0f} "
            f"{r['ratio']:>14.3f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
