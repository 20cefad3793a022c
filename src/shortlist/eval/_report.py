"""The misses of an evaluation, and the self-contained HTML report of ``shortlist eval --report``.

:func:`find_misses` turns the per-query outcomes of :func:`~shortlist.eval._runner.run_eval`
into the queries a selector got wrong (gold not all in the top ``k``; or, on a no-tool query,
something other than pins surfaced). :func:`render_html` draws one HTML page from the reports:
the metrics table, per-split bars, the abstention trade-off curve, the conversation cost and
completeness figures, and the misses in a filterable table.

The page is one file that works offline: inline CSS, charts as inline SVG, a few lines of
inline JavaScript for the filter, and a Content-Security-Policy that forbids every network
request (no CDN, no fonts, no images but ``data:``). Every dataset text is HTML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from shortlist.eval._charts import bar_chart as bar_chart
from shortlist.eval._charts import escape as _e
from shortlist.eval._charts import line_chart
from shortlist.eval._loads import LOADS_NOTE, load_rows
from shortlist.eval._misses import KIND_ORDER, Miss, find_misses

__all__ = ["Miss", "find_misses", "render_html"]

#: The most misses of one selector the page lists (the rest are counted).
MAX_MISSES_PER_SELECTOR = 2000
_METRIC_LABELS = (
    ("recall@1", "Recall@1"),
    ("recall@5", "Recall@5"),
    ("recall@10", "Recall@10"),
    ("ndcg@10", "nDCG@10"),
    ("mrr@10", "MRR@10"),
    ("abstention", "abstention"),
    ("recall@5_abstaining", "Recall@5 abstaining"),
)


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "–"
        return f"{x:.{digits}f}"
    return str(x)


def _ms(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def _tokens(x: float | None) -> str:
    return "–" if x is None else f"{round(x):,}"


# --- charts (inline SVG) -------------------------------------------------------------------------


def _metrics_table(reports: Mapping[str, Mapping[str, Any]]) -> str:
    head = ["selector", "split", "queries", *(label for _, label in _METRIC_LABELS)]
    head += ["p50 ms", "p99 ms", "tokens / turn", "saved", "build s"]
    rows = []
    for name, rep in reports.items():
        splits = [("all", rep)] + (list(rep["splits"].items()) if len(rep.get("splits", {})) > 1 else [])
        for split, m in splits:
            saved = m["tokens"].get("reduction")
            cells = [name if split == "all" else "", split, _num(m["queries"])]
            cells += [_num(m.get(key)) for key, _ in _METRIC_LABELS]
            cells += [_ms(m["latency_ms"]["p50"]), _ms(m["latency_ms"]["p99"])]
            cells += [_tokens(m["tokens"].get("selected_mean")), "–" if saved is None else f"{saved:.1%}"]
            cells.append(_num(rep.get("build_s"), 2) if split == "all" else "")
            cls = "" if split == "all" else ' class="split"'
            rows.append(f"<tr{cls}>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    thead = "".join(f"<th>{_e(h)}</th>" for h in head)
    notes = []
    for name, rep in reports.items():
        spread = rep.get("intervals") or {}
        if spread.get("ndcg@10") and spread.get("recall@5"):
            (n_lo, n_hi), (r_lo, r_hi) = spread["ndcg@10"], spread["recall@5"]
            notes.append(
                f'<p class="interval">{_e(name)}: {spread["level"]:.0%} bootstrap interval over its '
                f"{_num(rep['queries_with_gold'])} queries with a tool: nDCG@10 {n_lo:.3f}–{n_hi:.3f}, "
                f"Recall@5 {r_lo:.3f}–{r_hi:.3f}</p>"
            )
    table = f'<table id="metrics"><thead><tr>{thead}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return table + "".join(notes)


def _split_charts(reports: Mapping[str, Mapping[str, Any]]) -> str:
    names = list(reports)
    splits = ["all", *dict.fromkeys(s for r in reports.values() for s in r.get("splits", {}))]
    if len(splits) == 2:  # one split: it is "all"
        splits = ["all"]
    out = []
    for metric, label in (("ndcg@10", "nDCG@10"), ("recall@5", "Recall@5")):
        values: dict[tuple[str, str], float | None] = {}
        for name, rep in reports.items():
            for split in splits:
                m = rep if split == "all" else rep.get("splits", {}).get(split)
                values[(split, name)] = None if m is None else m.get(metric)
        out.append(bar_chart(f"split-{metric}", f"{label} per split", splits, names, values, ymax=1.0))
    return "".join(out)


def _curve_chart(reports: Mapping[str, Mapping[str, Any]]) -> str:
    series = {
        name: [(p["abstention"], p["recall@5_abstaining"]) for p in rep["abstention_curve"]]
        for name, rep in reports.items()
        if rep.get("abstention_curve")
    }
    if not series:
        return ""
    chart = line_chart(
        "abstention-curve",
        "Abstention trade-off (min_score sweep)",
        series,
        xlabel="abstention on no-tool queries",
        ylabel="Recall@5 on the others",
    )
    rows = []
    for name, rep in reports.items():
        last: tuple[float, float] | None = None
        for p in rep.get("abstention_curve", []):
            key = (p["abstention"], p["recall@5_abstaining"])
            if key == last:
                continue
            last = key
            rows.append(
                f"<tr><td>{_e(name)}</td><td>{p['min_score']:.3f}</td><td>{p['abstention']:.3f}</td>"
                f"<td>{p['recall@5_abstaining']:.3f}</td></tr>"
            )
    table = (
        '<details><summary>the points</summary><table id="curve"><thead><tr><th>selector</th><th>min_score</th>'
        f"<th>abstention</th><th>Recall@5 abstaining</th></tr></thead><tbody>{''.join(rows)}</tbody></table></details>"
    )
    return f"<section><h2>Abstention</h2>{chart}{table}</section>"


def _conversation_section(report: Mapping[str, Any]) -> str:
    strategies = list(report["strategies"])
    histories = list(next(iter(report["strategies"].values()))["cost"]) if strategies else []
    base = report["strategies"].get("all", {}).get("cost", {})
    cost: dict[tuple[str, str], float | None] = {}
    for s, m in report["strategies"].items():
        for h in histories:  # relative to offering every tool when that was replayed: both sizes on one axis
            cost[(s, f"{int(h):,} prior tokens")] = m["cost"][h] / base[h] if base.get(h) else m["cost"][h]
    series = [f"{int(h):,} prior tokens" for h in histories]
    charts = bar_chart(
        "conversation-cost",
        "Prompt cost per conversation, relative to offering every tool"
        if base
        else "Prompt cost per conversation (base-price input tokens)",
        strategies,
        series,
        cost,
        fmt="{:.2f}×" if base else "{:,.0f}",
    )
    quality: dict[tuple[str, str], float | None] = {}
    for s, m in report["strategies"].items():
        quality[(s, "complete turns")] = m["complete_turns"]
        quality[(s, "turn recall")] = m["turn_recall"]
    charts += bar_chart(
        "conversation-recall",
        "Completeness per strategy",
        strategies,
        ["complete turns", "turn recall"],
        quality,
        ymax=1.0,
    )
    tokens = {(s, "tool tokens / turn"): m["tool_tokens_per_turn"] for s, m in report["strategies"].items()}
    charts += bar_chart(
        "conversation-tokens",
        "Tool-definition tokens per turn",
        strategies,
        ["tool tokens / turn"],
        tokens,
        fmt="{:,.0f}",
    )
    oracle = any("cost_vs_oracle" in m for m in report["strategies"].values())  # reports before the floor lack it
    head = ["strategy", "turn recall", "complete turns", "tools / turn", "tool tokens / turn", "block changes"]
    head += ["preloaded"] if oracle else []
    head += [f"cost @{int(h):,}" for h in histories]
    head += [f"× oracle @{int(h):,}" for h in histories] if oracle else []
    rows = []
    all_cost = report["strategies"].get("all", {}).get("cost", {})
    for s, m in report["strategies"].items():
        cells = [s, _num(m["turn_recall"]), _num(m["complete_turns"]), _num(m["tools_per_turn"], 1)]
        cells += [_tokens(m["tool_tokens_per_turn"]), _num(m["tool_block_changes"], 2)]
        cells += [_num(m.get("preloaded"))] if oracle else []
        for h in histories:
            ratio = f" ({m['cost'][h] / all_cost[h]:.2f}×)" if all_cost.get(h) else ""
            cells.append(f"{m['cost'][h]:,.0f}{ratio}")
        if oracle:
            vs = m.get("cost_vs_oracle", {})
            within = m.get("intervals", {}).get("cost_vs_oracle", {})
            for h in histories:
                spread = f" ({within[h][0]:.2f}–{within[h][1]:.2f})" if within.get(h) else ""
                cells.append("–" if vs.get(h) is None else f"{vs[h]:.2f}×{spread}")
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    thead = "".join(f"<th>{_e(h)}</th>" for h in head)
    summary = (
        f"<p>{_num(report['conversations'])} conversations, {_num(report['turns'])} turns, whole catalog "
        f"{_num(report['catalog_tokens'])} tokens ({_e(report['counter'])}); default strategy "
        f"<code>{_e(report['default'])}</code>.</p>"
    )
    table = f'<table id="conversation"><thead><tr>{thead}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f"<section><h2>Across a conversation</h2>{summary}{table}{charts}{_loads_section(report)}</section>"


def _loads_section(report: Mapping[str, Any]) -> str:
    """The table of where the default strategy's loaded definitions went (empty when nothing was loaded)."""
    found = load_rows(report)
    if found is None:
        return ""
    name, rows = found
    head = ["loaded by", "definitions", "called now", "later", "never", "never tokens / conversation"]
    body = []
    for r in rows:
        share = f" ({r.never_share:.0%})" if r.never_share is not None else ""
        cells = [r.source, _num(r.definitions), _num(r.now), _num(r.later), f"{_num(r.never)}{share}"]
        cells.append(_tokens(r.never_tokens_per_conversation))
        body.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    thead = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (
        f"<h3>Where <code>{_e(name)}</code>'s loaded definitions went</h3>"
        f'<table id="conversation-loads"><thead><tr>{thead}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        f"<p>{_e(LOADS_NOTE)}</p>"
    )


