"""The real client libraries against a real ``shortlist serve`` on loopback, as a user switching would point them.

One ``shortlist serve`` process (with an API key) serves the module. Every test runs behind
:mod:`network_guard`, so a client that tried to reach anything beyond loopback (a tokenizer
download, a cost map, a model hub) fails. Each client library is skipped when it is not installed
(they are in the ``dev`` extra). The shapes and edge cases are in test_server_interop.py.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import network_guard
import numpy as np
import pytest
from serve_process import ServeProcess, serve_process

from loopback import starts_processes
from shortlist._tokens import TiktokenCounter
from shortlist.embeddings._default import default_embedder

pytestmark = pytest.mark.slow  # a shortlist serve process

KEY = "compat-key"
MODEL = "all-MiniLM-L6-v2"
TEXTS = ["book a flight to Rome", "weather in Paris"]
QUERY = "will it rain in Paris"
DOCUMENTS = ["Sunny and warm all week", "Heavy rain expected in Paris tomorrow", "Invoice #42 for ACME corp"]
RAIN = 1  # the index of the relevant document
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@pytest.fixture(scope="module")
@starts_processes
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    env = {**os.environ, "SHORTLIST_API_KEYS": KEY}
    with serve_process(tmp_path_factory.mktemp("compat"), env=env) as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_network() -> Iterator[None]:
    network_guard.ATTEMPTS.clear()
    restore = network_guard.install()
    try:
        yield
    finally:
        restore()
    assert not network_guard.ATTEMPTS, f"a client tried to leave loopback: {network_guard.ATTEMPTS}"


@pytest.fixture(scope="module")
def want() -> Any:
    return default_embedder().embed(TEXTS)


def _routes_hit(srv: ServeProcess) -> dict[str, float]:
    text = httpx.get(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
    hits: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("shortlist_http_request_duration_seconds_count{"):
            route = line.split('route="', 1)[1].split('"', 1)[0]
            hits[route] = hits.get(route, 0.0) + float(line.rsplit(" ", 1)[1])
    return hits


def _assert_rain_first(indexes: list[int]) -> None:
    assert indexes[0] == RAIN, indexes


# --- OpenAI ---------------------------------------------------------------------------------------


def test_openai_sdk_base64_default_and_float(server: ServeProcess, want: Any) -> None:
    openai = pytest.importorskip("openai")
    seen: list[dict[str, Any]] = []
    hooks = {"request": [lambda request: seen.append(json.loads(request.content or b"{}"))]}
    with (
        httpx.Client(event_hooks=hooks) as http,
        openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, http_client=http) as client,
    ):
        default = client.embeddings.create(model=MODEL, input=TEXTS)
        assert seen[-1]["encoding_format"] == "base64"  # the SDK's default, decoded by the SDK
        assert np.allclose(np.array([d.embedding for d in default.data]), want, atol=1e-6)
        floats = client.embeddings.create(model=MODEL, input=TEXTS[0], encoding_format="float")
        assert np.allclose(floats.data[0].embedding, want[0], atol=1e-6)
        assert floats.usage.prompt_tokens == floats.usage.total_tokens == TiktokenCounter("cl100k_base").count(TEXTS[0])
        assert next(m.id for m in client.models.list()) == MODEL
        assert client.models.retrieve(MODEL).id == MODEL
        with pytest.raises(openai.NotFoundError, match="does not exist on this server"):
            client.embeddings.create(model="text-embedding-3-small", input="x")
        with pytest.raises(openai.BadRequestError, match="384-dimensional"):
            client.embeddings.create(model=MODEL, input="x", dimensions=256)
    with (
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0) as bad,
        pytest.raises(openai.AuthenticationError),
    ):
        bad.embeddings.create(model=MODEL, input="x")


def test_langchain_openai_embeddings_with_its_defaults(
    server: ServeProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lc = pytest.importorskip("langchain_openai")
    # tiktoken downloads cl100k_base into TIKTOKEN_CACHE_DIR under sha1(url): seed it from bpe-openai
    spec = importlib.util.find_spec("bpe_openai")
    assert spec is not None and spec.submodule_search_locations
    bpe = Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz"
    (tmp_path / hashlib.sha1(_CL100K_URL.encode()).hexdigest()).write_bytes(gzip.decompress(bpe.read_bytes()))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    seen: list[dict[str, Any]] = []
    hooks = {"request": [lambda request: seen.append(json.loads(request.content))]}
    # more texts than the old 256 cap, in one request (chunk_size 1000 is the default)
    texts = [f"ticket {i}: printer {i % 7} is out of toner" for i in range(300)]
    with httpx.Client(event_hooks=hooks) as http:
        embeddings = lc.OpenAIEmbeddings(model=MODEL, base_url=f"{server.url}/v1", api_key=KEY, http_client=http)
        vectors = embeddings.embed_documents(texts)
        query = embeddings.embed_query(texts[3])
    assert len(seen) == 2 and len(seen[0]["input"]) == 300
    assert all(isinstance(ids, list) and all(isinstance(t, int) for t in ids) for ids in seen[0]["input"])
    got = np.array(vectors)
    assert got.shape == (300, 384)
    assert np.allclose(got[[0, 3, 299]], default_embedder().embed([texts[0], texts[3], texts[299]]), atol=1e-5)
    assert np.allclose(query, got[3], atol=1e-6)


# --- Cohere ---------------------------------------------------------------------------------------


@pytest.fixture
def cohere_http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as http:
        yield http


def test_cohere_client_v1(server: ServeProcess, want: Any, cohere_http: httpx.Client) -> None:
    cohere = pytest.importorskip("cohere")
    client = cohere.Client(api_key=KEY, base_url=server.url, httpx_client=cohere_http)
    embedded = client.embed(texts=TEXTS, model=MODEL, input_type="search_document")
    assert embedded.response_type == "embeddings_floats"
    assert np.allclose(np.array(embedded.embeddings), want, atol=1e-6)
    ranked = client.rerank(query=QUERY, documents=DOCUMENTS, model=MODEL, top_n=2, return_documents=True)
    _assert_rain_first([r.index for r in ranked.results])
    assert ranked.results[0].document.text == DOCUMENTS[RAIN]
    with pytest.raises(cohere.errors.NotFoundError):
        client.embed(texts=["x"], model="embed-english-v3.0", input_type="search_query")


# cohere 7.3's merge of batched by-type responses uses pydantic APIs deprecated in 2.x (its own code)
@pytest.mark.filterwarnings("ignore:Accessing the 'model_fields' attribute on the instance:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:The `parse_obj` method is deprecated:DeprecationWarning")
def test_cohere_client_v1_embedding_types(server: ServeProcess, want: Any, cohere_http: httpx.Client) -> None:
    cohere = pytest.importorskip("cohere")
    client = cohere.Client(api_key=KEY, base_url=server.url, httpx_client=cohere_http)
    typed = client.embed(texts=TEXTS, model=MODEL, input_type="search_document", embedding_types=["float", "int8"])
    assert typed.response_type == "embeddings_by_type"
    assert np.allclose(np.array(typed.embeddings.float_), want, atol=1e-6)
    assert np.abs(np.array(typed.embeddings.int8) - want * 127).max() <= 0.5 + 1e-3


def test_cohere_client_v2(server: ServeProcess, want: Any, cohere_http: httpx.Client) -> None:
    cohere = pytest.importorskip("cohere")
    client = cohere.ClientV2(api_key=KEY, base_url=server.url, httpx_client=cohere_http)
    embedded = client.embed(texts=TEXTS, model=MODEL, input_type="search_document", embedding_types=["float"])
    assert np.allclose(np.array(embedded.embeddings.float_), want, atol=1e-6)
    ranked = client.rerank(query=QUERY, documents=DOCUMENTS, model=MODEL, top_n=2)
    _assert_rain_first([r.index for r in ranked.results])
    assert len(ranked.results) == 2
    assert _routes_hit(server).get("/v2/rerank", 0) >= 1


# --- Voyage ---------------------------------------------------------------------------------------


def test_voyageai_client(server: ServeProcess, want: Any) -> None:
    voyageai = pytest.importorskip("voyageai")
    client = voyageai.Client(api_key=KEY, base_url=f"{server.url}/v1", max_retries=0)
    embedded = client.embed(TEXTS, model=MODEL, input_type="document")  # base64 under the hood
    assert np.allclose(np.array(embedded.embeddings), want, atol=1e-6) and embedded.total_tokens > 0
    quantised = client.embed(TEXTS, model=MODEL, output_dtype="int8")
    assert np.abs(np.array(quantised.embeddings) - want * 127).max() <= 0.5 + 1e-3
    ranked = client.rerank(QUERY, DOCUMENTS, model=MODEL, top_k=2)  # reads data[]
    _assert_rain_first([r.index for r in ranked.results])
    assert ranked.results[0].document == DOCUMENTS[RAIN] and ranked.total_tokens > 0


# --- Text Embeddings Inference ----------------------------------------------------------------------


def test_tei_client(server: ServeProcess, want: Any) -> None:
    tei_client = pytest.importorskip("tei_client")
    headers = {"Authorization": f"Bearer {KEY}"}
    embedder = tei_client.HttpClient(server.url, headers=headers)
    reranker = tei_client.HttpClient(f"{server.url}/tei/reranker", headers=headers)
    try:
        assert embedder.health() and embedder.info().server_model_id == MODEL
        assert np.allclose(np.array(embedder.embed(TEXTS)), want, atol=1e-6)
        ranked = reranker.rerank(QUERY, DOCUMENTS, return_text=True)
        _assert_rain_first([r.index for r in ranked.ranks])
        assert ranked.ranks[0].text == DOCUMENTS[RAIN]
    finally:
        for client in (embedder, reranker):
            client.client.close()
            asyncio.run(client.async_client.aclose())


# --- LiteLLM ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
@starts_processes
def litellm_report(server: ServeProcess) -> dict[str, Any]:
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("litellm is not installed (it is in the dev extra)")
    driver = Path(__file__).with_name("litellm_driver.py")
    done = subprocess.run(
        [sys.executable, str(driver), server.url, KEY, MODEL],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=driver.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


# LiteLLM's huggingface/ provider fetches huggingface.co/<model>/raw/main/config.json to price every
# call (a hard-coded URL); the guard refuses it and LiteLLM goes on. Any other attempt fails the test.
@pytest.mark.parametrize(
    ("provider", "may_try"),
    [
        ("openai/", set()),
        ("cohere/", set()),
        ("jina_ai/", set()),
        ("voyage/", set()),
        ("huggingface/", {"huggingface.co"}),
    ],
)
def test_litellm_embedding_providers(
    litellm_report: dict[str, Any], provider: str, may_try: set[str], want: Any
) -> None:
    outcome = litellm_report["embedding"][provider]
    assert outcome["ok"], outcome
    assert np.allclose(np.array(outcome["vectors"]), want, atol=1e-6)
    assert set(outcome["refused"]) <= may_try


@pytest.mark.parametrize("provider", ["cohere/", "jina_ai/", "voyage/", "huggingface/"])
def test_litellm_rerank_providers(litellm_report: dict[str, Any], provider: str) -> None:
    outcome = litellm_report["rerank"][provider]
    assert outcome["ok"], outcome
    assert len(outcome["results"]) == 2 and outcome["refused"] == []
    _assert_rain_first([r["index"] for r in outcome["results"]])
