"""``HashingEmbedder``: a deterministic, model-free embedder by signed feature hashing of terms.

Each term of the text (from a :mod:`shortlist._text` analyser, the ``corpus`` preset's word stems
by default) hashes to one of ``dim`` buckets and a sign; a text's vector is the sum. Fast (tens of
thousands of texts per second) and reproducible, with no semantics beyond shared words: for scale
benchmarks, tests and ``shortlist index build --embedder hashing``, never as a stand-in for a real
model's relevance. :class:`shortlist.testing.HashEmbedder` is the same embedder as a test double.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from shortlist._text import Analyser, analyser
from shortlist.embeddings._base import Embedder, Vectors
from shortlist.errors import UsageError

__all__ = ["HashingEmbedder"]

_MAX_CACHE = 500_000


class HashingEmbedder(Embedder):
    """Signed feature hashing of an analyser's terms into ``dim`` buckets (:meth:`embed` L2-normalises).

    A term's bucket is its 64-bit BLAKE2b digest (little-endian) modulo ``dim``, its sign the
    digest's top bit. A text without terms gets a fixed direction (the first axis).

    Args:
        dim: vector dimension (at least :attr:`min_dim`).
        analyser: the preset name (or :class:`~shortlist._text.Analyser`) whose terms are hashed.
        model_name: the name in cache keys and index manifests (default ``hashing-DIM``).

    Raises:
        ValueError: ``dim`` is too small, or the preset is unknown.
    """

    #: The smallest ``dim`` accepted.
    min_dim: int = 8
    #: Whether a text without terms gets the first axis (else a zero vector).
    empty_axis: bool = True

    def __init__(self, dim: int = 384, *, analyser: str | Analyser = "corpus", model_name: str | None = None) -> None:
        if dim < self.min_dim:
            raise UsageError(f"dim must be >= {self.min_dim}")
        self.dim = dim
        self.model_name = model_name if model_name is not None else f"hashing-{dim}"
        self.analyser = _analyser(analyser)
        self._cache: dict[str, tuple[int, float]] = {}

    def bucket(self, term: str) -> tuple[int, float]:
        """The column and sign of ``term``."""
        h = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")
        return h % self.dim, 1.0 if (h >> 63) & 1 else -1.0

    def _row(self, text: str, out: Vectors) -> None:
        toks = self.analyser.tokens(text)
        if not toks:
            if self.empty_axis:
                out[0] = 1.0
            return
        cache = self._cache
        for tok in toks:
            hit = cache.get(tok)
            if hit is None:
                hit = self.bucket(tok)
                if len(cache) < _MAX_CACHE:
                    cache[tok] = hit
            col, sign = hit
            out[col] += sign

    def vector(self, text: str) -> Vectors:
        """The (unnormalised) vector of one text."""
        v = np.zeros(self.dim, dtype=np.float32)
        self._row(text, v)
        return v

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (rows are not yet normalised; :meth:`embed` does that)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            self._row(text, out[row])
        return out


def _analyser(spec: str | Analyser) -> Analyser:
    return spec if isinstance(spec, Analyser) else analyser(spec)
