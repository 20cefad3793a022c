"""What the lexical rankers index of a candidate, and the analyser they index it with.

Terms come from :mod:`shortlist._text`'s ``tools`` preset: snake_case, camelCase, dotted and
hyphenated identifiers and every punctuation mark split, lowercased, English stopwords dropped,
Snowball English stems (one stemmer per thread, stems memoised).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from shortlist._text import Analyser, analyser, stopword_list
from shortlist._types import Candidate
from shortlist.errors import UsageError

__all__ = [
    "STOPWORD_SETS",
    "Analyzer",
    "candidate_fields",
    "content_key",
    "joined",
    "parameter_text",
    "same_but_examples",
    "split_words",
    "tool_analyser",
]

#: The stopword lists a lexical ranker accepts: ``"en"`` (Lucene's 33 words, what bm25s uses),
#: ``"en_plus"`` (a longer English list that also drops "can", "you", "me", …), ``"none"``.
STOPWORD_SETS: dict[str, frozenset[str]] = {name: stopword_list(name) for name in ("en", "en_plus", "none")}


def tool_analyser(*, stopwords: str = "en", stem: bool = True) -> Analyser:
    """The ``tools`` preset with the ranker's ``stopwords`` (a key of :data:`STOPWORD_SETS`) and ``stem``.

    Raises:
        ValueError: an unknown stopword list.
    """
    if stopwords not in STOPWORD_SETS:
        raise UsageError(f"unknown stopwords {stopwords!r}; expected one of {sorted(STOPWORD_SETS)}")
    return analyser("tools", stopwords=stopwords, stem="english" if stem else None)


#: The former name of :func:`tool_analyser`.
Analyzer = tool_analyser

_WORDS = analyser("tools").words


def split_words(text: str) -> list[str]:
    """Split ``text`` into lowercase words at case changes, underscores, dots and punctuation.

    Args:
        text: any text, identifiers included (``get_current_weather``, ``fetchURL``, ``fs.read``).

    Returns:
        The lowercase words, in order (no stopword removal, no stemming).
    """
    return _WORDS(text)


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


def same_but_examples(a: tuple[Candidate, ...], b: tuple[Candidate, ...]) -> bool:
    """True when ``a`` and ``b`` hold the same candidates in the same order, but for their examples.

    A feedback log's examples are new candidate objects whenever the log changes; what does not
    read the examples (a BM25 index's main field, the names and servers of the scale levers) is
    then kept instead of rebuilt. Identical objects are compared by identity, at C speed.
    """
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is y:
            continue
        if (
            x.id != y.id
            or x.name != y.name
            or x.description != y.description
            or (x.metadata is not y.metadata and x.metadata != y.metadata)
            or (x.parameters is not y.parameters and x.parameters != y.parameters)
        ):
            return False
    return True


def joined(parts: Iterable[str]) -> str:
    """Join non-empty parts with newlines."""
    return "\n".join(p for p in parts if p)
