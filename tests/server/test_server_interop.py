"""Interop endpoints over real HTTP: OpenAI embeddings, Cohere rerank consumed by our own RerankRanker."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from shortlist.embeddings.default import default_embedder
from shortlist.events import Event, event_hooks
from shortlist.types import Candidate, Query


def test_embeddings_match_the_library_model(server_factory: Any) -> None:
    with server_factory() as srv, srv.client() as c:
        r = c.post("/v1/embeddings", json={"input": ["book a flight", "weather in Paris"], "model": "x"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "list" and body["model"] == "x" and [d["index"] for d in body["data"]] == [0, 1]
        got = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
        want = default_embedder().embed(["book a flight", "weather in Paris"])
        assert got.shape == (2, 384) and np.allclose(got, want, atol=1e-6)
        b64 = c.post("/v1/embeddings", json={"input": "book a flight", "encoding_format": "base64"}).json()
        vec = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
        assert np.allclose(vec, want[0], atol=1e-6)
        assert c.post("/v1/embeddings", json={"input": []}).status_code == 422


def test_embeddings_text_count_limit_is_413(server_factory: Any) -> None:
    with server_factory(max_texts=2) as srv, srv.client() as c:
        r = c.post("/v1/embeddings", json={"input": ["a", "b", "c"]})
        assert r.status_code == 413 and "at most 2" in r.json()["error"]["message"]


def test_rerank_cohere_shape(server_factory: Any) -> None:
    docs = ["Paris weather forecast for tomorrow", "Invoice for ACME corp", {"text": "Rain expected in Lyon"}]
    with server_factory() as srv, srv.client() as c:
        r = c.post(
            "/v1/rerank", json={"query": "will it rain", "documents": docs, "top_n": 2, "return_documents": True}
        )
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert len(results) == 2 and {x["index"] for x in results} <= {0, 2}
        assert results[0]["relevance_score"] >= results[1]["relevance_score"]
        assert results[0]["document"]["text"] in ("Paris weather forecast for tomorrow", "Rain expected in Lyon")


@pytest.mark.parametrize("protocol", ["default", "cohere"])
def test_rerank_endpoint_is_consumed_by_rerank_ranker(server_factory: Any, protocol: str) -> None:
    rerank = pytest.importorskip("shortlist.rankers.rerank", reason="the rerank ranker is not in this build")
    candidates = [
        Candidate("get_weather", description="Get the weather forecast for a city"),
        Candidate("send_email", description="Send an email message"),
        Candidate("create_invoice", description="Create an invoice for a customer"),
        Candidate("book_flight", description="Book a plane ticket to a destination"),
    ]
    events: list[Event] = []
    with server_factory() as srv:
        ranker = rerank.RerankRanker(url=f"{srv.url}/v1/rerank", protocol=protocol, first_stage="bm25", top_k=2)
        documents = [f"{c.name}: {c.description}" for c in candidates]
        pairs = ranker.remote("I need a plane ticket to Rome", documents, 2)
        assert pairs[0][0] == 3 and len(pairs) == 2
        with event_hooks(events.append):
            sel = ranker.select(Query("I need a plane ticket to Rome", k=2), candidates)
        ranker.close()
    assert not [e for e in events if e.name == "rankers.rerank_fallback"], events
    assert sel.selected[0] == "book_flight"
