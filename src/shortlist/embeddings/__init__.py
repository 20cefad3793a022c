"""Embedding providers: the contract here, the offline default and HTTP clients beside it."""

from __future__ import annotations

from shortlist.embeddings.base import Embedder, FunctionEmbedder

__all__ = ["Embedder", "FunctionEmbedder"]
