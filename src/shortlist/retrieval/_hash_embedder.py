"""``HashingEmbedder``: a deterministic, model-free embedder by feature hashing of word stems.

Fast (tens of thousands of texts per second) and reproducible, with no semantics beyond shared
words: for scale benchmarks, tests and ``shortlist index build --embedder hashing``, never as
a stand-in for a real model's relevance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from shortlist.embeddings.base import Embedder, Vectors
from shortlist.memory._text import tokenize

__all__ = ["HashingEmbedder"]


class HashingEmbedder(Embedder):
    """Signed feature hashing of stemmed words into ``dim`` buckets (then L2-normalised).

    Args:
        dim: vector dimension.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError("dim must be >= 8")
        self.dim = dim
        self.model_name = f"hashing-{dim}"
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            hit = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._cache) < 500_000:
                self._cache[token] = hit
        return hit

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (rows are not yet normalised; :meth:`embed` does that)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            toks = tokenize(text)
            if not toks:
                out[row, 0] = 1.0  # a fixed direction for texts without words
                continue
            for tok in toks:
                col, sign = self._bucket(tok)
                out[row, col] += sign
        return out
