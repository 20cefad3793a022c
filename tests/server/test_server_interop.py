"""Interop endpoints over real HTTP: the OpenAI/Voyage/Cohere/TEI shapes, their errors, limits and keys.

The real client libraries are exercised against a real ``shortlist serve`` in test_compat_clients.py;
these tests pin the wire shapes and the edge cases (bad input, limits, keys) with plain httpx.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from shortlist._events import Event, event_hooks
from shortlist._tokens import TiktokenCounter
from shortlist._types import Candidate, Query
from shortlist.embeddings._default import default_embedder
from shortlist.server import ServerSettings

MODEL = "all-MiniLM-L6-v2"
MAX_INPUTS = 2048


def _cl100k(text: str) -> list[int]:
    enc = TiktokenCounter("cl100k_base").load()._enc
    return list(enc.encode_ordinary(text))


def test_embeddings_match_the_library_model(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/embeddings", json={"input": ["book a flight", "weather in Paris"], "model": MODEL})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "list" and body["model"] == MODEL and [d["index"] for d in body["data"]] == [0, 1]
        got = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
        want = default_embedder().embed(["book a flight", "weather in Paris"])
        assert got.shape == (2, 384) and np.allclose(got, want, atol=1e-6)
        tokens = len(_cl100k("book a flight")) + len(_cl100k("weather in Paris"))
        assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
        b64 = c.post("/v1/embeddings", json={"input": "book a flight", "encoding_format": "base64"}).json()
        vec = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
        assert np.allclose(vec, want[0], atol=1e-6) and b64["model"] == MODEL


def test_token_array_inputs_are_decoded_with_cl100k(app_factory: Any) -> None:
    texts = ["book a flight to Rome", "météo à Paris <b>&</b>"]
    ids = [_cl100k(t) for t in texts]
    want = default_embedder().embed(texts)
    with app_factory() as srv, srv.client() as c:
        many = c.post("/v1/embeddings", json={"input": ids, "model": MODEL})
        assert many.status_code == 200, many.text
        got = np.array([d["embedding"] for d in many.json()["data"]], dtype=np.float32)
        assert np.allclose(got, want, atol=1e-6)
        assert many.json()["usage"]["prompt_tokens"] == len(ids[0]) + len(ids[1])
        one = c.post("/v1/embeddings", json={"input": ids[0]}).json()
        assert len(one["data"]) == 1 and np.allclose(one["data"][0]["embedding"], want[0], atol=1e-6)
        floats = c.post("/v1/embeddings", json={"input": [[float(t) for t in ids[0]]]}).json()  # JSON's 3.0 is 3
        assert np.allclose(floats["data"][0]["embedding"], want[0], atol=1e-6)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "input must hold at least one text or token array"),
        (["a", 3], "input[1] is int: a list of texts must hold only strings"),
        ([[1, 2], [3, "x"]], "input[1][1] is str: token ids are integers"),
        ([[1, 2], []], "input[1] is an empty token array"),
        ([1, 2, [3]], "input[2] is list: a token array must hold only integers"),
        ([[1], 2], "input[1] is int: a list of token arrays must hold only lists"),
        ([True], "input[0] is bool"),
        ({"text": "a"}, "input must be a string, a list of strings, a list of token ids"),
        (["a"] * 2049, "input holds 2049 items; at most 2048 inputs per request"),
    ],
)
def test_bad_input_names_the_actual_problem(app_factory: Any, value: Any, message: str) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/embeddings", json={"input": value})
        assert r.status_code == 422, r.text
        assert message in r.json()["error"]["message"]
        assert "str_type" not in r.text and "union" not in r.text.lower()


def test_token_ids_outside_cl100k_are_refused_by_position(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        for ids, where in (([[5, 10_000_000]], "input[0][1] = 10000000"), ([7, 100257], "input[1] = 100257")):
            r = c.post("/v1/embeddings", json={"input": ids})
            assert r.status_code == 422, r.text
            assert f"{where} is not an ordinary cl100k_base token id (0..100255)" in r.json()["error"]["message"]
        # one token array is one input, however long (the model cuts it at its own length)
        ids = _cl100k("hello world " * 1500)
        long = c.post("/v1/embeddings", json={"input": ids})
        assert long.status_code == 200 and len(long.json()["data"]) == 1
        assert long.json()["usage"]["prompt_tokens"] == len(ids) > MAX_INPUTS


def test_unknown_model_and_impossible_dimensions_have_openai_error_shapes(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/embeddings", json={"input": "x", "model": "text-embedding-3-small"})
        assert r.status_code == 404
        err = r.json()["error"]
        assert err["code"] == "model_not_found" and err["type"] == "invalid_request_error" and err["param"] == "model"
        assert "text-embedding-3-small" in err["message"] and MODEL in err["message"]
        for field in ("dimensions", "output_dimension"):
            bad = c.post("/v1/embeddings", json={"input": "x", field: 256})
            assert bad.status_code == 400, bad.text
            assert bad.json()["error"]["param"] == field and "384" in bad.json()["error"]["message"]
            assert c.post("/v1/embeddings", json={"input": "x", field: 384}).status_code == 200
        # a Hugging Face id of the same model is the same model
        assert (
            c.post("/v1/embeddings", json={"input": "x", "model": f"sentence-transformers/{MODEL}"}).status_code == 200
        )


def test_models_routes(app_factory: Any) -> None:
    with app_factory(embed_model="minilm") as srv, srv.client() as c:
        listed = c.get("/v1/models").json()
        assert listed["object"] == "list" and listed["data"][0]["id"] == "minilm"
        assert {m["dimensions"] for m in listed["data"]} == {384}
        assert c.get("/v1/models/minilm").json() == {
            "id": "minilm",
            "object": "model",
            "created": 0,
            "owned_by": "shortlist",
            "dimensions": 384,
        }
        missing = c.get("/v1/models/gpt-4o")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
        assert c.post("/v1/embeddings", json={"input": "x", "model": MODEL}).status_code == 404


def test_voyage_dtypes_and_quantised_encodings(app_factory: Any) -> None:
    want = default_embedder().embed(["quantise me"])[0]
    with app_factory() as srv, srv.client() as c:

        def embedding(**fields: Any) -> Any:
            r = c.post("/v1/embeddings", json={"input": ["quantise me"], **fields})
            assert r.status_code == 200, r.text
            return r.json()["data"][0]["embedding"]

        int8 = np.array(embedding(output_dtype="int8"))
        assert int8.dtype.kind == "i" and np.abs(int8 - want * 127).max() <= 0.5 + 1e-3
        raw = np.frombuffer(base64.b64decode(embedding(output_dtype="int8", encoding_format="base64")), np.int8)
        assert np.array_equal(raw, int8)
        ubinary = np.array(embedding(output_dtype="ubinary"), dtype=np.uint8)
        assert np.array_equal(np.unpackbits(ubinary), (want > 0).astype(np.uint8)) and len(ubinary) == 48
        assert np.array_equal(np.array(embedding(output_dtype="binary")), ubinary.astype(int) - 128)
        uint8 = np.array(embedding(output_dtype="uint8"))
        assert uint8.min() >= 0 and uint8.max() <= 255


def test_embeddings_text_count_limit_is_413(app_factory: Any) -> None:
    with app_factory(max_texts=2) as srv, srv.client() as c:
        r = c.post("/v1/embeddings", json={"input": ["a", "b", "c"]})
        assert r.status_code == 413 and "at most 2" in r.json()["error"]["message"]
        assert c.post("/v1/embed", json={"texts": ["a", "b", "c"]}).status_code == 413
        assert c.post("/embed", json={"inputs": ["a", "b", "c"]}).status_code == 413
        assert c.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]}).status_code == 413


def test_the_default_limit_takes_2048_inputs() -> None:
    assert ServerSettings().max_texts == 2048


def test_rerank_body_serves_cohere_jina_and_voyage(app_factory: Any) -> None:
    docs = ["Paris weather forecast for tomorrow", "Invoice for ACME corp", {"text": "Rain expected in Lyon"}]
    with app_factory() as srv, srv.client() as c:
        for path in ("/v1/rerank", "/v2/rerank"):
            r = c.post(path, json={"query": "will it rain", "documents": docs, "top_n": 2, "return_documents": True})
            assert r.status_code == 200, r.text
            body = r.json()
            results, data = body["results"], body["data"]
            assert len(results) == 2 and {x["index"] for x in results} == {0, 2}
            assert results[0]["relevance_score"] >= results[1]["relevance_score"]
            assert [x["index"] for x in data] == [x["index"] for x in results]
            assert data[0]["document"] == results[0]["document"]["text"]
            assert body["usage"]["total_tokens"] > 0 and body["model"] == MODEL
            assert body["meta"]["api_version"]["version"] == path[2]
        voyage = c.post("/v1/rerank", json={"query": "q", "documents": ["a", "b", "c"], "top_k": 1}).json()
        assert len(voyage["data"]) == 1 and "document" not in voyage["data"][0]
        assert c.post("/v1/rerank", json={"query": "q", "documents": ["a"], "model": "rerank-v3.5"}).status_code == 404


def test_cohere_embed_shapes(app_factory: Any) -> None:
    want = default_embedder().embed(["alpha", "beta"])
    with app_factory() as srv, srv.client() as c:
        v1 = c.post("/v1/embed", json={"texts": ["alpha", "beta"], "input_type": "search_document"}).json()
        assert v1["response_type"] == "embeddings_floats" and v1["texts"] == ["alpha", "beta"]
        assert np.allclose(np.array(v1["embeddings"]), want, atol=1e-6)
        assert v1["meta"]["billed_units"]["input_tokens"] == len(_cl100k("alpha")) + len(_cl100k("beta"))
        typed = c.post("/v1/embed", json={"texts": ["alpha", "beta"], "embedding_types": ["float", "base64"]}).json()
        assert typed["response_type"] == "embeddings_by_type" and set(typed["embeddings"]) == {"float", "base64"}
        vec = np.frombuffer(base64.b64decode(typed["embeddings"]["base64"][1]), "<f4")
        assert np.allclose(vec, want[1], atol=1e-6)
        v2 = c.post(
            "/v2/embed",
            json={"inputs": [{"content": [{"type": "text", "text": "alpha"}]}], "model": MODEL},
        ).json()
        assert v2["response_type"] == "embeddings_by_type"
        assert np.allclose(v2["embeddings"]["float"][0], want[0], atol=1e-6)
        image = c.post("/v2/embed", json={"inputs": [{"content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})
        assert image.status_code == 422 and "content.0.type" in image.json()["error"]["message"]
        assert c.post("/v1/embed", json={"texts": ["a"], "images": ["data:image/png;base64,AA=="]}).status_code == 422
        empty = c.post("/v2/embed", json={}).json()
        assert empty["embeddings"] == {"float": []} and empty["texts"] == []
        assert c.post("/v2/embed", json={"texts": ["a"], "model": "embed-english-v3.0"}).status_code == 404


def test_tei_shapes(app_factory: Any) -> None:
    want = default_embedder().embed(["hello"])
    with app_factory() as srv, srv.client() as c:
        info = c.get("/info").json()
        assert info["model_id"] == MODEL and info["model_type"] == {"embedding": {"pooling": "mean"}}
        assert info["max_client_batch_size"] == 2048
        assert "reranker" in c.get("/tei/reranker/info").json()["model_type"]
        embedded = c.post("/embed", json={"inputs": "hello"}).json()
        assert np.allclose(np.array(embedded), want, atol=1e-6)
        for path in ("/rerank", "/tei/reranker/rerank"):
            ranks = c.post(path, json={"query": "rain", "texts": ["sun", "rain today"], "return_text": True}).json()
            assert [r["index"] for r in ranks] == [1, 0] and ranks[0]["text"] == "rain today"
            assert ranks[0]["score"] > ranks[1]["score"]
        ids = c.post("/embed", json={"inputs": [101, 7592]})
        assert ids.status_code == 422 and "token ids" in ids.json()["error"]["message"]
        prompt = c.post("/embed", json={"inputs": "x", "prompt_name": "query"})
        assert prompt.status_code == 422 and "Available prompts" in prompt.json()["error"]["message"]


def test_json_without_content_type_is_read_and_other_types_refused(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        bare = c.post("/v1/embeddings", content=b'{"input": ["hello"]}')
        assert "content-type" not in bare.request.headers
        assert bare.status_code == 200, bare.text
        text = c.post("/v1/embeddings", content=b'{"input": ["hello"]}', headers={"Content-Type": "text/plain"})
        assert text.status_code == 422


def test_compat_routes_need_the_api_key(app_factory: Any) -> None:
    settings = {"api_keys": ServerSettings.build(env={"SHORTLIST_API_KEYS": "k1"}).api_keys}
    with app_factory(**settings) as srv:
        routes = [
            ("POST", "/v1/embeddings", {"input": "x"}),
            ("GET", "/v1/models", None),
            ("POST", "/v1/rerank", {"query": "q", "documents": ["a"]}),
            ("POST", "/v2/rerank", {"query": "q", "documents": ["a"]}),
            ("POST", "/v1/embed", {"texts": ["a"]}),
            ("POST", "/v2/embed", {"texts": ["a"]}),
            ("GET", "/info", None),
            ("POST", "/embed", {"inputs": "a"}),
            ("POST", "/rerank", {"query": "q", "texts": ["a"]}),
        ]
        with srv.client() as anonymous, srv.client("wrong") as wrong, srv.client("k1") as good:
            for method, path, body in routes:
                assert anonymous.request(method, path, json=body).status_code == 401, path
                assert wrong.request(method, path, json=body).status_code == 401, path
                assert good.request(method, path, json=body).status_code == 200, path


# TEI's body has no top_n (the ranker sends none): it answers every text and the ranker cuts to k
@pytest.mark.parametrize(
    ("protocol", "path", "answered"),
    [("default", "/v1/rerank", 2), ("cohere", "/v2/rerank", 2), ("voyage", "/v1/rerank", 2), ("tei", "/rerank", 4)],
)
def test_rerank_endpoint_is_consumed_by_rerank_ranker(
    server_factory: Any, protocol: str, path: str, answered: int
) -> None:
    rerank = pytest.importorskip("shortlist.rankers._rerank", reason="the rerank ranker is not in this build")
    candidates = [
        Candidate("get_weather", description="Get the weather forecast for a city"),
        Candidate("send_email", description="Send an email message"),
        Candidate("create_invoice", description="Create an invoice for a customer"),
        Candidate("book_flight", description="Book a plane ticket to a destination"),
    ]
    events: list[Event] = []
    with server_factory() as srv:
        ranker = rerank.RerankRanker(url=f"{srv.url}{path}", protocol=protocol, first_stage="bm25", top_k=2)
        documents = [f"{c.name}: {c.description}" for c in candidates]
        pairs = ranker.remote("I need a plane ticket to Rome", documents, 2)
        assert pairs[0][0] == 3 and len(pairs) == answered
        with event_hooks(events.append):
            sel = ranker.select(Query("I need a plane ticket to Rome", k=2), candidates)
        ranker.close()
    assert not [e for e in events if e.name == "rankers.rerank_fallback"], events
    assert sel.selected[0] == "book_flight"
