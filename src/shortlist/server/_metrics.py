"""Prometheus metrics of the service: requests per route, selections, fallbacks by reason, exec timeouts.

Each app owns a :class:`ServiceMetrics` on its own registry, so several apps in one process
(tests) do not collide. With ``--workers N`` the CLI sets ``PROMETHEUS_MULTIPROC_DIR`` before
the workers start; then ``/metrics`` aggregates every worker's values through
:class:`prometheus_client.multiprocess.MultiProcessCollector`.

Fallbacks and external-selector timeouts are counted from the library's events (an event hook),
so the numbers are the ones the selection core itself reports.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from shortlist._events import Event, SelectionFallback

__all__ = ["CONTENT_TYPE_LATEST", "ServiceMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    """The counters and histograms of one service instance."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "shortlist_http_requests", "HTTP requests answered", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "shortlist_http_request_duration_seconds",
            "Time to answer an HTTP request",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.selections = Counter(
            "shortlist_selections", "Selections made", ["kind", "selector", "outcome"], registry=r
        )
        self.fallbacks = Counter(
            "shortlist_selection_fallbacks", "Turns that fell back to all eligible", ["reason", "selector"], registry=r
        )
        self.exec_timeouts = Counter(
            "shortlist_external_selector_timeouts",
            "External selector calls killed at their deadline",
            ["selector"],
            registry=r,
        )
        self.exec_restarts = Counter(
            "shortlist_external_selector_worker_restarts",
            "Persistent selector workers restarted",
            ["selector"],
            registry=r,
        )

        self.breaker_changes = Counter(
            "shortlist_circuit_breaker_changes",
            "Circuit breakers of external selectors opening and closing",
            ["selector", "state"],
            registry=r,
        )

        self.connections_closed = Counter(
            "shortlist_http_connections_closed",
            "Connections the server closed: header_timeout (408), idle (keep-alive), over_limit (503)",
            ["reason"],
            registry=r,
        )

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and record its latency."""
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)

    def observe_selection(self, kind: str, selector: str | None, fallback: str | None) -> None:
        """Count one selection served through the HTTP API."""
        self.selections.labels(kind, selector or "none", "fallback" if fallback else "narrowed").inc()

    def on_event(self, event: Event) -> None:
        """Event hook: count fallbacks, exec timeouts and restarts, breaker changes and closed connections."""
        if isinstance(event, SelectionFallback):
            self.fallbacks.labels(event.reason, event.selector or "none").inc()
            return
        selector = str(getattr(event, "selector", "") or "none")
        if event.name == "exec.killed" and getattr(event, "reason", "") == "timeout":
            self.exec_timeouts.labels(selector).inc()
        elif event.name == "exec.worker_restarted":
            self.exec_restarts.labels(selector).inc()
        elif event.name == "breaker.changed":
            self.breaker_changes.labels(selector, str(getattr(event, "state", ""))).inc()
        elif event.name == "server.connection_closed":
            self.connections_closed.labels(str(getattr(event, "reason", ""))).inc()

    def exposition(self) -> bytes:
        """The text exposition format of every metric (all workers' in multiprocess mode)."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest(self.registry)
