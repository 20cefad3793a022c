"""Embedding providers: the contract, the embedded offline default, an OpenAI-compatible client.

The default model and the HTTP client are imported lazily (``from shortlist.embeddings
import DefaultEmbedder`` loads the module, not onnxruntime; the model loads on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shortlist.embeddings.base import Embedder, FunctionEmbedder, Vectors

if TYPE_CHECKING:
    from shortlist.embeddings.cache import CachingEmbedder
    from shortlist.embeddings.default import DefaultEmbedder, default_embedder
    from shortlist.embeddings.factory import build_embedder
    from shortlist.embeddings.openai import OpenAIEmbedder

__all__ = [
    "CachingEmbedder",
    "DefaultEmbedder",
    "Embedder",
    "FunctionEmbedder",
    "OpenAIEmbedder",
    "Vectors",
    "build_embedder",
    "default_embedder",
]

_LAZY = {
    "CachingEmbedder": "shortlist.embeddings.cache",
    "DefaultEmbedder": "shortlist.embeddings.default",
    "default_embedder": "shortlist.embeddings.default",
    "OpenAIEmbedder": "shortlist.embeddings.openai",
    "build_embedder": "shortlist.embeddings.factory",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shortlist.embeddings' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
