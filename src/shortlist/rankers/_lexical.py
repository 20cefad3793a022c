"""Dependency-free lexical selectors: the seed's token overlap, and a small TF-IDF ranker.

``TokenOverlapSelector`` reproduces the reference example's local mode (lowercase,
whitespace split, count of a document's tokens found in the query, stable sort, top k
including zero scores) so evaluations can report it as a baseline. ``LexicalSelector``
normalises tokens (case, punctuation, snake_case and camelCase) and weights them by IDF,
and returns only candidates that share a term with the query.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from shortlist._text import analyser
from shortlist._types import Candidate, Query, Selection
from shortlist.selection._base import Selector

__all__ = ["LexicalSelector", "TokenOverlapSelector", "tokenize"]

_LEXICAL = analyser("lexical")
_WHITESPACE = analyser("whitespace").tokens


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lowercase word tokens (snake_case, camelCase and dots split; stopwords out).

    The ``lexical`` preset of :mod:`shortlist._text`: ASCII letters and digits, no stemming.
    """
    return _LEXICAL.tokens(text)


def _document(c: Candidate) -> str:
    return f"{c.name}: {c.description}"


class TokenOverlapSelector(Selector):
    """The reference example's local ranker: raw token overlap, never empty (a baseline)."""

    def __init__(self, *, name: str = "overlap", top_k: int = 10) -> None:
        self.name = name
        self.top_k = top_k

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Rank by the number of each document's whitespace tokens found in the query."""
        k = query.k or self.top_k
        q = set(_WHITESPACE(query.text))
        scored = [(sum(1 for t in _WHITESPACE(_document(c)) if t in q), i) for i, c in enumerate(candidates)]
        scored.sort(key=lambda s: -s[0])  # stable: ties keep source order
        top = scored[:k]
        return Selection(tuple(candidates[i].id for _, i in top), scores=tuple(float(s) for s, _ in top))


class LexicalSelector(Selector):
    """TF-IDF over normalised tokens; candidates sharing no term with the query are not returned."""

    def __init__(self, *, name: str = "lexical", top_k: int = 10) -> None:
        self.name = name
        self.top_k = top_k

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Score ``sum(idf(t) * log1p(tf(t)))`` over query terms; abstain when nothing matches."""
        k = query.k or self.top_k
        q_terms = set(tokenize(query.text))
        docs = [Counter(tokenize(_document(c) + " " + " ".join(c.examples))) for c in candidates]
        n = len(docs)
        df: Counter[str] = Counter()
        for d in docs:
            df.update(t for t in d if t in q_terms)
        scored: list[tuple[float, int]] = []
        for i, d in enumerate(docs):
            s = sum(math.log(1 + n / df[t]) * math.log1p(d[t]) for t in q_terms if t in d)
            if s > 0:
                scored.append((s, i))
        scored.sort(key=lambda s: -s[0])
        top = scored[:k]
        return Selection(
            tuple(candidates[i].id for _, i in top),
            scores=tuple(round(s, 6) for s, _ in top),
            abstained=not top,
        )
