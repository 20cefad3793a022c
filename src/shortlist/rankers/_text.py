"""Text analysis shared by the lexical rankers: tokenisation and the fields of a candidate to index.

Tokenisation splits snake_case, camelCase, dotted and hyphenated identifiers and every
punctuation mark, lowercases, drops English stopwords and applies the Snowball English
stemmer (PyStemmer). Stems are memoised per word, and each thread gets its own stemmer
(PyStemmer objects must not be shared between threads).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_EN_PLUS

from shortlist.types import Candidate

__all__ = [
    "STOPWORD_SETS",
    "Analyzer",
    "candidate_fields",
    "content_key",
    "joined",
    "parameter_text",
    "split_words",
]

#: Named stopword lists: ``"en"`` (Lucene's 33 words, what bm25s uses), ``"en_plus"`` (a longer
#: English list that also drops "can", "you", "me", …), ``"none"``.
STOPWORD_SETS: dict[str, frozenset[str]] = {
    "en": frozenset(STOPWORDS_EN),
    "en_plus": frozenset(STOPWORDS_EN_PLUS),
    "none": frozenset(),
}

# "HTTPServer" -> "HTTP Server", "getWeather" -> "get Weather", "v2Api" -> "v2 Api".
_CAMEL_UPPER = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")
_CAMEL_LOWER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")


def split_words(text: str) -> list[str]:
    """Split ``text`` into lowercase words at case changes, underscores, dots and punctuation.

    Args:
        text: any text, identifiers included (``get_current_weather``, ``fetchURL``, ``fs.read``).

    Returns:
        The lowercase words, in order (no stopword removal, no stemming).
    """
    text = _CAMEL_LOWER.sub(" ", _CAMEL_UPPER.sub(" ", text))
    return _WORD.findall(text.lower())


_local = threading.local()


def _stemmer() -> Any:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
        _local.stemmer = stemmer
    return stemmer


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    stem: str = _stemmer().stemWord(word)
    return stem


class Analyzer:
    """Turns text into index terms.

    Args:
        stopwords: a key of :data:`STOPWORD_SETS` (default ``"en"``).
        stem: apply the Snowball English stemmer (default True).

    Raises:
        ValueError: an unknown stopword list.
    """

    def __init__(self, *, stopwords: str = "en", stem: bool = True) -> None:
        if stopwords not in STOPWORD_SETS:
            raise ValueError(f"unknown stopwords {stopwords!r}; expected one of {sorted(STOPWORD_SETS)}")
        self.stopwords_name = stopwords
        self._stop = STOPWORD_SETS[stopwords]
        self.stem = stem

    @property
    def signature(self) -> tuple[str, bool]:
        """What makes two analyzers produce the same terms (part of index cache keys)."""
        return (self.stopwords_name, self.stem)

    def tokens(self, text: str) -> list[str]:
        """Return the index terms of ``text`` (split, lowercased, stopwords dropped, stemmed)."""
        stop = self._stop
        words = [w for w in split_words(text) if w not in stop]
        if self.stem:
            return [_stem(w) for w in words]
        return words


def _schema_text(schema: Any, out: list[str], depth: int = 0) -> None:
    if depth > 8 or not isinstance(schema, Mapping):
        return
    desc = schema.get("description")
    if isinstance(desc, str) and depth > 0:
        out.append(desc)
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for pname, pschema in props.items():
            out.append(str(pname))
            _schema_text(pschema, out, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _schema_text(items, out, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        alts = schema.get(key)
        if isinstance(alts, list):
            for alt in alts:
                _schema_text(alt, out, depth + 1)


def parameter_text(parameters: Mapping[str, Any] | None) -> str:
    """Return the parameter names and descriptions of a JSON Schema, space-separated.

    Nested ``properties``, ``items`` and ``anyOf``/``oneOf``/``allOf`` are followed (to a
    bounded depth); the schema's own top-level description is not repeated.
    """
    if not parameters:
        return ""
    out: list[str] = []
    _schema_text(parameters, out)
    return " ".join(out)


def candidate_fields(c: Candidate) -> dict[str, str]:
    """Return the texts of ``c`` a lexical ranker indexes, by field.

    Fields: ``name``, ``description``, ``parameters`` (names and descriptions from the JSON
    Schema) and ``examples`` (example queries, one after the other).
    """
    return {
        "name": c.name if c.name != c.id else c.id,
        "description": c.description,
        "parameters": parameter_text(c.parameters),
        "examples": "\n".join(c.examples),
    }


def content_key(c: Candidate) -> tuple[str, str, str, str, tuple[str, ...]]:
    """A hashable key of everything :func:`candidate_fields` reads from ``c``."""
    params = json.dumps(c.parameters, sort_keys=True, default=str) if c.parameters else ""
    return (c.id, c.name, c.description, params, c.examples)


def joined(parts: Iterable[str]) -> str:
    """Join non-empty parts with newlines."""
    return "\n".join(p for p in parts if p)
