"""``shortlist eval``'s results rendered: the selectors' table, the conversation-replay table, the
misses, and the HTML report (``--report``, written atomically).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from shortlist.cli._eval_progress import log

__all__ = ["conversation_table", "diff_table", "misses_text", "selector_table", "write_report"]


def write_report(
    args: argparse.Namespace,
    *,
    reports: dict[str, dict[str, Any]] | None = None,
    misses: list[Any] | None = None,
    conversation: dict[str, Any] | None = None,
) -> None:
    import os
    import shlex
    from datetime import UTC, datetime

    from shortlist import __version__
    from shortlist.errors import ConfigError
    from shortlist.eval._report import render_html

    name = Path(args.dataset.rstrip("/")).name or args.dataset
    page = render_html(
        title=f"shortlist eval: {name}",
        reports=reports,
        misses=misses or [],
        conversation=conversation,
        k=args.k,
        meta=[
            "shortlist eval " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["eval"] else "",
            f"shortlist {__version__}, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        ],
    )
    target = Path(args.report)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write --report {target}: {exc.strerror or exc}") from None
    log(f"report written to {target}")


def conversation_table(report: dict[str, Any], histories: list[int]) -> str:
    """The conversation-replay table (tokens and costs as whole numbers; at most 100 columns for two histories)."""
    all_cost = report["strategies"].get("all", {}).get("cost", {})
    lines = [
        f"{report['conversations']:,} conversations, {report['turns']:,} turns, whole catalog "
        f"{report['catalog_tokens']:,} tokens ({report['counter']}); default strategy: {report['default']}",
    ]
    header = ["strategy", "recall", "complete", "tools", "tool tokens", "changes", "calls/turn"]
    header += [f"cost @{h:,}" for h in histories]
    rows = [header]
    for name, m in report["strategies"].items():
        row = [name, _fmt(m["turn_recall"]), _fmt(m["complete_turns"]), f"{m['tools_per_turn']:.1f}"]
        row += [f"{round(m['tool_tokens_per_turn']):,}", f"{m['tool_block_changes']:.2f}"]
        row += [f"{m['model_calls_per_turn']:.2f}"]
        for h in histories:
            cost = m["cost"][str(h)]
            ratio = f" ({cost / all_cost[str(h)]:.2f}x)" if all_cost.get(str(h)) else ""
            row.append(f"{cost:,.0f}{ratio}")
        rows.append(row)
    lines += _aligned(rows)
    lines.append("changes: tools-block changes per conversation; cost: base-price input tokens per conversation")
    prices, context = report.get("prices"), report.get("context")
    if prices:
        lines.append(
            f"prices {prices['preset']}: writes {prices['cache_write']:g}x, reads {prices['cache_read']:g}x, "
            f"minimum cacheable prefix {prices['min_prefix']:,} tokens"
        )
    if context:
        budget = context["history_budget"]
        lines.append(
            f"context a turn: {context['grounding_tokens']:,} grounding + {context['memory_tokens']:,} memory tokens "
            f"in the {context['placement']}"
            + (f"; history budget {budget:,} (low water {context['low_water']:g})" if budget else "")
        )
    lines.append("")
    sim = report.get("simulation")
    if sim:
        lines.append(
            f"simulated model: search query {sim['search_query']}, miss rate {sim['miss_rate']:g}, spurious rate "
            f"{sim['spurious_rate']:g}, seed {sim['seed']}, miss cost {sim['miss_cost']}"
        )
    spread = report.get("intervals")
    second = [["strategy", "preloaded", "searches/turn", *(f"x oracle @{h:,}" for h in histories)]]
    if spread:
        second[0].insert(3, "complete")
    for name, m in report["strategies"].items():
        ratios = m.get("cost_vs_oracle", {})
        bounds = m.get("intervals", {})
        cells = [name, _fmt(m.get("preloaded")), f"{m['searches_per_turn']:.2f}"]
        if spread:
            cells.append(_fmt(m["complete_turns"]) + _bounds(bounds.get("complete_turns"), "{:.3f}"))
        for h in histories:
            ratio = ratios.get(str(h))
            within = _bounds(bounds.get("cost_vs_oracle", {}).get(str(h)), "{:.2f}") if spread else ""
            cells.append("-" if ratio is None else f"{ratio:.2f}x{within}")
        second.append(cells)
    lines += _aligned(second)
    lines.append(
        "preloaded: share of a turn's tools callable before any search; x oracle: cost / the oracle's\n"
        "(the floor: each turn's tools loaded into the history on first use, nothing else offered)"
    )
    if spread:
        lines.append(
            f"(a-b): {spread['level']:.0%} bootstrap interval over the {report['conversations']:,} conversations "
            f"({spread['draws']:,} draws, seed {spread['seed']});\n"
            "two runs, conversation by conversation: shortlist eval diff BEFORE.json AFTER.json"
        )
    lines += _loads_table(report, histories)
    return "\n".join(lines)


def diff_table(result: dict[str, Any]) -> str:
    """``shortlist eval diff``'s table: each figure before, after, the difference and its interval."""
    rows = [["figure", "before", "after", "difference", f"{result['level']:.0%} interval", ""]]
    ranking = result["kind"] == "ranking"

    def add(name: str, fig: dict[str, Any]) -> None:
        pair = fig["interval"]
        rows.append(
            [
                name,
                f"{fig['before']:.4f}",
                f"{fig['after']:.4f}",
                f"{fig['difference']:+.4f}",
                "-" if pair is None else f"{pair[0]:+.4f} to {pair[1]:+.4f}",
                "clear" if fig["clear"] else "within noise",
            ]
        )

    if ranking:
        add("nDCG@10", result["ndcg@10"])
        add("Recall@5", result["recall@5"])
        before, after = result["selector"]
        title = f"{before} -> {after} over {result['queries']:,} queries with a tool, after - before"
        unit = "queries"
    else:
        add("complete turns", result["complete_turns"])
        for h, fig in result["cost_vs_oracle"].items():
            add(f"x oracle @{int(h):,}", fig)
        title = f"{result['strategy']} over {result['conversations']:,} conversations, after - before"
        if max(result.get("runs", (1,))) > 1:
            title += f" (seeds pooled: {result['runs'][0]} / {result['runs'][1]})"
        unit = "conversations"
    lines = [title, *_aligned(rows)]
    lines.append(
        f"interval: {result['draws']:,} resamples of the {unit} (seed {result['seed']}), the same ones from both"
        " runs; clear: it leaves out zero"
    )
    return "\n".join(lines)


