"""Public test doubles for code that uses shortlist, and the switch that blocks real model calls.

Doubles: :class:`StaticSelector` (always the same ids), :class:`FailingSelector` (always
raises), :class:`SlowSelector` (sleeps, then answers), :class:`HashEmbedder` (deterministic
vectors from token hashes: texts sharing words are close) and :class:`ScriptedModel` (a
model callable that replays scripted answers and records prompts).

The model-request switch lives in :mod:`shortlist._model_guard` (its switches re-exported here): while
requests are blocked (inside pytest, or inside :func:`block_model_requests`), HTTP-backed
models, embedders and rerankers refuse every non-loopback endpoint, and the LLM judge refuses
a model that is not a test double (anything with ``shortlist_test_double = True``);
:func:`allow_model_requests` lifts the block explicitly.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Iterable, Sequence

from shortlist._exports import resolve
from shortlist._model_guard import allow_model_requests, block_model_requests
from shortlist._types import Candidate, Query, Selection
from shortlist.embeddings._base import Vectors
from shortlist.embeddings._hashing import HashingEmbedder
from shortlist.errors import UsageError
from shortlist.selection._base import Selector

__all__ = [
    "FailingSelector",
    "HashEmbedder",
    "ScriptedModel",
    "SlowSelector",
    "StaticSelector",
    "allow_model_requests",
    "block_model_requests",
]

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "is_test_double": ("shortlist._model_guard", None),
    "model_requests_blocked": ("shortlist._model_guard", None),
}


def __getattr__(name: str) -> object:
    return resolve(__name__, name, {}, _DEPRECATED, globals())


class StaticSelector(Selector):
    """Always selects ``ids`` (those present among the candidates, in the given order)."""

    shortlist_test_double = True

    def __init__(self, ids: Iterable[str], *, name: str = "static", abstain: bool = False) -> None:
        self.ids = tuple(ids)
        self.name = name
        self.abstain = abstain
        self.calls: list[Query] = []

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Return the configured ids that are candidates (or an abstention)."""
        self.calls.append(query)
        if self.abstain:
            return Selection(abstained=True, reason="static abstention")
        present = {c.id for c in candidates}
        return Selection(tuple(i for i in self.ids if i in present))


class FailingSelector(Selector):
    """Always raises ``error`` (default: ``RuntimeError("selector failed")``)."""

    shortlist_test_double = True

    def __init__(self, error: Exception | None = None, *, name: str = "failing") -> None:
        self.error = error or RuntimeError("selector failed")
        self.name = name
        self.calls = 0

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Raise the configured error."""
        self.calls += 1
        raise self.error


class SlowSelector(Selector):
    """Sleeps ``delay_s`` (also async, without blocking the loop), then selects ``ids``."""

    shortlist_test_double = True

    def __init__(self, delay_s: float, ids: Iterable[str] = (), *, name: str = "slow") -> None:
        self.delay_s = delay_s
        self.ids = tuple(ids)
        self.name = name

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Sleep, then answer."""
        time.sleep(self.delay_s)
        return Selection(self.ids)

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Sleep asynchronously, then answer."""
        await asyncio.sleep(self.delay_s)
        return Selection(self.ids)


class HashEmbedder(HashingEmbedder):
    """Deterministic bag-of-words vectors: each lowercase token hashes to a signed dimension.

    The :class:`~shortlist.embeddings._hashing.HashingEmbedder` over the ``ascii`` analyser preset
    (lowercase ASCII words, no stopwords, no stems), with its own bucket layout (the digest's
    first four bytes pick the column, the fifth the sign) and a zero vector for a text without
    words. Texts that share tokens have a positive cosine; unrelated texts are near 0. Counts its
    calls and texts, so tests can check caching.

    Args:
        dim: vector size.
        model_name: the name used in cache keys.
    """

    shortlist_test_double = True
    min_dim = 2
    empty_axis = False

    def __init__(self, dim: int = 64, *, model_name: str = "hash") -> None:
        super().__init__(dim, analyser="ascii", model_name=model_name)
        self.calls = 0
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def bucket(self, term: str) -> tuple[int, float]:
        """The column and sign of ``term``."""
        h = hashlib.blake2b(term.encode(), digest_size=8).digest()
        return int.from_bytes(h[:4], "little") % self.dim, 1.0 if h[4] & 1 else -1.0

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``, recording the call."""
        with self._lock:
            self.calls += 1
            self.texts.extend(texts)
        return super().embed_batch(texts)


class ScriptedModel:
    """A model callable (``prompt -> text``) that replays ``replies`` and records every prompt.

    The last reply repeats when the script runs out. Also awaitable through :meth:`acall`.
    """

    shortlist_test_double = True

    def __init__(self, *replies: str) -> None:
        if not replies:
            raise UsageError("ScriptedModel needs at least one reply")
        self.replies = list(replies)
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        """Record ``prompt`` and return the next scripted reply."""
        with self._lock:
            index = min(len(self.prompts), len(self.replies) - 1)
            self.prompts.append(prompt)
            return self.replies[index]

    async def acall(self, prompt: str) -> str:
        """Async twin of :meth:`__call__`."""
        return self(prompt)
