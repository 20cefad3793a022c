"""The service's recent decisions: a bounded in-memory ring, and the read-only page that shows it.

The selection routes (``/v1/select``, ``/v1/offer``) record each turn they answered right where
they count it in the metrics, so the ring sees exactly what clients were told: what was
offered, the scores, any fallback and its reason, and the tool-definition tokens the turn saved
against sending every eligible tool (counted as every surface counts them,
:func:`shortlist._tokens.tool_tokens`). :func:`breaker_states` reads the circuit breakers of the selectors the
service built. :func:`render_page` draws both as one HTML page that needs nothing beyond
itself (inline CSS and a few lines of JavaScript for the filter; a CSP forbids any request).

The ring is per worker process (``--workers N`` gives N rings) and holds the last
:data:`DEFAULT_CAPACITY` decisions; query texts are cut to :data:`MAX_QUERY_CHARS`.

A decision carries the memory scopes of the API key that made it: a key limited to scopes
(``KEY user_id=alice``) sees only the decisions of keys with the same scopes, an unscoped key
(and the loopback client when no key is configured) sees every decision.
"""

from __future__ import annotations

import html
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shortlist._tokens import tool_tokens
from shortlist._types import Candidate, TurnSelection
from shortlist.errors import UsageError
from shortlist.rankers._breaker import BreakerSelector
from shortlist.selection._base import Selector
from shortlist.server._settings import KeyPolicy

__all__ = ["DEFAULT_CAPACITY", "MAX_QUERY_CHARS", "Decision", "DecisionLog", "breaker_states", "render_page"]

#: Decisions kept per worker.
DEFAULT_CAPACITY = 200
#: The longest query text kept (the rest is cut, with an ellipsis).
MAX_QUERY_CHARS = 300
_MAX_REASON_CHARS = 500
_MAX_IDS = 50


