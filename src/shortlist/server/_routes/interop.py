"""Interop: OpenAI/Voyage/Jina ``POST /v1/embeddings``, ``GET /v1/models``, and one rerank for Cohere, Voyage and Jina.

All serve the service's embedding model (see :mod:`shortlist.server._compat`), so other systems
can use it without running their own; docs/compat.md says what each client needs.

- ``/v1/embeddings`` takes what the OpenAI SDK, LangChain and LiteLLM send: a text, a list of
  texts, one token array or a list of token arrays (``cl100k_base`` ids, decoded here), up to
  2,048 inputs (the server's ``max_texts`` may be lower: 413), ``encoding_format`` float or
  base64 (the OpenAI SDK asks for base64 by default), and Voyage's ``input_type``,
  ``truncation``, ``output_dimension`` and ``output_dtype``. A ``dimensions`` the model cannot
  give and an unknown ``model`` are refused in OpenAI's error shape.
- ``/v1/rerank`` and ``/v2/rerank`` answer with one body every client reads: Cohere's and Jina's
  ``results[]`` and Voyage's ``data[]`` (with ``usage.total_tokens``). Scores are the cosine
  similarity of query and document vectors, best first.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

from shortlist.server._compat import (
    check_dimension,
    compat_router,
    decode_tokens,
    dimension_of,
    embed_texts,
    encode_vectors,
    model_error,
    resolve_model,
    served_models,
)
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import PositiveJsonInt, state_of

__all__ = ["router"]

#: The most inputs one request may carry in the schema (the server's ``max_texts`` may be lower: 413).
MAX_TEXTS = 2048

router = compat_router(tags=["interop"])

_INPUT_KINDS = "a string, a list of strings, a list of token ids, or a list of token-id lists"

#: The largest ordinary ``cl100k_base`` token id (special tokens are not embedded).
MAX_TOKEN_ID = 100255


def _is_id(value: Any) -> bool:
    # JSON Schema counts 3.0 as an integer, so an integral float is a token id too
    integral = isinstance(value, float) and value.is_integer()
    return integral or (isinstance(value, int) and not isinstance(value, bool))


def _check_id(token: int, where: str) -> None:
    if not 0 <= token <= MAX_TOKEN_ID:
        raise PydanticCustomError(
            "token_id", f"{where} = {token} is not an ordinary cl100k_base token id (0..{MAX_TOKEN_ID})"
        )


def _check_input(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate ``input`` as one of its four shapes with a message that names the actual problem."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise PydanticCustomError("input_type", f"input must be {_INPUT_KINDS}, not {type(value).__name__}")
    if not value:
        raise PydanticCustomError("input_empty", "input must hold at least one text or token array")
    first = value[0]
    if len(value) > MAX_TEXTS and not _is_id(first):
        raise PydanticCustomError(
            "input_too_long", f"input holds {len(value)} items; at most {MAX_TEXTS} inputs per request"
        )
    if isinstance(first, str):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise PydanticCustomError(
                    "input_mixed", f"input[{i}] is {type(item).__name__}: a list of texts must hold only strings"
                )
        return value
    if _is_id(first):
        for i, item in enumerate(value):
            if not _is_id(item):
                raise PydanticCustomError(
                    "input_mixed", f"input[{i}] is {type(item).__name__}: a token array must hold only integers"
                )
            _check_id(int(item), f"input[{i}]")
        return [int(item) for item in value]
    if isinstance(first, list):
        for i, item in enumerate(value):
            if not isinstance(item, list):
                raise PydanticCustomError(
                    "input_mixed", f"input[{i}] is {type(item).__name__}: a list of token arrays must hold only lists"
                )
            if not item:
                raise PydanticCustomError("input_empty", f"input[{i}] is an empty token array")
            for j, token in enumerate(item):
                if not _is_id(token):
                    raise PydanticCustomError(
                        "input_mixed", f"input[{i}][{j}] is {type(token).__name__}: token ids are integers"
                    )
                _check_id(int(token), f"input[{i}][{j}]")
        return [[int(token) for token in item] for item in value]
    raise PydanticCustomError("input_type", f"input[0] is {type(first).__name__}: input must be {_INPUT_KINDS}")


_TokenId = Annotated[int, Field(ge=0, le=MAX_TOKEN_ID)]
_TokenArray = Annotated[list[_TokenId], Field(min_length=1)]

EmbeddingInput = Annotated[
    str
    | Annotated[list[str], Field(min_length=1, max_length=MAX_TEXTS)]
    | _TokenArray
    | Annotated[list[_TokenArray], Field(min_length=1, max_length=MAX_TEXTS)],
    WrapValidator(_check_input),
    Field(description=f"What to embed: {_INPUT_KINDS} (cl100k_base ids), at most {MAX_TEXTS} inputs."),
]


class EmbeddingsRequest(BaseModel):
    """An OpenAI ``/v1/embeddings`` request, with the fields Voyage and Jina add."""

    model_config = ConfigDict(extra="ignore", strict=True)

    input: EmbeddingInput
    model: str | None = Field(default=None, description="The served model's name (GET /v1/models); else 404.")
    encoding_format: Literal["float", "base64"] | None = Field(
        default=None, description="float (default) or base64 of little-endian float32."
    )
    dimensions: PositiveJsonInt | None = Field(default=None, description="Must equal the model's dimension.")
    user: str | None = None
    # Voyage
    input_type: str | None = Field(default=None, description="Voyage's query/document hint (accepted, not used).")
    truncation: bool | None = Field(
        default=None, description="Voyage: inputs are always truncated to the model's length."
    )
    output_dimension: PositiveJsonInt | None = Field(default=None, description="Voyage: as dimensions.")
    output_dtype: Literal["float", "int8", "uint8", "binary", "ubinary"] | None = Field(
        default=None, description="Voyage: float (default) or a quantised integer type."
    )


class EmbeddingItem(BaseModel):
    """One vector."""

    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | list[int] | str


class EmbeddingsUsage(BaseModel):
    """Tokens of the input (cl100k_base)."""

    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    """An OpenAI ``/v1/embeddings`` response (Voyage reads the same)."""

    object: Literal["list"] = "list"
    data: list[EmbeddingItem]
    model: str
    usage: EmbeddingsUsage


def _texts_of(value: str | list[str] | list[int] | list[list[int]]) -> list[str]:
    if isinstance(value, str):
        return [value]
    if _is_id(value[0]):
        return [decode_tokens(value, where="input")]  # type: ignore[arg-type]
    if isinstance(value[0], list):
        return [decode_tokens(ids, where=f"input[{i}]") for i, ids in enumerate(value)]  # type: ignore[arg-type, unused-ignore]
    return value  # type: ignore[return-value]


@router.post("/v1/embeddings", response_model=EmbeddingsResponse, summary="Embed texts (OpenAI/Voyage-compatible)")
async def embeddings(body: EmbeddingsRequest, request: Request) -> FastJSONResponse:
    """Embed ``input`` with the server's model; unit-length float32 vectors."""
    state = state_of(request)
    model = resolve_model(state, body.model)
    await asyncio.to_thread(check_dimension, state, body.dimensions, param="dimensions")
    await asyncio.to_thread(check_dimension, state, body.output_dimension, param="output_dimension")
    texts = await asyncio.to_thread(_texts_of, body.input)
    vectors, tokens = await embed_texts(state, texts)
    rendered = encode_vectors(vectors, body.output_dtype or "float", as_base64=body.encoding_format == "base64")
    return FastJSONResponse(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(rendered)],
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


