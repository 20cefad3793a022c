"""Lexical normalisation shared by the corpus index and the memory store: words, stems, stopwords.

One tokeniser for every lexical path of memory and grounding (it lives here because the
retrieval package depends on the memory package, never the reverse), so the embedded index, the Qdrant
sparse vectors and the in-memory memory store agree on what a "term" is.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer

__all__ = ["STOPWORDS", "content_words", "terms", "tokenize"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

#: A short English stopword list: words that carry no topic on their own.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves please tell give get got want need like
    know make also use using used one s t
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # PyStemmer objects are not thread-safe: one per thread.
    stemmer: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = Stemmer.Stemmer("english")
        _local.stemmer = stemmer
    return stemmer


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_stemmer().stemWord(word))


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Split ``text`` into lowercased, stemmed word tokens (stopwords dropped unless kept).

    Args:
        text: any text.
        keep_stopwords: keep stopwords (stemmed like the rest).

    Returns:
        The tokens in order, duplicates kept (term frequency matters to BM25).
    """
    words = _WORD.findall(text.lower())
    return [_stem(w) for w in words if keep_stopwords or w not in STOPWORDS]


def terms(text: str) -> list[str]:
    """The distinct content terms of ``text`` in first-seen order; stopwords only if nothing else."""
    toks = tokenize(text)
    if not toks:
        toks = tokenize(text, keep_stopwords=True)
    return list(dict.fromkeys(toks))


def content_words(text: str) -> list[str]:
    """The distinct lowercased words of ``text`` without stopwords (all words if only stopwords).

    Unstemmed: for engines that stem themselves (SQLite FTS5 ``porter``).
    """
    words = _WORD.findall(text.lower())
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))
