"""Text Embeddings Inference-compatible routes: ``GET /info``, ``POST /embed``, ``POST /rerank``.

Shapes as Hugging Face's TEI router serves them (``tei-client`` and LiteLLM's ``huggingface/``
provider read them): ``/embed`` answers a list of float vectors, ``/rerank`` a list of
``{index, score[, text]}`` best first (cut to ``top_n`` when sent, as LiteLLM does), ``/info``
the model card.

A TEI server hosts one model of one type, and ``tei-client`` checks that type before it embeds
(``embedding``) or reranks (``reranker``). The root routes report an embedding model; the same
rerank is also served under ``/tei/reranker`` whose ``/info`` reports a reranker, for
``tei-client``'s ``rerank``. Token-id inputs are refused (they would be ids of the model's own
tokenizer; send text). Vectors are always unit length (``normalize`` cannot turn that off).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

from shortlist.server._compat import check_dimension, compat_router, embed_texts, encode_vectors, served_models
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import PositiveJsonInt, state_of
from shortlist.server._routes.interop import MAX_TEXTS

__all__ = ["RERANKER_PREFIX", "router"]

#: Where the reranker-typed copy of the TEI routes is served.
RERANKER_PREFIX = "/tei/reranker"

router = compat_router(tags=["tei"])


def _check_inputs(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A text or a non-empty list of texts, with a message that names what else was sent."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        return value
    if isinstance(value, list) and value and all(isinstance(x, (int, list)) for x in value):
        raise PydanticCustomError("token_ids", "inputs: token ids are not accepted here; send the texts")
    if isinstance(value, list) and not value:
        raise PydanticCustomError("inputs_empty", "inputs must hold at least one text")
    raise PydanticCustomError("inputs_type", "inputs must be a text or a list of texts")


def _no_prompt(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    if value is not None:
        raise PydanticCustomError("prompt_name", f"prompt {value!r} is not known. Available prompts: []")
    return None


class TeiEmbedRequest(BaseModel):
    """TEI's ``/embed`` request."""

    model_config = ConfigDict(extra="ignore", strict=True)

    inputs: Annotated[str | Annotated[list[str], Field(min_length=1)], WrapValidator(_check_inputs)] = Field(
        description="A text or a list of texts."
    )
    normalize: bool = Field(default=True, description="Vectors are always unit length.")
    truncate: bool | None = None
    truncation_direction: str | None = None
    prompt_name: Annotated[None, WrapValidator(_no_prompt)] = Field(default=None, description="No prompts here.")
    dimensions: PositiveJsonInt | None = Field(default=None, description="Must equal the model's dimension.")


class TeiRerankRequest(BaseModel):
    """TEI's ``/rerank`` request."""

    model_config = ConfigDict(extra="ignore", strict=True)

    query: str
    texts: list[str] = Field(max_length=MAX_TEXTS - 1)
    raw_scores: bool = False
    return_text: bool = False
    top_n: PositiveJsonInt | None = Field(default=None, description="Keep the best n (LiteLLM sends it).")
    truncate: bool | None = None
    truncation_direction: str | None = None


class TeiRank(BaseModel):
    """One text's score."""

    index: int
    score: float
    text: str | None = None


def _info(request: Request, model_type: dict[str, Any]) -> dict[str, Any]:
    from shortlist import __version__

    state = state_of(request)
    limit = state.settings.max_texts
    length = getattr(state.embedder(), "max_length", None)  # the default model's cut, in word pieces
    max_input = length if isinstance(length, int) else None
    return {
        "model_id": served_models(state)[0],
        "model_sha": None,
        "model_dtype": "float32",
        "model_type": model_type,
        "prompts": None,
        "default_prompt_name": None,
        "default_prompt": None,
        "max_concurrent_requests": state.settings.selection_threads,
        "max_input_length": max_input,
        "max_batch_tokens": limit * max_input if max_input else None,
        "max_batch_requests": None,
        "max_client_batch_size": limit,
        "auto_truncate": True,
        "tokenization_workers": 1,
        "version": __version__,
        "sha": None,
        "docker_label": None,
    }


@router.get("/info", summary="The served model (TEI-compatible, an embedding model)")
async def info(request: Request) -> dict[str, Any]:
    """TEI's model card, typed ``embedding``."""
    return _info(request, {"embedding": {"pooling": "mean"}})


@router.get(f"{RERANKER_PREFIX}/info", summary="The served model (TEI-compatible, a reranker)")
async def reranker_info(request: Request) -> dict[str, Any]:
    """TEI's model card, typed ``reranker`` (for ``tei-client``'s rerank)."""
    return _info(request, {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}})


@router.post("/embed", response_model=list[list[float]], summary="Embed texts (TEI-compatible)")
async def embed(body: TeiEmbedRequest, request: Request) -> FastJSONResponse:
    """One unit-length float vector per input."""
    state = state_of(request)
    await asyncio.to_thread(check_dimension, state, body.dimensions, param="dimensions")
    texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
    vectors, _ = await embed_texts(state, texts)
    return FastJSONResponse(encode_vectors(vectors, "float"))


async def _rerank(body: TeiRerankRequest, request: Request) -> FastJSONResponse:
    state = state_of(request)
    ranks: list[dict[str, Any]] = []
    if body.texts:
        vectors, _ = await embed_texts(state, [body.query, *body.texts])
        scores = vectors[1:] @ vectors[0]
        order = sorted(range(len(body.texts)), key=lambda i: (-float(scores[i]), i))
        for i in order[: body.top_n or len(order)]:
            rank: dict[str, Any] = {"index": i, "score": float(scores[i])}
            if body.return_text:
                rank["text"] = body.texts[i]
            ranks.append(rank)
    return FastJSONResponse(ranks)


@router.post("/rerank", response_model=list[TeiRank], summary="Rerank texts for a query (TEI-compatible)")
async def rerank(body: TeiRerankRequest, request: Request) -> FastJSONResponse:
    """Every text's cosine similarity to ``query``, best first."""
    return await _rerank(body, request)


@router.post(f"{RERANKER_PREFIX}/rerank", response_model=list[TeiRank], summary="Rerank texts (TEI reranker)")
async def reranker_rerank(body: TeiRerankRequest, request: Request) -> FastJSONResponse:
    """As ``/rerank``, under the reranker-typed prefix."""
    return await _rerank(body, request)
