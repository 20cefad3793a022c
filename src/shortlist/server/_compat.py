"""What the provider-compatible routes share: the model they serve and its names, token counts, vector encodings.

The service serves one embedding model (the runtime config's first provider, else the embedded
default). The OpenAI, Cohere, Voyage, Jina and TEI routes (``server/_routes/interop.py``,
``compat_cohere.py``, ``compat_tei.py``) all answer with it, so this module holds what they
must agree on:

- **names**: the model is known as ``ServerSettings.embed_model`` and as the embedder's own
  ``model_name``; a Hugging Face style ``org/name`` whose last part is one of those is the same
  model. Any other name is refused (404 ``model_not_found``), so a client configured for another
  provider's model learns it instead of getting vectors from a different model.
- **tokens**: token-array inputs (what LangChain's ``OpenAIEmbeddings`` and the OpenAI SDK's
  callers send) are ``cl100k_base`` ids, the encoding tiktoken picks for OpenAI's embedding
  models and LangChain's fallback for any other name; ``usage`` counts the same tokens. The BPE
  file comes from ``bpe-openai`` (offline, see :mod:`shortlist._tokens`).
- **bodies**: JSON is read with or without a ``Content-Type`` header (:func:`compat_router`).
- **encodings**: floats, little-endian float32 base64 (OpenAI, Voyage, Cohere ``base64``), and
  Cohere/Voyage quantised types (``int8``, ``uint8``, ``binary``, ``ubinary``) computed from the
  unit-length float vector (scalar quantisation of ``[-1, 1]``; sign bits packed 8 per byte).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter, Depends

from shortlist.server._auth import require_key
from shortlist.server._errors import ApiError
from shortlist.server._state import ServiceState

__all__ = [
    "TOKEN_ENCODING",
    "VectorType",
    "check_dimension",
    "compat_router",
    "count_tokens",
    "decode_tokens",
    "dimension_of",
    "embed_texts",
    "encode_vectors",
    "model_dimension",
    "model_error",
    "openai_error",
    "resolve_model",
    "served_models",
]

#: The tiktoken encoding of token-array inputs and of ``usage``.
TOKEN_ENCODING = "cl100k_base"

#: The vector types the routes can return.
VectorType = Literal["float", "base64", "int8", "uint8", "binary", "ubinary"]

_dims: dict[int, int] = {}
_dims_lock = threading.Lock()


def _encoding() -> Any:
    from shortlist._tokens import TiktokenCounter

    return TiktokenCounter(TOKEN_ENCODING).encoding()


def compat_router(*, tags: list[str]) -> APIRouter:
    """An API-key-protected router that reads a JSON body sent without ``Content-Type``.

    LiteLLM's ``voyage/`` provider posts JSON with no ``Content-Type`` header, as the providers'
    own APIs accept; FastAPI >= 0.132 refuses such a body unless ``strict_content_type`` is off.
    A body declared as anything else (``text/plain``, a form) is still refused.
    """
    lenient = {"strict_content_type": False} if "strict_content_type" in inspect.signature(APIRouter).parameters else {}
    return APIRouter(tags=tags, dependencies=[Depends(require_key)], **lenient)  # type: ignore[arg-type]


def openai_error(status: int, code: str, message: str, *, param: str | None = None) -> ApiError:
    """An :class:`ApiError` whose body also carries OpenAI's ``type`` and ``param`` fields."""
    return ApiError(status, code, message, extra={"type": "invalid_request_error", "param": param})


def served_models(state: ServiceState) -> list[str]:
    """The names the served model answers to (the configured name first)."""
    names = [state.settings.embed_model]
    own = state.embedder().model_name
    if own and own not in names:
        names.append(own)
    return names


def resolve_model(state: ServiceState, model: str | None, *, param: str = "model") -> str:
    """The model name to echo for a request that asked for ``model`` (None: the served model's name).

    Raises:
        ApiError: 404 ``model_not_found`` (OpenAI's shape) for a name the service does not serve.
    """
    if model is None or model == "":
        return state.settings.embed_model
    names = served_models(state)
    if model in names or model.rsplit("/", 1)[-1] in names:
        return model
    raise model_error(model, names, param=param)


def model_error(model: str, names: Sequence[str], *, param: str = "model") -> ApiError:
    """The 404 for an unknown model, naming the ones served."""
    return openai_error(
        404,
        "model_not_found",
        f"The model `{model}` does not exist on this server; it serves {', '.join(repr(n) for n in names)}",
        param=param,
    )


