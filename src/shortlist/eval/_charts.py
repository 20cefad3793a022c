"""The report's charts as inline SVG (no script, no network): grouped bars and lines, with a legend,
every text HTML-escaped. Used by :mod:`shortlist.eval._report`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bar_chart", "escape", "line_chart"]

_PALETTE = ("#3366cc", "#dc7633", "#2e9e5b", "#9b59b6", "#c0392b", "#16a085", "#7f8c8d", "#b7950b")


def escape(value: Any) -> str:
    """``value`` as HTML text or attribute (quotes escaped)."""
    return html.escape(str(value), quote=True)


def _legend(series: Sequence[str]) -> str:
    items = "".join(
        f'<span class="key"><i style="background:{_PALETTE[i % len(_PALETTE)]}"></i>{escape(s)}</span>'
        for i, s in enumerate(series)
    )
    return f'<div class="legend">{items}</div>'


def bar_chart(
    chart_id: str,
    title: str,
    groups: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[str, str], float | None],
    *,
    ymax: float | None = None,
    fmt: str = "{:.3f}",
) -> str:
    """Grouped vertical bars as an inline ``<svg>``: one group per ``groups``, one bar per ``series``."""
    width, height, left, bottom, top = 720, 260, 56, 44, 16
    finite = [v for v in values.values() if v is not None and math.isfinite(v)]
    top_value = ymax if ymax is not None else (max(finite) * 1.1 if finite and max(finite) > 0 else 1.0)
    plot_w, plot_h = width - left - 12, height - bottom - top
    gw = plot_w / max(1, len(groups))
    bw = max(2.0, min(40.0, (gw * 0.8) / max(1, len(series))))
    parts = [f'<svg class="chart" id="{escape(chart_id)}" viewBox="0 0 {width} {height}" role="img">']
    parts.append(f"<title>{escape(title)}</title>")
    for i in range(5):
        tick = top_value * i / 4
        y = top + plot_h - plot_h * i / 4
        parts.append(f'<line class="grid" x1="{left}" x2="{width - 12}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt.format(tick))}</text>'
        )
    for gi, g in enumerate(groups):
        x0 = left + gi * gw + (gw - bw * len(series)) / 2
        for si, s in enumerate(series):
            v = values.get((g, s))
            if v is None or not math.isfinite(v):
                continue
            h = plot_h * min(v, top_value) / top_value if top_value else 0.0
            x, y = x0 + si * bw, top + plot_h - h
            color = _PALETTE[si % len(_PALETTE)]
            parts.append(
                f'<rect class="bar" data-group="{escape(g)}" data-series="{escape(s)}" data-value="{v}" x="{x:.1f}" '
                f'y="{y:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" fill="{color}">'
                f"<title>{escape(g)} · {escape(s)}: {escape(fmt.format(v))}</title></rect>"
            )
        label = g if len(g) <= 18 else g[:17] + "…"
        parts.append(
            f'<text class="label" x="{left + gi * gw + gw / 2:.1f}" y="{height - bottom + 16}" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    parts.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}"/>')
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}{_legend(series)}</figure>"


def line_chart(
    chart_id: str,
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    xlabel: str,
    ylabel: str,
) -> str:
    """Lines with markers as an inline ``<svg>`` on [0, 1] × [0, 1] axes."""
    width, height, left, bottom, top, right = 720, 300, 56, 48, 16, 16
    plot_w, plot_h = width - left - right, height - bottom - top

    def px(x: float) -> float:
        return left + plot_w * max(0.0, min(1.0, x))

    def py(y: float) -> float:
        return top + plot_h - plot_h * max(0.0, min(1.0, y))

    parts = [f'<svg class="chart" id="{escape(chart_id)}" viewBox="0 0 {width} {height}" role="img">']
    parts.append(f"<title>{escape(title)}</title>")
    for i in range(6):
        t = i / 5
        parts.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{py(t):.1f}" y2="{py(t):.1f}"/>')
        parts.append(f'<text class="tick" x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:.1f}</text>')
        parts.append(f'<text class="tick" x="{px(t):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{t:.1f}</text>')
    parts.append(
        f'<text class="label" x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">{escape(xlabel)}</text>'
    )
    parts.append(
        f'<text class="label" transform="translate(14,{top + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(ylabel)}</text>'
    )
    for si, (name, points) in enumerate(series.items()):
        color = _PALETTE[si % len(_PALETTE)]
        pts = sorted(points)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        parts.append(f'<polyline class="line" data-series="{escape(name)}" points="{path}" stroke="{color}"/>')
        for x, y in pts:
            parts.append(
                f'<circle class="point" data-series="{escape(name)}" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" '
                f'fill="{color}"><title>{escape(name)}: {xlabel} {x:.3f}, {ylabel} {y:.3f}</title></circle>'
            )
    parts.append("</svg>")
    return f"<figure><figcaption>{escape(title)}</figcaption>{''.join(parts)}{_legend(list(series))}</figure>"


# --- sections --------------------------------------------------------------------------------------
