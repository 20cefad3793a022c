"""Interop: OpenAI-compatible ``POST /v1/embeddings`` and Cohere-compatible ``POST /v1/rerank``.

Both serve the service's embedding model (the runtime config's first provider, else the
embedded default), so other systems can use it without running their own. Rerank scores are
the cosine similarity of query and document vectors, best first.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from shortlist.server.auth import require_key
from shortlist.server.errors import ApiError
from shortlist.server.routes import PositiveJsonInt, state_of

__all__ = ["router"]

#: The most texts one request may carry in the schema (the server's ``max_texts`` may be lower: 413).
MAX_TEXTS = 256

router = APIRouter(tags=["interop"], dependencies=[Depends(require_key)])


class EmbeddingsRequest(BaseModel):
    """An OpenAI ``/v1/embeddings`` request (text input only)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_TEXTS)] = Field(
        description="A text or a non-empty list of texts."
    )
    model: str | None = Field(default=None, description="Ignored beyond being echoed; the server has one model.")
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None


class EmbeddingItem(BaseModel):
    """One vector."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingsResponse(BaseModel):
    """An OpenAI ``/v1/embeddings`` response."""

    object: Literal["list"] = "list"
    data: list[EmbeddingItem]
    model: str
    usage: dict[str, int]


class RerankDocument(BaseModel):
    """A document given as an object (Cohere's older shape)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    text: str


class RerankRequest(BaseModel):
    """A Cohere ``/v1/rerank`` request."""

    model_config = ConfigDict(extra="ignore", strict=True)

    query: str
    documents: list[str | RerankDocument] = Field(max_length=MAX_TEXTS - 1)
    model: str | None = None
    top_n: PositiveJsonInt | None = Field(default=None, description="How many results (Cohere).")
    top_k: PositiveJsonInt | None = Field(default=None, description="Alias of top_n (Voyage and the reference script).")
    return_documents: bool = False


class RerankResult(BaseModel):
    """One document's relevance."""

    index: int
    relevance_score: float
    document: dict[str, str] | None = None


class RerankResponse(BaseModel):
    """A Cohere ``/v1/rerank`` response."""

    id: str
    results: list[RerankResult]
    meta: dict[str, Any]


def _check_count(n: int, limit: int) -> None:
    if n > limit:
        raise ApiError(413, "too_many_texts", f"{n} texts sent; this server accepts at most {limit} per request")


@router.post("/v1/embeddings", response_model=EmbeddingsResponse, summary="Embed texts (OpenAI-compatible)")
async def embeddings(body: EmbeddingsRequest, request: Request) -> dict[str, Any]:
    """Embed ``input`` with the server's model; unit-length float32 vectors."""
    state = state_of(request)
    texts = [body.input] if isinstance(body.input, str) else body.input
    if not texts:
        raise ApiError(422, "invalid_request", "input must hold at least one text")
    _check_count(len(texts), state.settings.max_texts)
    vectors = await asyncio.to_thread(state.embedder().embed, texts)
    data: list[dict[str, Any]] = []
    for i, row in enumerate(vectors):
        vec: list[float] | str
        if body.encoding_format == "base64":
            vec = base64.b64encode(np.asarray(row, dtype="<f4").tobytes()).decode("ascii")
        else:
            vec = [float(x) for x in row]
        data.append({"object": "embedding", "index": i, "embedding": vec})
    tokens = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.model or state.settings.embed_model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


@router.post("/v1/rerank", response_model=RerankResponse, summary="Rerank documents for a query (Cohere-compatible)")
async def rerank(body: RerankRequest, request: Request) -> dict[str, Any]:
    """Score every document against ``query`` and return the best ``top_n``, best first."""
    state = state_of(request)
    docs = [d if isinstance(d, str) else d.text for d in body.documents]
    _check_count(len(docs) + 1, state.settings.max_texts)
    results: list[dict[str, Any]] = []
    if docs:
        vectors = await asyncio.to_thread(state.embedder().embed, [body.query, *docs])
        scores = vectors[1:] @ vectors[0]
        order = sorted(range(len(docs)), key=lambda i: (-float(scores[i]), i))
        for i in order[: body.top_n or body.top_k or len(docs)]:
            item: dict[str, Any] = {"index": i, "relevance_score": float(scores[i])}
            if body.return_documents:
                item["document"] = {"text": docs[i]}
            results.append(item)
    return {
        "id": str(uuid.uuid4()),
        "results": results,
        "meta": {"api_version": {"version": "1"}, "model": body.model or state.settings.embed_model},
    }