def model_dimension(state: ServiceState) -> int:
    """The served model's vector length (embeds one probe text on first use, then cached)."""
    embedder = state.embedder()
    key = id(embedder)
    with _dims_lock:
        dim = _dims.get(key)
    if dim is None:
        dim = int(embedder.embed(["dimension probe"]).shape[1])
        with _dims_lock:
            _dims[key] = dim
    return dim


def check_dimension(state: ServiceState, wanted: int | None, *, param: str) -> None:
    """Refuse a requested vector length other than the model's own (OpenAI's 400 shape).

    Raises:
        ApiError: 400 ``invalid_value`` naming the model's dimension.
    """
    if wanted is None:
        return
    dim = model_dimension(state)
    if wanted != dim:
        raise openai_error(
            400,
            "invalid_value",
            f"{param}={wanted} is not available: the model {state.settings.embed_model!r} "
            f"gives {dim}-dimensional vectors only (omit {param} or send {dim})",
            param=param,
        )


def decode_tokens(ids: Sequence[int], *, where: str) -> str:
    """The text of ``cl100k_base`` token ids.

    Raises:
        ApiError: 400 when an id is not a token of the encoding, naming its position.
    """
    enc = _encoding()
    top = int(enc.max_token_value)
    for j, token in enumerate(ids):
        if not 0 <= token <= top:
            raise openai_error(
                400,
                "invalid_value",
                f"{where}[{j}] = {token} is not a {TOKEN_ENCODING} token id (0..{top})",
                param="input",
            )
    try:
        return str(enc.decode(list(ids)))
    except KeyError as exc:
        raise openai_error(
            400, "invalid_value", f"{where}: {exc.args[0] if exc.args else exc} ({TOKEN_ENCODING})", param="input"
        ) from exc


def count_tokens(texts: Sequence[str]) -> int:
    """The ``cl100k_base`` tokens of ``texts`` (what ``usage`` reports)."""
    enc = _encoding()
    return sum(len(t) for t in enc.encode_ordinary_batch(list(texts))) if texts else 0


async def dimension_of(state: ServiceState) -> int:
    """:func:`model_dimension` off the event loop."""
    return await asyncio.to_thread(model_dimension, state)


async def embed_texts(state: ServiceState, texts: Sequence[str]) -> tuple[npt.NDArray[np.float32], int]:
    """Embed ``texts`` with the served model off the event loop; return the vectors and their token count.

    Raises:
        ApiError: 413 when there are more texts than the server's ``max_texts``.
    """
    limit = state.settings.max_texts
    if len(texts) > limit:
        raise ApiError(
            413, "too_many_texts", f"{len(texts)} texts sent; this server accepts at most {limit} per request"
        )

    def run() -> tuple[npt.NDArray[np.float32], int]:
        vectors = np.asarray(state.embedder().embed(list(texts)), dtype=np.float32)
        return vectors, count_tokens(texts)

    return await asyncio.to_thread(run)


def _quantised(vectors: npt.NDArray[np.float32], kind: VectorType) -> npt.NDArray[Any]:
    if kind == "int8":
        scaled: npt.NDArray[np.float32] = np.rint(vectors * 127.0)
        return np.clip(scaled, -128, 127).astype(np.int8)
    if kind == "uint8":
        shifted: npt.NDArray[np.float32] = np.rint((vectors + 1.0) * 127.5)
        return np.clip(shifted, 0, 255).astype(np.uint8)
    bits = np.packbits(vectors > 0, axis=1)  # 8 dimensions per byte, the first in the high bit
    if kind == "ubinary":
        return bits
    return (bits.astype(np.int16) - 128).astype(np.int8)


def encode_vectors(vectors: npt.NDArray[np.float32], kind: VectorType, *, as_base64: bool = False) -> list[Any]:
    """Render unit-length vectors as ``kind``: float or quantised integer lists, or base64 strings.

    ``kind="base64"`` is little-endian float32 bytes (Cohere's type); ``as_base64`` renders any
    kind as the base64 of its bytes (float32, int8 or uint8), as Voyage decodes them.
    """
    if kind == "base64":
        kind, as_base64 = "float", True
    values = vectors.astype("<f4") if kind == "float" else _quantised(vectors, kind)
    if as_base64:
        return [base64.b64encode(row.tobytes()).decode("ascii") for row in values]
    out: list[Any] = values.astype(np.float64 if kind == "float" else np.int64).tolist()
    return out