def _aligned(rows: list[list[str]]) -> list[str]:
    """A table's lines: the first column left-aligned, the others right-aligned, each as wide as its widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        " ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))).rstrip()
        for r in rows
    ]


def _bounds(pair: list[float] | None, form: str) -> str:
    """`` (low-high)`` of an interval, or nothing when it has none."""
    return "" if not pair else f" ({form.format(pair[0])}-{form.format(pair[1])})"


def _loads_table(report: dict[str, Any], histories: list[int]) -> list[str]:
    """Where the default strategy's (else the first loading one's) prefetched and searched definitions went."""
    from shortlist.eval._loads import LOADS_NOTE, load_rows

    found = load_rows(report)
    if found is None:
        return []
    name, rows = found
    table = [["loaded by", "definitions", "called now", "later", "never", "never tokens/conv"]]
    for r in rows:
        share = f" ({r.never_share:.0%})" if r.never_share is not None else ""
        table.append(
            [
                r.source,
                f"{r.definitions:,}",
                f"{r.now:,}",
                f"{r.later:,}",
                f"{r.never:,}{share}",
                f"{r.never_tokens_per_conversation:,.0f}",
            ]
        )
    out = ["", f"where {name}'s loaded definitions went (at {histories[0]:,} tokens of history):"]
    out += _aligned(table)
    out.append(LOADS_NOTE)
    return out


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


#: (report key, column header) of the tool-retrieval table, in order.
_COLUMNS = (
    ("recall@1", "R@1"),
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("ndcg@10", "nDCG"),
    ("mrr@10", "MRR"),
    ("abstention", "abst"),
    ("recall@5_abstaining", "R@5ab"),
)
_LEGEND = (
    "R@n: Recall@n; nDCG, MRR: @10; abst: no-tool queries surfacing only pins; R@5ab: Recall@5 with\n"
    "abstention on; ms: selector latency; tokens: mean tool-definition tokens selected; saved: vs the\n"
    "whole catalog"
)


def selector_table(reports: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    """The tool-retrieval table, at most 100 columns wide (see _LEGEND for the headers)."""
    first = next(iter(reports.values()))
    lines = [
        f"dataset {first['dataset']}: {first['queries']:,} queries ({first['queries_no_tool']:,} with no tool), "
        f"k={args.k}" + (f", {first['train_examples']:,} train examples" if args.train else ""),
        f"tokens: {first['tokens']['counter']}, whole catalog {first['tokens']['all']:,}",
    ]
    header = ["selector", "queries", *(h for _, h in _COLUMNS), "p50 ms", "p99 ms", "tokens", "saved", "build s"]
    rows: list[list[str]] = []
    for name, rep in reports.items():
        splits = [("all", rep)] + (list(rep["splits"].items()) if len(rep["splits"]) > 1 else [])
        for split, m in splits:
            saved = m["tokens"]["reduction"]
            rows.append(
                [
                    _cut(name, 14) if split == "all" else "  " + _cut(split, 12),
                    f"{m['queries']:,}",
                    *(_fmt(m[key]) for key, _ in _COLUMNS),
                    _ms(m["latency_ms"]["p50"]),
                    _ms(m["latency_ms"]["p99"]),
                    "-" if m["tokens"]["selected_mean"] is None else f"{round(m['tokens']['selected_mean']):,}",
                    "-" if saved is None else f"{saved:.0%}",
                    f"{rep['build_s']:.2f}" if split == "all" else "",
                ]
            )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = set(range(1, len(header)))

    def line(cells: list[str]) -> str:
        return " ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines += [line(header), *(line(r) for r in rows), _LEGEND]
    for name, rep in reports.items():
        spread = rep.get("intervals") or {}
        if spread.get("ndcg@10"):
            lines.append(
                f"{name}: {spread['level']:.0%} bootstrap interval over its {rep['queries_with_gold']:,} queries with "
                f"a tool: nDCG {spread['ndcg@10'][0]:.3f}-{spread['ndcg@10'][1]:.3f}, "
                f"R@5 {spread['recall@5'][0]:.3f}-{spread['recall@5'][1]:.3f}"
            )
    for name, rep in reports.items():
        curve = rep.get("abstention_curve")
        if curve is None:
            continue
        lines.append(f"abstention trade-off of {name} (min_score: abstention, R@5ab):")
        if not curve:
            lines.append("  (no scores, or no no-tool queries)")
        points: list[str] = []
        last: tuple[float, float] | None = None
        for p in curve:
            key = (p["abstention"], p["recall@5_abstaining"])
            if key != last:
                points.append(f"{p['min_score']:.3f}: {p['abstention']:.2f}, {p['recall@5_abstaining']:.2f}")
            last = key
        for i in range(0, len(points), 4):
            lines.append("  " + "   ".join(points[i : i + 4]))
    return "\n".join(lines)


def misses_text(misses: dict[str, list[Any]], limit: int, k: int) -> str:
    """The first ``limit`` misses of each selector, one per line (at most 100 columns)."""
    lines: list[str] = []
    for name, ms in misses.items():
        lines.append(f"misses of {name}: {len(ms):,} (gold not all in the top {k}, or a no-tool query not abstained)")
        for m in ms[:limit]:
            rank = "-" if m.gold_rank is None else str(m.gold_rank)
            lines.append(_cut(f"  [{m.kind}] {m.qid}: {m.query}", 100))
            lines.append(_cut(f"    gold {', '.join(m.gold) or '(none)'} (rank {rank})", 100))
            lines.append(_cut(f"    ranked {', '.join(m.ranked[:k])}", 100))
        if len(ms) > limit:
            lines.append(f"  … {len(ms) - limit:,} more")
    return "\n".join(lines)