@dataclass(frozen=True, slots=True)
class Decision:
    """One answered selection, as the page shows it.

    Attributes:
        seq: its number in this worker (1, 2, …).
        at: when it was answered (Unix time).
        route: the route that answered (``/v1/select``, ``/v1/offer``).
        kind: ``tool`` or ``skill``.
        query: the query text (cut to :data:`MAX_QUERY_CHARS`).
        selector: the selector that ranked, or None.
        eligible: how many candidates were eligible.
        selected: what surfaced, pins included, with each ranked id's score (None: no score).
        pinned: the pinned ids among them.
        rejected: ids the selector answered that were not candidates.
        fallback: why the turn fell back to every eligible candidate, or None.
        reason: the selector's (or the fallback's) reason text.
        abstained: the ranker judged that nothing fits.
        elapsed_ms: selection time.
        tokens_all: tokens of every eligible definition (:func:`shortlist._tokens.tool_tokens`).
        tokens_selected: tokens of the surfaced ones.
        offered: ``/v1/offer`` only: the tools block sent to the model (else None).
        scopes: the scopes of the key that made it (None: an unscoped key); never shown.
    """

    seq: int
    at: float
    route: str
    kind: str
    query: str
    selector: str | None
    eligible: int
    selected: tuple[tuple[str, float | None], ...]
    pinned: tuple[str, ...]
    rejected: tuple[str, ...]
    fallback: str | None
    reason: str
    abstained: bool
    elapsed_ms: float
    tokens_all: int
    tokens_selected: int
    offered: tuple[str, ...] | None = None
    scopes: _Scopes | None = None

    def visible_to(self, key: KeyPolicy) -> bool:
        """True when ``key`` may see this decision: an unscoped key sees all, a scoped one its own."""
        return key.scopes is None or _scopes(key) == self.scopes

    @property
    def tokens_saved(self) -> int:
        """Tokens not sent, against every eligible definition."""
        return max(0, self.tokens_all - self.tokens_selected)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of ``GET /v1/decisions``."""
        return {
            "seq": self.seq,
            "at": datetime.fromtimestamp(self.at, UTC).isoformat(timespec="milliseconds"),
            "route": self.route,
            "kind": self.kind,
            "query": self.query,
            "selector": self.selector,
            "eligible": self.eligible,
            "selected": [{"id": i, "score": s} for i, s in self.selected],
            "pinned": list(self.pinned),
            "rejected": list(self.rejected),
            "fallback": self.fallback,
            "reason": self.reason,
            "abstained": self.abstained,
            "elapsed_ms": round(self.elapsed_ms, 3),
            "tokens": {"all": self.tokens_all, "selected": self.tokens_selected, "saved": self.tokens_saved},
            "offered": None if self.offered is None else list(self.offered),
        }


_Scopes = frozenset[frozenset[tuple[str, str]]]


def _scopes(key: KeyPolicy | None) -> _Scopes | None:
    if key is None or key.scopes is None:
        return None
    return frozenset(frozenset(scope.items()) for scope in key.scopes)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class DecisionLog:
    """The ring of recent decisions (thread-safe; oldest dropped first).

    Args:
        capacity: decisions kept.
        catalogs: the service's loaded catalogs: their definitions' token estimates are
            computed once, not per request.
    """

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, catalogs: Mapping[str, Sequence[Candidate]] | None = None
    ) -> None:
        if capacity < 1:
            raise UsageError("capacity must be >= 1")
        self.capacity = capacity
        self._ring: deque[Decision] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._seq = 0
        self._per_scope: dict[_Scopes | None, int] = {}
        self._tokens: dict[int, tuple[Sequence[Candidate], dict[str, int], int]] = {}
        for catalog in (catalogs or {}).values():
            self._tokens[id(catalog)] = self._count(catalog)

    @staticmethod
    def _count(candidates: Sequence[Candidate]) -> tuple[Sequence[Candidate], dict[str, int], int]:
        per = {c.id: tool_tokens((c,)) for c in candidates}
        return candidates, per, sum(per.values())

    def record(
        self,
        route: str,
        query: str,
        candidates: Sequence[Candidate],
        turn: TurnSelection,
        *,
        kind: str = "tool",
        offered: Iterable[str] | None = None,
        key: KeyPolicy | None = None,
    ) -> Decision:
        """Record one answered turn (made with ``key``; None: unscoped) and return it."""
        known = self._tokens.get(id(candidates))
        _, per, total = known if known is not None and known[0] is candidates else self._count(candidates)
        scores = turn.scores or {}
        ids = turn.ids
        selected = tuple((i, scores.get(i)) for i in ids[:_MAX_IDS])
        with self._lock:
            self._seq += 1
            scopes = _scopes(key)
            self._per_scope[scopes] = self._per_scope.get(scopes, 0) + 1
            decision = Decision(
                seq=self._seq,
                at=time.time(),
                route=route,
                kind=kind,
                query=_cut(query, MAX_QUERY_CHARS),
                selector=turn.selector,
                eligible=len(candidates),
                selected=selected,
                pinned=tuple(turn.pinned[:_MAX_IDS]),
                rejected=tuple(turn.rejected[:_MAX_IDS]),
                fallback=turn.fallback,
                reason=_cut(turn.reason or "", _MAX_REASON_CHARS),
                abstained=turn.abstained,
                elapsed_ms=turn.elapsed_ms,
                tokens_all=total,
                tokens_selected=sum(per.get(i, 0) for i in ids),
                offered=None if offered is None else tuple(offered)[:_MAX_IDS],
                scopes=scopes,
            )
            self._ring.append(decision)
        return decision

    def recent(self, key: KeyPolicy | None = None) -> list[Decision]:
        """The decisions kept, newest first: those ``key`` may see (None: all)."""
        with self._lock:
            kept = list(reversed(self._ring))
        return kept if key is None else [d for d in kept if d.visible_to(key)]

    def visible_total(self, key: KeyPolicy) -> int:
        """Decisions recorded since start that ``key`` may see (an unscoped key: :attr:`total`)."""
        with self._lock:
            return self._seq if key.scopes is None else self._per_scope.get(_scopes(key), 0)

    @property
    def total(self) -> int:
        """Decisions recorded since start (kept or not)."""
        with self._lock:
            return self._seq


def _breakers(selector: Selector, seen: set[int]) -> Iterable[BreakerSelector]:
    if id(selector) in seen:
        return
    seen.add(id(selector))
    if isinstance(selector, BreakerSelector):
        yield selector
    for attr in ("wrapped", "fallback"):
        inner = getattr(selector, attr, None)
        if isinstance(inner, Selector):
            yield from _breakers(inner, seen)


def breaker_states(selectors: Iterable[Selector]) -> list[dict[str, Any]]:
    """The state of every circuit breaker among ``selectors`` (and what they wrap or fall back to).

    Each is ``{"selector", "state": "closed" | "open" | "probing", "failures", "threshold", "cooldown_s"}``.
    """
    seen: set[int] = set()
    out: list[dict[str, Any]] = []
    for sel in selectors:
        for b in _breakers(sel, seen):
            state = "probing" if b.probing else "open" if b.is_open else "closed"
            out.append(
                {
                    "selector": b.name,
                    "state": state,
                    "failures": b._failed,  # a read-only view of the breaker's counter
                    "threshold": b.failures,
                    "cooldown_s": b.cooldown_s,
                }
            )
    return sorted(out, key=lambda b: b["selector"])


# --- the page ------------------------------------------------------------------------------------

#: Forbids every request but the page itself (its refresh link is the same URL).
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; form-action 'self'"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:20px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.n{text-align:right}.meta{color:#666}.ids{font-size:12px}.score{color:#777}
.fb{color:#b03a2e;font-weight:600}.ok{color:#1a7f37}.open{color:#b03a2e;font-weight:600}
.probing{color:#b7950b;font-weight:600}.closed{color:#1a7f37}.pin{color:#555;font-style:italic}
.filters{margin:8px 0}.filters>*{margin-right:8px}code{background:#f3f3f3;padding:0 3px}
"""

