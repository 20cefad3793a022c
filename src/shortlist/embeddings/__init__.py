"""Embedding providers: the contract, the embedded offline default, an OpenAI-compatible client.

The default model and the HTTP client are imported lazily (``from shortlist.embeddings
import DefaultEmbedder`` loads the module, not onnxruntime; the model loads on first use).
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.embeddings._base import Embedder
    from shortlist.embeddings._default import DefaultEmbedder, default_embedder
    from shortlist.embeddings._openai import OpenAIEmbedder

__all__ = [
    "DefaultEmbedder",
    "Embedder",
    "OpenAIEmbedder",
    "default_embedder",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "DefaultEmbedder": "shortlist.embeddings._default",
    "Embedder": "shortlist.embeddings._base",
    "OpenAIEmbedder": "shortlist.embeddings._openai",
    "default_embedder": "shortlist.embeddings._default",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "CachingEmbedder": ("shortlist.embeddings._cache", None),
    "FunctionEmbedder": ("shortlist.embeddings._base", None),
    "Vectors": ("shortlist.embeddings._base", None),
    "build_embedder": ("shortlist.embeddings._factory", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