class ModelCard(BaseModel):
    """One model (OpenAI's ``Model`` object)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    dimensions: int = Field(description="The vector length (not in OpenAI's object; extra fields are ignored).")


class ModelList(BaseModel):
    """OpenAI's ``GET /v1/models`` response."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


def _card(name: str, dim: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "shortlist", "dimensions": dim}


@router.get("/v1/models", response_model=ModelList, summary="The served embedding model (OpenAI-compatible)")
async def list_models(request: Request) -> dict[str, Any]:
    """The names the served model answers to, each with its dimension."""
    state = state_of(request)
    dim = await dimension_of(state)
    return {"object": "list", "data": [_card(n, dim) for n in served_models(state)]}


@router.get("/v1/models/{model_id:path}", response_model=ModelCard, summary="One served model (OpenAI-compatible)")
async def get_model(model_id: str, request: Request) -> dict[str, Any]:
    """The served model under ``model_id``; 404 ``model_not_found`` for any other name."""
    state = state_of(request)
    names = served_models(state)
    if model_id not in names and model_id.rsplit("/", 1)[-1] not in names:
        raise model_error(model_id, names)
    return _card(model_id, await dimension_of(state))


class RerankDocument(BaseModel):
    """A document given as an object (Cohere's older shape, Jina's ``{text}``)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    text: str


class RerankRequest(BaseModel):
    """A rerank request as Cohere (v1, v2), Voyage and Jina send it."""

    model_config = ConfigDict(extra="ignore", strict=True)

    query: str
    documents: list[str | RerankDocument] = Field(max_length=MAX_TEXTS - 1)
    model: str | None = Field(default=None, description="The served model's name; else 404.")
    top_n: PositiveJsonInt | None = Field(default=None, description="How many results (Cohere, Jina).")
    top_k: PositiveJsonInt | None = Field(default=None, description="Alias of top_n (Voyage).")
    return_documents: bool | None = Field(default=None, description="Echo each document's text (Cohere v1, Voyage).")


class RerankResult(BaseModel):
    """One document's relevance, as Cohere and Jina read it."""

    index: int
    relevance_score: float
    document: dict[str, str] | None = None


