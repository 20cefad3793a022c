"""Cohere-compatible embeddings: ``POST /v1/embed`` (``cohere.Client``) and ``POST /v2/embed`` (``cohere.ClientV2``).

Shapes as the Cohere SDK parses them: v1 answers ``response_type: embeddings_floats`` (a list
of float vectors) when no ``embedding_types`` is asked, else ``embeddings_by_type``; v2 always
answers by type (``float`` when none is asked). Types: ``float``, ``base64`` (float32 bytes),
``int8``, ``uint8``, ``binary``, ``ubinary`` (see :func:`shortlist.server._compat.encode_vectors`).
v2's ``inputs`` may carry text content only (the model embeds text; images are a 422). No text
at all answers empty lists.
Cohere's rerank is in :mod:`shortlist.server._routes.interop` (``/v1/rerank``, ``/v2/rerank``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Literal

import numpy as np
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from shortlist.server._compat import check_dimension, compat_router, embed_texts, encode_vectors, resolve_model
from shortlist.server._errors import ApiError
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import PositiveJsonInt, state_of
from shortlist.server._routes.interop import MAX_TEXTS

__all__ = ["router"]

router = compat_router(tags=["interop"])

EmbeddingType = Literal["float", "base64", "int8", "uint8", "binary", "ubinary"]


class ContentPart(BaseModel):
    """One part of a v2 input: ``{"type": "text", "text": ...}`` (the model embeds text: no ``image_url``)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["text"]
    text: str


class EmbedInput(BaseModel):
    """One v2 input: its content parts, embedded as one text."""

    model_config = ConfigDict(extra="ignore", strict=True)

    content: list[ContentPart] = Field(min_length=1)


class EmbedRequest(BaseModel):
    """A Cohere ``/v1/embed`` or ``/v2/embed`` request."""

    model_config = ConfigDict(extra="ignore", strict=True)

    texts: list[str] | None = Field(default=None, max_length=MAX_TEXTS)
    images: list[str] | None = Field(default=None, max_length=0, description="Not accepted: the model embeds text.")
    inputs: list[EmbedInput] | None = Field(default=None, max_length=MAX_TEXTS, description="v2 only.")
    model: str | None = Field(default=None, description="The served model's name; else 404.")
    input_type: str | None = Field(default=None, description="search_document, search_query, ... (accepted, not used).")
    embedding_types: list[EmbeddingType] | None = Field(default=None, min_length=1)
    output_dimension: PositiveJsonInt | None = Field(default=None, description="Must equal the model's dimension.")
    truncate: str | None = Field(default=None, description="NONE, START or END; inputs are always cut at the end.")


def _texts(body: EmbedRequest) -> list[str]:
    """``texts``, then each of ``inputs`` as its text parts joined by newlines."""
    texts = list(body.texts or [])
    texts.extend("\n".join(part.text for part in item.content) for item in body.inputs or [])
    if len(texts) > MAX_TEXTS:
        raise ApiError(413, "too_many_texts", f"{len(texts)} texts sent; at most {MAX_TEXTS} per request")
    return texts


def _meta(tokens: int, version: str) -> dict[str, Any]:
    return {"api_version": {"version": version}, "billed_units": {"input_tokens": tokens}}


async def _embed(body: EmbedRequest, request: Request, version: str) -> FastJSONResponse:
    state = state_of(request)
    resolve_model(state, body.model)
    await asyncio.to_thread(check_dimension, state, body.output_dimension, param="output_dimension")
    texts = _texts(body)
    vectors, tokens = await embed_texts(state, texts) if texts else (np.zeros((0, 0), np.float32), 0)
    base = {"id": str(uuid.uuid4()), "texts": texts, "meta": _meta(tokens, version)}
    if body.embedding_types is None and version == "1":
        return FastJSONResponse(
            {"response_type": "embeddings_floats", "embeddings": encode_vectors(vectors, "float"), **base}
        )
    kinds = body.embedding_types or ["float"]
    by_type = {kind: encode_vectors(vectors, kind) for kind in dict.fromkeys(kinds)}
    return FastJSONResponse({"response_type": "embeddings_by_type", "embeddings": by_type, **base})


@router.post("/v1/embed", summary="Embed texts (Cohere v1-compatible)")
async def embed_v1(body: EmbedRequest, request: Request) -> FastJSONResponse:
    """Embed ``texts``: floats, or the ``embedding_types`` asked for."""
    return await _embed(body, request, "1")


@router.post("/v2/embed", summary="Embed texts (Cohere v2-compatible)")
async def embed_v2(body: EmbedRequest, request: Request) -> FastJSONResponse:
    """Embed ``texts`` or text ``inputs``, by type (``float`` unless ``embedding_types`` says otherwise)."""
    return await _embed(body, request, "2")
