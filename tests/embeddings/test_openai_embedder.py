"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import pytest

from loopback import http_thread
from shortlist._config_sections import CredentialConfig, EmbeddingProviderConfig
from shortlist._events import Event, event_hooks
from shortlist.embeddings._cache import CachingEmbedder
from shortlist.embeddings._default import DefaultEmbedder
from shortlist.embeddings._factory import build_embedder
from shortlist.embeddings._openai import EmbeddingRetry, OpenAIEmbedder
from shortlist.errors import ConfigError, EmbeddingError

Reply = tuple[int, Any] | Callable[[dict[str, Any]], tuple[int, Any]]


class Server:
    """Answers POSTs from a script of replies (the last one repeats) and records the requests."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []


def vectors_for(body: dict[str, Any]) -> tuple[int, Any]:
    data = [
        {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, float(i)]}
        for i, t in enumerate(body["input"])
    ]
    return 200, {"object": "list", "data": list(reversed(data)), "model": body["model"]}


@contextmanager
def serve(replies: list[Reply]) -> Iterator[tuple[str, Server]]:
    state = Server(replies)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append((body, dict(self.headers)))
            reply = state.replies[min(len(state.requests) - 1, len(state.replies) - 1)]
            status, payload = reply(body) if callable(reply) else reply
            if status == 0:  # sleep past the client's timeout
                time.sleep(payload)
                status, payload = vectors_for(body)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    with http_thread(Handler, quiet=True) as server:  # quiet: the client hangs up in the timeout test
        yield f"{server.url}/v1", state


@pytest.mark.slow  # a loopback HTTP server
def test_batches_orders_by_index_and_normalises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EMB_KEY", "sk-test")
    with serve([vectors_for]) as (url, state):
        emb = OpenAIEmbedder(model="m1", base_url=url, api_key_env="TEST_EMB_KEY", batch_size=2)
        out = emb.embed(["a", "bbb", "cc", "dddd", "e"])
    assert out.shape == (5, 3)
    assert [len(body["input"]) for body, _ in state.requests] == [2, 2, 1]
    assert state.requests[0][0] == {"model": "m1", "input": ["a", "bbb"]}
    assert state.requests[0][1]["Authorization"] == "Bearer sk-test"
    raw = np.array([[1, 1, 0], [3, 1, 1], [2, 1, 0], [4, 1, 1], [1, 1, 0]], dtype=np.float32)
    np.testing.assert_allclose(out, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)


@pytest.mark.slow  # a loopback HTTP server
def test_retries_a_500_then_succeeds() -> None:
    events: list[Event] = []
    with serve([(500, {"error": "boom"}), vectors_for]) as (url, state), event_hooks(events.append):
        emb = OpenAIEmbedder(model="m", base_url=url, api_key_env=None, backoff_s=0.01)
        out = emb.embed(["hello"])
    assert out.shape == (1, 3) and len(state.requests) == 2
    assert "Authorization" not in state.requests[0][1]
    assert [type(e) for e in events] == [EmbeddingRetry]


@pytest.mark.slow  # a loopback HTTP server
def test_retries_429s_until_success() -> None:
    with serve([(429, {"error": "slow down"}), (429, {}), vectors_for]) as (url, state):
        emb = OpenAIEmbedder(model="m", base_url=url, backoff_s=0.01)
        assert emb.embed(["x", "y"]).shape == (2, 3)
    assert len(state.requests) == 3


@pytest.mark.slow  # a loopback HTTP server
def test_gives_up_after_max_retries() -> None:
    with serve([(503, {"error": "down"})]) as (url, state):
        emb = OpenAIEmbedder(model="m", base_url=url, max_retries=2, backoff_s=0.01)
        with pytest.raises(EmbeddingError, match="3 attempts"):
            emb.embed(["x"])
    assert len(state.requests) == 3


@pytest.mark.slow  # a loopback HTTP server
def test_client_errors_are_not_retried() -> None:
    with serve([(401, {"error": "bad key"})]) as (url, state), pytest.raises(EmbeddingError, match="HTTP 401"):
        OpenAIEmbedder(model="m", base_url=url, backoff_s=0.01).embed(["x"])
    assert len(state.requests) == 1


@pytest.mark.slow  # a loopback HTTP server
def test_timeout_is_an_embedding_error() -> None:
    with serve([(0, 1.0)]) as (url, _):
        emb = OpenAIEmbedder(model="m", base_url=url, timeout_s=0.2, max_retries=0)
        with pytest.raises(EmbeddingError, match="failed after 1 attempts"):
            emb.embed(["x"])


@pytest.mark.slow  # a loopback HTTP server
def test_connection_refused_is_an_embedding_error() -> None:
    with serve([vectors_for]) as (url, _):
        pass  # the server is gone: the port refuses connections
    emb = OpenAIEmbedder(model="m", base_url=url, max_retries=1, backoff_s=0.01)
    with pytest.raises(EmbeddingError):
        emb.embed(["x"])


@pytest.mark.slow  # a loopback HTTP server
def test_wrong_count_and_garbage_are_errors() -> None:
    with serve([(200, {"data": [{"index": 0, "embedding": [1, 2]}]}), (200, {"nope": 1})]) as (url, _):
        emb = OpenAIEmbedder(model="m", base_url=url)
        with pytest.raises(EmbeddingError, match="asked for 2"):
            emb.embed(["x", "y"])
        with pytest.raises(EmbeddingError, match="unexpected response"):
            emb.embed(["x"])


@pytest.mark.slow  # a loopback HTTP server
async def test_async_twin_batches_and_retries() -> None:
    with serve([(502, {}), vectors_for]) as (url, state):
        emb = OpenAIEmbedder(model="m", base_url=url, batch_size=3, backoff_s=0.01)
        out = await emb.aembed(["a", "b", "c", "d"])
    assert out.shape == (4, 3)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert [len(b["input"]) for b, _ in state.requests] == [3, 3, 1]


@pytest.mark.slow  # a loopback HTTP server
def test_factory_builds_each_type(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(build_embedder(EmbeddingProviderConfig(type="default")), DefaultEmbedder)
    with serve([vectors_for]) as (url, state):
        cfg = EmbeddingProviderConfig(
            type="ollama", model="nomic-embed-text", base_url=url, credential=CredentialConfig(credential_env="K")
        )
        monkeypatch.setenv("K", "secret")
        emb = build_embedder(cfg)  # through the persistent cache (on by default), keyed by URL and model
        assert isinstance(emb, CachingEmbedder) and isinstance(emb.inner, OpenAIEmbedder)
        assert emb.model_identity == f"{url}/embeddings|nomic-embed-text|"
        assert emb.embed(["hi"]).shape == (1, 3)
    assert state.requests[0][1]["Authorization"] == "Bearer secret"
    voyage = build_embedder(
        EmbeddingProviderConfig(type="voyageai", model="voyage-3", additional_config={"vector_cache": "off"})
    )
    assert isinstance(voyage, OpenAIEmbedder) and voyage.url == "https://api.voyageai.com/v1/embeddings"


def test_factory_errors_say_what_to_set() -> None:
    with pytest.raises(ConfigError, match="needs 'model'"):
        build_embedder(EmbeddingProviderConfig(type="openai"))
    with pytest.raises(ConfigError, match="base_url"):
        build_embedder(EmbeddingProviderConfig(type="openai", model="m", base_url="localhost:8080"))
    with pytest.raises(ConfigError, match="remove model"):
        build_embedder(EmbeddingProviderConfig(type="default", model="bge-large"))
    with pytest.raises(ConfigError, match="unknown additional_config"):
        build_embedder(EmbeddingProviderConfig(type="default", additional_config={"gpu": True}))