class VoyageRerankResult(BaseModel):
    """One document's relevance, as Voyage reads it."""

    index: int
    relevance_score: float
    document: str | None = None


class RerankResponse(BaseModel):
    """One body for every rerank client: ``results`` (Cohere, Jina) and ``data`` (Voyage)."""

    id: str
    object: Literal["list"] = "list"
    results: list[RerankResult]
    data: list[VoyageRerankResult]
    model: str
    usage: dict[str, int]
    meta: dict[str, Any]


async def _rerank(body: RerankRequest, request: Request, version: str) -> FastJSONResponse:
    state = state_of(request)
    model = resolve_model(state, body.model)
    docs = [d if isinstance(d, str) else d.text for d in body.documents]
    results: list[dict[str, Any]] = []
    data: list[dict[str, Any]] = []
    tokens = 0
    if docs:
        vectors, tokens = await embed_texts(state, [body.query, *docs])
        scores = vectors[1:] @ vectors[0]
        order = sorted(range(len(docs)), key=lambda i: (-float(scores[i]), i))
        for i in order[: body.top_n or body.top_k or len(docs)]:
            result: dict[str, Any] = {"index": i, "relevance_score": float(scores[i])}
            voyage = dict(result)
            if body.return_documents:
                result["document"] = {"text": docs[i]}
                voyage["document"] = docs[i]
            results.append(result)
            data.append(voyage)
    return FastJSONResponse(
        {
            "id": str(uuid.uuid4()),
            "object": "list",
            "results": results,
            "data": data,
            "model": model,
            "usage": {"total_tokens": tokens},
            "meta": {"api_version": {"version": version}, "billed_units": {"search_units": 1, "input_tokens": tokens}},
        }
    )


@router.post("/v1/rerank", response_model=RerankResponse, summary="Rerank documents (Cohere v1, Voyage, Jina)")
async def rerank(body: RerankRequest, request: Request) -> FastJSONResponse:
    """Score every document against ``query`` and return the best ``top_n``, best first."""
    return await _rerank(body, request, "1")


@router.post("/v2/rerank", response_model=RerankResponse, summary="Rerank documents (Cohere v2)")
async def rerank_v2(body: RerankRequest, request: Request) -> FastJSONResponse:
    """As ``/v1/rerank``, for Cohere's ``ClientV2`` and LiteLLM's ``cohere/`` provider."""
    return await _rerank(body, request, "2")