def _no_tool_note(reports: Mapping[str, Mapping[str, Any]], k: int) -> str:
    """Why no-tool queries are misses for selectors that never abstained (empty when none did not)."""
    never = [
        (name, int(rep.get("queries_no_tool") or 0))
        for name, rep in reports.items()
        if int(rep.get("queries_no_tool") or 0) > 0 and not rep.get("abstention")
    ]
    if not never:
        return ""
    who = ", ".join(f"{_e(name)} ({n:,} no-tool queries)" for name, n in never)
    return (
        f'<p class="note">Never abstained: {who}. Abstention is off unless a selector has a <code>min_score</code>: '
        f"without one it offers its top {k} tools on every turn, so every query that no tool fits surfaces more "
        "than the pins and counts as a <b>no-tool</b> miss. The abstention curve (<code>--curve</code>) shows "
        "what a threshold would trade: no-tool queries answered with the pins only against Recall@5 on the "
        "rest; set it as the selector's <code>min_score</code> option.</p>"
    )


def _misses_section(
    misses: Sequence[Miss], counts: Mapping[str, int], k: int, reports: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    selectors = list(counts)
    options = '<option value="">every selector</option>' + "".join(
        f'<option value="{_e(s)}">{_e(s)}</option>' for s in selectors
    )
    kinds = '<option value="">every kind</option>' + "".join(f'<option value="{k_}">{k_}</option>' for k_ in KIND_ORDER)
    rows = []
    for m in misses:
        gold = set(m.gold)
        ranked = " ".join(
            f'<span class="{"gold" if cid in gold else "id"}">{i}. {_e(cid)}</span>'
            for i, cid in enumerate(m.ranked, 1)
        )
        rank = "–" if m.gold_rank is None else str(m.gold_rank)
        rows.append(
            f'<tr class="miss" data-selector="{_e(m.selector)}" data-kind="{m.kind}"><td>{_e(m.selector)}</td>'
            f"<td>{_e(m.kind)}</td><td>{_e(m.split)}</td><td>{_e(m.query)}</td>"
            f'<td>{_e(", ".join(m.gold) or "(no tool)")}</td><td>{rank}</td><td class="ranked">{ranked}</td></tr>'
        )
    listed = ", ".join(f"{_e(s)} {n:,}" for s, n in counts.items())
    return (
        f"<section><h2>Misses</h2><p>Queries whose gold tools are not all in the top {k} (<b>missed</b>: none is; "
        "<b>partial</b>: some are not), and no-tool queries where more than pins surfaced (<b>no-tool</b>). "
        f"Per selector: {listed}.</p>{_no_tool_note(reports or {}, k)}"
        '<div class="filters"><input id="miss-filter" type="search" placeholder="filter: query, gold or ranked id" '
        f'size="40"><select id="miss-selector">{options}</select><select id="miss-kind">{kinds}</select>'
        f' <span id="miss-count">{len(misses):,}</span> shown</div>'
        '<table id="misses"><thead><tr><th>selector</th><th>kind</th><th>split</th><th>query</th><th>gold</th>'
        f"<th>gold rank</th><th>ranked</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1200px;color:#222;
padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:right;vertical-align:top}
th:first-child,td:first-child,#misses td,#misses th{text-align:left}
tr.split td{color:#555}tr.split td:nth-child(2){padding-left:20px}
figure{margin:12px 0;display:inline-block;width:100%;max-width:720px}figcaption{font-weight:600}
svg.chart{width:100%;height:auto;background:#fafafa}
.grid{stroke:#e4e4e4}.axis{stroke:#888}.tick,.label{font-size:11px;fill:#555}
.line{fill:none;stroke-width:2}
.legend{font-size:12px}.key{margin-right:14px}.key i{display:inline-block;width:10px;height:10px;margin-right:4px}
.filters{margin:8px 0}.filters>*{margin-right:8px}
#misses td.ranked{font-size:12px;color:#555}.gold{color:#1a7f37;font-weight:600}.id{margin-right:6px}
.gold{margin-right:6px}code{background:#f3f3f3;padding:0 3px}.meta{color:#666}
"""

_JS = """
(function(){
  var text=document.getElementById('miss-filter');
  if(!text){return;}
  var sel=document.getElementById('miss-selector'), kind=document.getElementById('miss-kind');
  var count=document.getElementById('miss-count');
  var rows=Array.prototype.slice.call(document.querySelectorAll('#misses tr.miss'));
  function apply(){
    var q=text.value.trim().toLowerCase(), s=sel.value, k=kind.value, n=0;
    rows.forEach(function(r){
      var ok=(!s||r.dataset.selector===s)&&(!k||r.dataset.kind===k)&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
      r.hidden=!ok; if(ok){n++;}
    });
    count.textContent=n.toLocaleString('en-US');
  }
  text.addEventListener('input',apply); sel.addEventListener('change',apply); kind.addEventListener('change',apply);
})();
"""

#: Forbids every request: the page needs nothing beyond itself.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def render_html(
    *,
    title: str,
    reports: Mapping[str, Mapping[str, Any]] | None = None,
    misses: Sequence[Miss] = (),
    conversation: Mapping[str, Any] | None = None,
    k: int = 5,
    meta: Sequence[str] = (),
) -> str:
    """The report as one self-contained HTML page.

    Args:
        title: the page's heading (the dataset, say).
        reports: tool-retrieval reports by selector name (what ``run_eval`` returns; an
            ``abstention_curve`` key draws the curve).
        misses: what :func:`find_misses` returned for each selector (at most
            :data:`MAX_MISSES_PER_SELECTOR` of each are listed; all are counted).
        conversation: a conversation-replay report (``run_conversation_eval``).
        k: the tools a turn selects (for the misses' caption).
        meta: lines shown under the heading (the command, the version, …).
    """
    body = [f"<h1>{_e(title)}</h1>"] + [f'<div class="meta">{_e(line)}</div>' for line in meta]
    if reports:
        first = next(iter(reports.values()))
        body.append(
            f"<p>{_num(first['queries'])} queries ({_num(first['queries_no_tool'])} with no tool), k = {k}; tokens "
            f"counted with {_e(first['tokens']['counter'])}, whole catalog {_num(first['tokens']['all'])} tokens.</p>"
        )
        body.append(f"<section><h2>Metrics</h2>{_metrics_table(reports)}{_split_charts(reports)}</section>")
        body.append(_curve_chart(reports))
        counts: dict[str, int] = dict.fromkeys(reports, 0)
        listed: list[Miss] = []
        for m in misses:
            counts[m.selector] = counts.get(m.selector, 0) + 1
            if counts[m.selector] <= MAX_MISSES_PER_SELECTOR:
                listed.append(m)
        body.append(_misses_section(listed, counts, k, reports))
    if conversation:
        body.append(_conversation_section(conversation))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        + "".join(body)
        + f"<script>{_JS}</script></body></html>\n"
    )
