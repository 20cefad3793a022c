"""The conversation replay at scale: seeds of the simulated model averaged, one table per catalog.

Runs ``shortlist eval --dataset DIR --json`` once per seed (one process at a time; the flags
after ``--`` are passed through) and prints, per strategy, the mean over the seeds of:
complete turns, preloaded, searches per turn, tool tokens per turn, cost at each history size
and the cost as a multiple of the oracle's. ``--markdown`` prints the docs' table rows.

    python bench/bench_conversation_scale.py --dataset ../shared/data/bfcl-conversations-dev --seeds 0
    python bench/bench_conversation_scale.py --dataset .cache/eval/large-dev --seeds 0,1,2,3,4 -- \\
        --search-query words:6 --miss-rate 0.3 --spurious-rate 0.2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import fmean
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

_KEYS = ("complete_turns", "preloaded", "searches_per_turn", "tool_tokens_per_turn")


def run(dataset: str, seed: int, extra: list[str]) -> dict[str, Any]:
    """One replay's ``--json`` report."""
    cmd = [sys.executable, "-m", "shortlist.cli", "eval", "--dataset", dataset, "--json", "--no-progress"]
    cmd += ["--seed", str(seed), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_conversation_scale: {' '.join(cmd)} failed:\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def mean_rows(reports: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per strategy, each figure's mean over the reports."""
    out: dict[str, dict[str, float]] = {}
    for name in reports[0]["strategies"]:
        rows = [r["strategies"][name] for r in reports]
        row = {k: fmean(float(r[k]) for r in rows) for k in _KEYS}
        for h in rows[0]["cost"]:
            row[f"cost@{h}"] = fmean(float(r["cost"][h]) for r in rows)
            row[f"x_oracle@{h}"] = fmean(float(r["cost_vs_oracle"][h]) for r in rows)
        out[name] = row
    return out


def table(rows: dict[str, dict[str, float]], markdown: bool) -> str:
    histories = [k.split("@")[1] for k in next(iter(rows.values())) if k.startswith("cost@")]
    head = ["strategy", "complete", "preloaded", "searches/turn", "tool tokens/turn"]
    head += [f"cost @{int(h):,}" for h in histories] + [f"x oracle @{int(h):,}" for h in histories]
    body = []
    for name, r in rows.items():
        cells = [name, f"{r['complete_turns']:.3f}", f"{r['preloaded']:.3f}", f"{r['searches_per_turn']:.2f}"]
        cells += [f"{r['tool_tokens_per_turn']:,.0f}"]
        cells += [f"{r[f'cost@{h}']:,.0f}" for h in histories] + [f"{r[f'x_oracle@{h}']:.2f}" for h in histories]
        body.append(cells)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    return "\n".join(
        " ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in [head, *body]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--dataset", required=True)
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument("--markdown", action="store_true", help="a Markdown table")
    p.add_argument("--save", help="also write the reports (one JSON list) to this file")
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    reports = []
    for seed in seeds:
        reports.append(run(args.dataset, seed, extra))
        sys.stderr.write(f"bench_conversation_scale: seed {seed} done\n")
    if args.save:
        Path(args.save).write_text(json.dumps(reports) + "\n", encoding="utf-8")
    first = reports[0]
    sys.stdout.write(
        f"{Path(args.dataset).name}: {first['conversations']} conversations, {first['turns']} turns, catalog "
        f"{first['catalog_tokens']:,} tokens; seeds {args.seeds}; simulation {json.dumps(first['simulation'])}\n"
    )
    sys.stdout.write(table(mean_rows(reports), args.markdown) + "\n")
    sys.stdout.write(spread(reports) + "\n")
    return 0


def spread(reports: list[dict[str, Any]]) -> str:
    """The default strategy's 95% intervals over the conversations, the seeds pooled (each conversation's
    figures summed over them: ``shortlist.eval._intervals.pooled``); ``shortlist eval diff`` reads a
    ``--save`` file the same way."""
    from shortlist.eval._intervals import intervals_of, pooled, resamples

    first = reports[0]
    name = first["default"] if first["default"] in first["strategies"] else next(iter(first["strategies"]))
    both = pooled(reports)
    rows = both["strategies"]
    histories = list(rows[name]["per_conversation"]["cost"])
    found = intervals_of(
        rows[name]["per_conversation"],
        rows["oracle"]["per_conversation"],
        both["conversation_turns"],
        resamples(len(both["conversation_ids"]), 0),
        histories[0],
    )
    low, high = found["complete_turns"]
    parts = [f"complete {low:.3f}-{high:.3f}"]
    for h, pair in found["cost_vs_oracle"].items():
        parts.append(f"x oracle @{int(h):,} " + ("-" if pair is None else f"{pair[0]:.2f}-{pair[1]:.2f}"))
    return f"{name}, 95% interval over the {len(both['conversation_ids'])} conversations (seeds pooled): " + ", ".join(
        parts
    )


if __name__ == "__main__":
    sys.exit(main())
