"""No paid model calls in tests: every HTTP-backed model, embedder and ranker refuses non-local hosts."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest

from shortlist import _model_guard as model_guard
from shortlist import testing
from shortlist._model_guard import allow_model_requests, block_model_requests, check_model_request, is_loopback_url
from shortlist.embeddings._openai import OpenAIEmbedder
from shortlist.errors import EmbeddingError, ModelRequestBlocked
from shortlist.rankers._rerank import RerankRanker
from shortlist.runtime._model import OpenAIChatModel

SRC = Path(__file__).resolve().parents[1] / "src" / "shortlist"
PAID = "https://api.openai.com/v1"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.9.8.7/x", True),
        ("http://[::1]:9000/", True),
        ("http://localhost:1/", True),
        ("http://LOCALHOST./", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.1/", False),
        ("http://127.0.0.1.nip.io/", False),
        ("not a url", False),
    ],
)
def test_loopback_hosts(url: str, local: bool) -> None:
    assert is_loopback_url(url) is local


def test_blocked_inside_pytest_and_lifted_deliberately() -> None:
    assert model_guard.model_requests_blocked()
    with pytest.raises(ModelRequestBlocked, match=r"api\.openai\.com"):
        check_model_request(PAID, who="t")
    check_model_request("http://127.0.0.1:1/", who="t")
    with allow_model_requests():
        check_model_request(PAID, who="t")
        with block_model_requests(), pytest.raises(ModelRequestBlocked):
            check_model_request(PAID, who="t")


def test_the_chat_model_refuses_a_remote_endpoint() -> None:
    async def go() -> None:
        model = OpenAIChatModel("gpt", base_url=PAID, api_key_env=None)
        try:
            with pytest.raises(ModelRequestBlocked):
                await model.acomplete({"messages": []})
        finally:
            await model.aclose()

    asyncio.run(go())


def test_the_embedder_refuses_a_remote_endpoint_sync_and_async() -> None:
    emb = OpenAIEmbedder(model="m", base_url=PAID, api_key_env=None, max_retries=0)
    with pytest.raises(EmbeddingError) as err:  # the embedder contract wraps every failure
        emb.embed(["x"])
    assert isinstance(err.value.__cause__, ModelRequestBlocked)
    with pytest.raises(ModelRequestBlocked):
        asyncio.run(emb.aembed(["x"]))


def test_a_mock_transport_is_not_the_network() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    emb = OpenAIEmbedder(model="m", base_url=PAID, api_key_env=None, transport=httpx.MockTransport(answer))
    assert np.asarray(emb.embed(["x"])).shape == (1, 2)


def test_the_reranker_refuses_a_remote_endpoint() -> None:
    ranker = RerankRanker(url="https://api.cohere.com/v2/rerank", first_stage="bm25")
    with pytest.raises(ModelRequestBlocked):
        ranker.remote("q", ["a", "b"], 1)


def test_testing_reexports_the_guard() -> None:
    for name in ("allow_model_requests", "block_model_requests"):
        assert getattr(testing, name) is getattr(model_guard, name)


def test_the_guards_other_names_left_testing_with_a_warning() -> None:
    for name in ("is_test_double", "model_requests_blocked"):
        with pytest.warns(DeprecationWarning, match=rf"shortlist.testing.{name} is deprecated"):
            assert getattr(testing, name) is getattr(model_guard, name)


def test_production_code_does_not_import_shortlist_testing() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "testing.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if "shortlist.testing" in names:
                offenders.append(str(path))
    assert offenders == []
