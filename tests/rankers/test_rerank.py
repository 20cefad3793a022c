"""The rerank ranker against a real local HTTP server: each response shape, auth, and the fallbacks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from loopback import http_thread
from shortlist._events import Event, event_hooks
from shortlist._types import Candidate, Query
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._rerank import RerankFallback, RerankRanker, parse_rerank_response
from shortlist.selection._base import SelectorContext
from shortlist.testing import HashEmbedder

CATALOG = [
    Candidate("refund", "refund_order", "refund an order and return the money"),
    Candidate("track", "track_order", "track where an order is"),
    Candidate("cancel", "cancel_order", "cancel an order before it ships"),
    Candidate("weather", "get_weather", "weather forecast"),
]
QUERY = Query("refund or cancel my order", k=3)


@contextmanager
def serve(status: int, payload: Any) -> Iterator[tuple[str, list[tuple[dict[str, Any], dict[str, str]]]]]:
    seen: list[tuple[dict[str, Any], dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append((json.loads(self.rfile.read(int(self.headers["Content-Length"]))), dict(self.headers)))
            raw = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    with http_thread(Handler) as server:
        yield f"{server.url}/rerank", seen


def first_stage_docs() -> list[str]:
    scores = Bm25Ranker().score(QUERY, CATALOG)
    order = sorted(range(len(CATALOG)), key=lambda i: -scores[i])
    return [f"{CATALOG[i].name}: {CATALOG[i].description}" for i in order]


# The remote puts the 3rd and then the 1st document sent first, in every shape.
SHAPES = {
    "cohere": {"id": "x", "results": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.4}]},
    "jina": {
        "results": [
            {"index": 2, "relevance_score": 0.9, "document": {"text": "…"}},
            {"index": 0, "relevance_score": 0.4, "document": {"text": "…"}},
        ]
    },
    "voyage": {"object": "list", "data": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.4}]},
    "tei": [{"index": 2, "score": 0.9}, {"index": 0, "score": 0.4}],
    "reference": {"results": [{"index": 2, "score": 0.9}, {"index": 0, "score": 0.4}]},
}


@pytest.mark.slow  # a loopback HTTP server
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_response_shape(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_API_KEY", "rk-1")
    docs = first_stage_docs()
    with serve(200, SHAPES[shape]) as (url, seen):
        monkeypatch.setenv("RERANK_URL", url)
        sel = RerankRanker(first_stage="bm25").select(QUERY, CATALOG)
    body, headers = seen[0]
    assert body == {"query": QUERY.text, "documents": docs, "top_k": 3}
    assert headers["Authorization"] == "Bearer rk-1"
    by_doc = {f"{c.name}: {c.description}": c.id for c in CATALOG}
    assert sel.selected[:2] == (by_doc[docs[2]], by_doc[docs[0]])
    assert len(sel.selected) == 3 and sel.selected[2] == by_doc[docs[1]]  # the rest keep first-stage order


@pytest.mark.slow  # a loopback HTTP server
@pytest.mark.parametrize(("status", "payload"), [(500, {"error": "down"}), (200, "not json"), (200, {"weird": []})])
def test_a_failing_endpoint_falls_back_to_the_first_stage(status: int, payload: Any) -> None:
    events: list[Event] = []
    with serve(status, payload) as (url, seen), event_hooks(events.append):
        sel = RerankRanker(url=url, api_key="k", first_stage="bm25").select(QUERY, CATALOG)
    assert len(seen) == 1
    assert sel.selected == Bm25Ranker().select(QUERY, CATALOG).selected
    assert [e.reason for e in events if isinstance(e, RerankFallback)] == ["error"]


@pytest.mark.slow  # a loopback HTTP server
def test_an_unreachable_endpoint_falls_back() -> None:
    with serve(200, {}) as (url, _):
        pass
    events: list[Event] = []
    with event_hooks(events.append):
        sel = RerankRanker(url=url, first_stage="bm25", timeout_s=0.5).select(QUERY, CATALOG)
    assert sel.selected == Bm25Ranker().select(QUERY, CATALOG).selected
    assert any(isinstance(e, RerankFallback) and e.reason == "error" for e in events)


def test_no_endpoint_uses_the_local_first_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RERANK_URL", raising=False)
    events: list[Event] = []
    ranker = RerankRanker(first_stage="hybrid")
    ranker.init(SelectorContext(embeddings=HashEmbedder()))
    with event_hooks(events.append):
        sel = ranker.select(QUERY, CATALOG)
    assert set(sel.selected) <= {"refund", "cancel", "track", "weather"} and len(sel.selected) == 3
    assert sel.selected[0] in {"refund", "cancel"}
    assert [e.reason for e in events if isinstance(e, RerankFallback)] == ["not_configured"]


@pytest.mark.slow  # a loopback HTTP server
def test_protocols_shape_the_request() -> None:
    with serve(200, SHAPES["tei"]) as (url, seen):
        RerankRanker(url=url, protocol="tei", first_stage="bm25", model="ignored").select(QUERY, CATALOG)
        RerankRanker(url=url, protocol="cohere", first_stage="bm25", model="rerank-v3.5").select(QUERY, CATALOG)
    assert set(seen[0][0]) == {"query", "texts"} and "Authorization" not in seen[0][1]
    assert seen[1][0]["top_n"] == 3 and seen[1][0]["model"] == "rerank-v3.5"


@pytest.mark.slow  # a loopback HTTP server
def test_only_the_top_candidates_n_are_sent() -> None:
    with serve(200, SHAPES["tei"]) as (url, seen):
        RerankRanker(url=url, first_stage="bm25", candidates_n=2).select(QUERY, CATALOG)
    assert len(seen[0][0]["documents"]) == 2


def test_parse_drops_bad_indexes_and_rejects_unknown_shapes() -> None:
    assert parse_rerank_response([{"index": 5, "score": 1}, {"index": 1, "score": 0.5}, {"index": 1}], 3) == [(1, 0.5)]
    with pytest.raises(ValueError):
        parse_rerank_response({"hits": []}, 3)
    with pytest.raises(ValueError):
        parse_rerank_response({"results": [{"score": 1}]}, 3)
