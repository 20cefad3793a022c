"""The hashing embedder, where the corpus index found it first (it lives in :mod:`shortlist.embeddings._hashing`)."""

from __future__ import annotations

from shortlist.embeddings._hashing import HashingEmbedder

__all__ = ["HashingEmbedder"]