_JS = """
(function(){
  var text=document.getElementById('filter'), only=document.getElementById('only-fallbacks');
  var count=document.getElementById('count');
  var rows=Array.prototype.slice.call(document.querySelectorAll('#decisions tr.decision'));
  function apply(){
    var q=text.value.trim().toLowerCase(), n=0;
    rows.forEach(function(r){
      var ok=(!only.checked||r.dataset.fallback!=='')&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
      r.hidden=!ok; if(ok){n++;}
    });
    count.textContent=String(n);
  }
  text.addEventListener('input',apply); only.addEventListener('change',apply);
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _selected_cell(d: Decision) -> str:
    pinned = set(d.pinned)
    parts = []
    for cid, score in d.selected:
        cls = "pin" if cid in pinned else "id"
        score_text = "" if score is None else f' <span class="score">{score:.3f}</span>'
        parts.append(f'<span class="{cls}">{_e(cid)}{score_text}</span>')
    return ", ".join(parts) or "–"


def render_page(
    decisions: Sequence[Decision],
    breakers: Sequence[Mapping[str, Any]],
    *,
    total: int,
    capacity: int,
    refresh: int | None = None,
) -> str:
    """The read-only decisions page (newest first) with the breakers' state."""
    rows = []
    for d in decisions:
        fallback = f'<span class="fb">{_e(d.fallback)}</span>' if d.fallback else '<span class="ok">narrowed</span>'
        if d.abstained:
            fallback += " (abstained)"
        offered = "" if d.offered is None else f'<div class="ids">block: {_e(", ".join(d.offered) or "–")}</div>'
        rejected = f'<div class="ids">rejected: {_e(", ".join(d.rejected))}</div>' if d.rejected else ""
        saved = f"{d.tokens_saved:,} of {d.tokens_all:,}"
        when = datetime.fromtimestamp(d.at, UTC).strftime("%H:%M:%S")
        rows.append(
            f'<tr class="decision" data-fallback="{_e(d.fallback or "")}" data-seq="{d.seq}">'
            f'<td class="n">{d.seq}</td><td>{when}</td><td>{_e(d.route)}<div class="meta">{_e(d.kind)}</div></td>'
            f"<td>{_e(d.query) or '<i>(empty)</i>'}</td><td>{_e(d.selector or '–')}</td>"
            f'<td class="n">{d.eligible:,}</td><td class="ids">{_selected_cell(d)}{offered}{rejected}</td>'
            f'<td>{fallback}<div class="meta">{_e(d.reason)}</div></td>'
            f'<td class="n">{d.elapsed_ms:.2f}</td><td class="n">{saved}</td></tr>'
        )
    brows = "".join(
        f'<tr class="breaker"><td>{_e(b["selector"])}</td><td class="{_e(b["state"])}">{_e(b["state"])}</td>'
        f'<td class="n">{b["failures"]} / {b["threshold"]}</td><td class="n">{b["cooldown_s"]:g}</td></tr>'
        for b in breakers
    )
    breaker_table = (
        '<table id="breakers"><thead><tr><th>selector</th><th>state</th><th>failures / threshold</th>'
        f"<th>cooldown s</th></tr></thead><tbody>{brows}</tbody></table>"
        if breakers
        else '<p id="breakers">No selector of this service has a circuit breaker (only external selectors do).</p>'
    )
    refresh_meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    toggle = '<a href="?">stop refreshing</a>' if refresh else '<a href="?refresh=5">refresh every 5 s</a>'
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">{refresh_meta}'
        f"<title>shortlist: recent decisions</title><style>{_CSS}</style></head><body>"
        "<h1>Recent decisions</h1>"
        f'<div class="meta">worker pid {os.getpid()}, {now}: the last {len(decisions):,} of {total:,} decisions '
        f"(this worker keeps {capacity:,}); read-only. {toggle} · JSON: <code>GET /v1/decisions</code></div>"
        f"<h2>Circuit breakers</h2>{breaker_table}"
        "<h2>Decisions, newest first</h2>"
        '<div class="filters"><input id="filter" type="search" size="40" placeholder="filter: query, id, selector, '
        'reason"><label><input id="only-fallbacks" type="checkbox"> fallbacks only</label>'
        f'<span id="count">{len(decisions)}</span> shown</div>'
        '<table id="decisions"><thead><tr><th>#</th><th>time</th><th>route</th><th>query</th><th>selector</th>'
        "<th>eligible</th><th>surfaced (score)</th><th>outcome</th><th>ms</th><th>tokens saved</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table><script>{_JS}</script></body></html>\n"
    )
