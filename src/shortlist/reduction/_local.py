"""Local selectors (no model call, ``max_calls=0``): newest-first, and relevance-aware with BM25.

The relevance-aware selector scores every reducible step against the current turn and keeps the
best-scoring steps that fit the budget, newest first among equal scores. Its default scorer is
BM25 (the Lucene variant that ``bm25s`` uses by default, over the terms of :mod:`shortlist._text`'s
``bm25s`` preset: ``bm25s``'s token pattern and English stop words, the PyStemmer English stemmer)
computed over a per-text cache of stemmed term counts: ``bm25s``
itself re-indexes the whole corpus each call (~160 ms for 1,000 long steps), whereas the cache makes
a turn cost one dictionary lookup per step and query term. Any scorer with the same shape, such as
a ranker's, can be plugged in.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from shortlist._text import Analyser, analyser
from shortlist.errors import UsageError
from shortlist.reduction._contract import (
    ContextSelectionCall,
    ContextSelector,
    ExecutionContext,
    current_goal,
)
from shortlist.reduction._fragments import ContextSelectionCandidate

__all__ = [
    "Bm25Scorer",
    "RelevanceScorer",
    "newest_first_selector",
    "ranker_scorer",
    "relevance_selector",
]

RelevanceScorer = Callable[[str, Sequence[str]], Sequence[float]]
"""``(query, documents) -> one score per document``; higher is more relevant."""


class Bm25Scorer:
    """BM25 (Lucene variant) with stemming and a per-text cache of analysed documents.

    Args:
        k1: Term-frequency saturation (bm25s default 1.5).
        b: Length normalisation (bm25s default 0.75).
        language: PyStemmer language, or ``None`` for no stemming.
        stopwords: Words to ignore; defaults to bm25s's English list (the ``bm25s`` preset's).
        max_entries: Size of the per-text cache (cleared when full).
    """

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        language: str | None = "english",
        stopwords: frozenset[str] | None = None,
        max_entries: int = 100_000,
    ) -> None:
        self.k1 = k1
        self.b = b
        overrides: dict[str, Any] = {} if language == "english" else {"stem": language}
        if stopwords is not None:
            overrides["stopwords"] = stopwords
        #: The analyser of documents and queries (one stemmer per thread, never shared).
        self.analyser: Analyser = analyser("bm25s", **overrides)
        self._cache: dict[str, tuple[dict[str, int], int]] = {}
        self._qcache: dict[tuple[str, ...], dict[str, tuple[int, tuple[tuple[int, int], ...]]]] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def terms(self, text: str) -> list[str]:
        """Analyse ``text``: lower-case, tokenise like bm25s, drop stop words, stem."""
        return self.analyser.tokens(text)

    def _doc(self, text: str) -> tuple[dict[str, int], int]:
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        terms = self.terms(text)
        value = (dict(Counter(terms)), len(terms))
        with self._lock:
            if len(self._cache) >= self._max:
                self._cache.clear()
            self._cache[text] = value
        return value

    def _matches(self, qterms: tuple[str, ...], text: str) -> tuple[int, tuple[tuple[int, int], ...]]:
        """Length of ``text`` in terms and the (query term index, tf) pairs it contains (cached)."""
        table = self._qcache.get(qterms)
        if table is None:
            with self._lock:
                if len(self._qcache) >= 8:  # an agent keeps one query for many turns: a few suffice
                    self._qcache.pop(next(iter(self._qcache)))
                table = self._qcache.setdefault(qterms, {})
        hit = table.get(text)
        if hit is None:
            counts, length = self._doc(text)
            hit = (length, tuple((i, counts[t]) for i, t in enumerate(qterms) if t in counts))
            if len(table) >= self._max:
                table.clear()
            table[text] = hit
        return hit

    def __call__(self, query: str, documents: Sequence[str]) -> list[float]:
        """Score each document against ``query``.

        Args:
            query: The current turn.
            documents: One text per candidate.

        Returns:
            One BM25 score per document (0.0 when no query term occurs).
        """
        return self.score_parts(query, [(d,) for d in documents])

    def score_parts(self, query: str, documents: Sequence[Sequence[str]]) -> list[float]:
        """Score documents made of several texts (a step's fragments) as if each were joined.

        Each part is analysed once and cached, so a conversation that grows by a step per turn
        costs one lookup per part and query.

        Args:
            query: The current turn.
            documents: One sequence of texts per candidate.

        Returns:
            One BM25 score per document.
        """
        if not documents:
            return []
        qterms = tuple(dict.fromkeys(self.terms(query)))
        if not qterms:
            return [0.0] * len(documents)
        n = len(documents)
        lengths: list[int] = []
        tfs: list[dict[int, int] | None] = []
        df = [0] * len(qterms)
        matches = self._matches
        for parts in documents:
            length = 0
            tf: dict[int, int] | None = None
            for part in parts:
                part_length, found = matches(qterms, part)
                length += part_length
                if found:
                    if tf is None:
                        tf = {}
                    for i, c in found:
                        tf[i] = tf.get(i, 0) + c
            lengths.append(length)
            tfs.append(tf)
            if tf:
                for i in tf:
                    df[i] += 1
        avgdl = (sum(lengths) / n) or 1.0
        idf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in df]
        k1, b = self.k1, self.b
        scores: list[float] = []
        for tf, length in zip(tfs, lengths, strict=True):
            if not tf:
                scores.append(0.0)
                continue
            norm = k1 * (1.0 - b + b * length / avgdl)
            scores.append(sum(idf[i] * c / (c + norm) for i, c in tf.items()))
        return scores


class _ScoringRanker(Protocol):
    def score(self, query: Any, candidates: Sequence[Any]) -> Any: ...


def ranker_scorer(ranker: _ScoringRanker, *, kind: str = "history") -> RelevanceScorer:
    """Use a ranker of :mod:`shortlist.rankers` (anything with ``score(Query, candidates)``) as scorer.

    Each step becomes a :class:`~shortlist._types.Candidate` whose description is the step's text,
    and the current turn a :class:`~shortlist._types.Query` of ``kind``.

    Args:
        ranker: For example ``Bm25Ranker()`` or an embedding or hybrid ranker.
        kind: The query kind passed to the ranker.

    Returns:
        A scorer for :func:`relevance_selector`.
    """
    from shortlist._types import Candidate, Query

    def score(query: str, documents: Sequence[str]) -> list[float]:
        candidates = [Candidate(id=f"step-{i}", name="step", description=d) for i, d in enumerate(documents)]
        return [float(x) for x in ranker.score(Query(text=query, kind=kind), candidates)]

    return score


def _sizes(call: ContextSelectionCall) -> tuple[dict[str, int | None], dict[str, int], int | None, int]:
    """Per-step sizes and how much of the reducible content may be kept."""
    tokens = {c.step_id: c.tokens for c in call.candidates}
    chars = {c.step_id: c.chars for c in call.candidates}
    keep_tokens: int | None = None
    if call.required_reduction_tokens is not None:
        keep_tokens = sum(t or 0 for t in tokens.values()) - call.required_reduction_tokens
    keep_chars = sum(chars.values()) - call.required_reduction_chars
    return tokens, chars, keep_tokens, keep_chars


def _greedy(call: ContextSelectionCall, order: Sequence[ContextSelectionCandidate], contiguous: bool) -> list[str]:
    tokens, chars, keep_tokens, keep_chars = _sizes(call)
    used_tokens = used_chars = 0
    kept: list[str] = []
    for cand in order:
        t = tokens[cand.step_id] or 0
        c = chars[cand.step_id]
        fits = used_chars + c <= keep_chars and (keep_tokens is None or used_tokens + t <= keep_tokens)
        if not fits:
            if contiguous:
                break
            continue
        kept.append(cand.step_id)
        used_tokens += t
        used_chars += c
    return kept


def newest_first_selector(id: str = "newest-first") -> ContextSelector:
    """The common ``trim_messages(strategy="last")`` behaviour: keep the newest steps that fit.

    Steps are kept from the newest backwards and the selection stops at the first step that does
    not fit, so what survives is a contiguous recent window.

    Args:
        id: The reducer id.

    Returns:
        A local selector (``max_calls=0``).
    """

    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        order = sorted(call.candidates, key=lambda c: c.position, reverse=True)
        return _greedy(call, order, contiguous=True)

    return ContextSelector(id=id, select=select, max_calls=0)


def relevance_selector(
    id: str = "relevance",
    *,
    query: str | Callable[[], str] | None = None,
    scorer: RelevanceScorer | None = None,
) -> ContextSelector:
    """Keep the steps most relevant to the current turn that fit the budget; recency breaks ties.

    Steps are taken in order of decreasing score (newer first among equal scores) and each is kept
    if it still fits, so a large irrelevant step never crowds out smaller relevant ones. Without a
    query (or when nothing matches) this degrades to "newest steps that fit".

    Args:
        id: The reducer id.
        query: The text to judge relevance against, or a function returning it; by default the
            current turn of the stage run (:func:`~shortlist.reduction._contract.current_goal`).
        scorer: ``(query, documents) -> scores``; defaults to a shared :class:`Bm25Scorer`.

    Returns:
        A local selector (``max_calls=0``).
    """
    score = scorer if scorer is not None else Bm25Scorer()

    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        text = current_goal() if query is None else query() if callable(query) else query
        parts: dict[str, list[str]] = {c.step_id: [] for c in call.candidates}
        for frag in call.fragments:
            bucket = parts.get(frag.step)
            if bucket is not None:
                bucket.append(frag.text)
        cands = list(call.candidates)
        if not text.strip():
            scores: list[float] = [0.0] * len(cands)
        elif isinstance(score, Bm25Scorer):
            scores = score.score_parts(text, [parts[c.step_id] or [c.excerpt] for c in cands])
        else:
            scores = list(score(text, ["\n".join(parts[c.step_id]) or c.excerpt for c in cands]))
        if len(scores) != len(cands):
            raise UsageError(f"scorer returned {len(scores)} scores for {len(cands)} steps")
        ranked = sorted(zip(scores, cands, strict=True), key=lambda sc: (-sc[0], -sc[1].position))
        return _greedy(call, [c for _, c in ranked], contiguous=False)

    return ContextSelector(id=id, select=select, max_calls=0)
