"""The one text analyser: how every lexical path of shortlist turns text into terms.

An :class:`Analyser` is a fixed pipeline, set by four parameters:

1. ``camel``: split identifiers at case changes first (``"lower"``: ``getWeather`` → ``get
   Weather``; ``"full"`` also ``HTTPServer`` → ``HTTP Server``; ``"none"``);
2. lowercase, then find the words with ``pattern``: ``"word"`` (runs of letters and digits of
   any script: underscores, dots and punctuation split), ``"word2"`` (``bm25s``'s and
   scikit-learn's default ``\\b\\w\\w+\\b``: two or more word characters, underscores kept),
   ``"ascii"`` (runs of ``a-z0-9``) or ``"space"`` (whitespace split);
3. drop ``stopwords``, a named list of :data:`STOPWORD_LISTS` (or a set of words);
4. ``stem`` with the Snowball stemmer of a language (PyStemmer), or not at all.

The callers use named presets (:data:`PRESETS`), each reproducing what that path did before
there was one analyser (``tests/test_text_analyser.py`` holds the goldens):

=============  ======================================================================
``tools``      the BM25 ranker's tool documents and queries (identifiers split, NLTK's list)
``corpus``     memories, the corpus index (embedded and Qdrant), the hashing embedder
``bm25s``      the reduction stage's BM25 over conversation steps (``bm25s.tokenize``'s analysis)
``lexical``    the dependency-free TF-IDF selector (ASCII words, camelCase split, no stemming)
``ascii``      the test double :class:`shortlist.testing.HashEmbedder` (ASCII words only)
``whitespace`` the reference's token-overlap baseline (lowercase, whitespace split)
=============  ======================================================================

:attr:`Analyser.signature` names the preset, its parameters and :data:`ANALYSER_VERSION`;
indexes store it and refuse to load under another analyser (their terms would not match).

PyStemmer objects must not be shared between threads: each thread gets its own stemmer, and
stems are memoised per language and word in a (thread-safe) LRU cache.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

from shortlist.errors import UsageError

__all__ = [
    "ANALYSER_VERSION",
    "PRESETS",
    "STOPWORD_LISTS",
    "Analyser",
    "analyser",
    "stopword_list",
]

#: Bumped whenever a preset's output changes on purpose (stored indexes must then be rebuilt).
ANALYSER_VERSION: Final = 1

Pattern = Literal["word", "word2", "ascii", "space"]
Camel = Literal["none", "lower", "full"]

_PATTERNS: dict[str, re.Pattern[str]] = {
    "word": re.compile(r"[^\W_]+"),
    "word2": re.compile(r"(?u)\b\w\w+\b"),
    "ascii": re.compile(r"[a-z0-9]+"),
}
# "HTTPServer" -> "HTTP Server"; "getWeather" -> "get Weather", "v2Api" -> "v2 Api".
_CAMEL_UPPER = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")
_CAMEL_LOWER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# The memory store's and corpus index's list: English function words, and the request words
# that carry no topic on their own ("please tell me", "I want", "give").
_EN_MEMORY = """
    a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves please tell give get got want need like
    know make also use using used one s t
"""
# The dependency-free lexical selector's list: question and request words of tool queries.
_EN_LEXICAL = """
    a s t an and are as at be by can do for from get how i in is it me my of on or please the this to
    what when where which who will with you your
"""


def _bm25s_list(name: str) -> frozenset[str]:
    from bm25s import stopwords

    return frozenset(getattr(stopwords, name))


_STOPWORD_LOADERS: dict[str, Callable[[], frozenset[str]]] = {
    "en": lambda: _bm25s_list("STOPWORDS_EN"),
    "en_plus": lambda: _bm25s_list("STOPWORDS_EN_PLUS"),
    "en_memory": lambda: frozenset(_EN_MEMORY.split()),
    "en_lexical": lambda: frozenset(_EN_LEXICAL.split()),
    "none": frozenset,
}

#: The named stopword lists: ``en`` (Lucene's 33 words, what ``bm25s`` uses), ``en_plus``
#: (``bm25s``'s longer English list: also "can", "you", "me", …), ``en_memory`` (function words
#: and request words, for memories and documents), ``en_lexical`` (the lexical selector's 38
#: words) and ``none``.
STOPWORD_LISTS: Final = tuple(_STOPWORD_LOADERS)


@functools.cache
def stopword_list(name: str) -> frozenset[str]:
    """The words of the named stopword list.

    Raises:
        ValueError: an unknown list.
    """
    loader = _STOPWORD_LOADERS.get(name)
    if loader is None:
        raise UsageError(f"unknown stopwords {name!r}; expected one of {sorted(_STOPWORD_LOADERS)}")
    return loader()


_local = threading.local()
_stem_lock = threading.Lock()
_stem_fns: dict[str, Callable[[str], str]] = {}


def _thread_stemmer(language: str) -> Any:
    """This thread's PyStemmer stemmer for ``language`` (PyStemmer objects are not thread-safe)."""
    stemmers: dict[str, Any] | None = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    stemmer = stemmers.get(language)
    if stemmer is None:
        import Stemmer

        stemmer = stemmers[language] = Stemmer.Stemmer(language)
    return stemmer


def _stemmer(language: str) -> Callable[[str], str]:
    """The memoised stem function of ``language`` (one LRU cache per language, shared by threads).

    Raises:
        ValueError: PyStemmer has no stemmer for ``language``.
    """
    fn = _stem_fns.get(language)
    if fn is not None:
        return fn
    with _stem_lock:
        fn = _stem_fns.get(language)
        if fn is None:
            _thread_stemmer(language)  # raises KeyError for an unknown language

            @functools.lru_cache(maxsize=200_000)
            def stem(word: str) -> str:
                return str(_thread_stemmer(language).stemWord(word))

            fn = _stem_fns[language] = stem
    return fn


def _words_sha(words: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(words)).encode("utf-8")).hexdigest()[:12]


class Analyser:
    """Turns text into terms; see the module docstring for the pipeline and the presets.

    Args:
        pattern: how words are found after lowercasing (``word``, ``word2``, ``ascii``, ``space``).
        camel: split identifiers at case changes before lowercasing (``none``, ``lower``, ``full``).
        stopwords: a name of :data:`STOPWORD_LISTS`, or the words themselves.
        stem: the PyStemmer language to stem with, or None.
        preset: the preset this analyser was made from (only named in :attr:`signature`).

    Raises:
        ValueError: an unknown pattern, camel mode, stopword list or stemmer language.
    """

    __slots__ = ("_camel", "_find", "_signature", "_stem", "_stop", "camel", "pattern", "preset", "stem", "stopwords")

    def __init__(
        self,
        *,
        pattern: Pattern = "word",
        camel: Camel = "none",
        stopwords: str | frozenset[str] = "none",
        stem: str | None = None,
        preset: str = "custom",
    ) -> None:
        if pattern not in (*_PATTERNS, "space"):
            raise UsageError(f"unknown pattern {pattern!r}; expected one of {[*_PATTERNS, 'space']}")
        if camel not in ("none", "lower", "full"):
            raise UsageError(f"unknown camel {camel!r}; expected 'none', 'lower' or 'full'")
        self.pattern: Pattern = pattern
        self.camel: Camel = camel
        self.preset = preset
        self.stem = stem
        if isinstance(stopwords, str):
            self.stopwords = stopwords
            self._stop = stopword_list(stopwords)
            stop_id = stopwords
        else:
            self._stop = frozenset(stopwords)
            self.stopwords = "custom"
            stop_id = f"custom:{_words_sha(self._stop)}"
        try:
            self._stem = _stemmer(stem) if stem is not None else None
        except KeyError:
            raise UsageError(f"no stemmer for language {stem!r}") from None
        regex = _PATTERNS.get(pattern)
        self._find: Callable[[str], list[str]] = regex.findall if regex is not None else str.split
        self._camel = camel
        self._signature: dict[str, Any] = {
            "preset": preset,
            "version": ANALYSER_VERSION,
            "pattern": pattern,
            "camel": camel,
            "stopwords": stop_id,
            "stopwords_sha256": _words_sha(self._stop),
            "stem": stem,
        }

    @property
    def signature(self) -> dict[str, Any]:
        """What makes two analysers produce the same terms: preset, parameters, version (JSON-ready)."""
        return dict(self._signature)

    def same_terms(self, signature: Mapping[str, Any]) -> bool:
        """True when an analyser of ``signature`` produces the same terms as this one (the preset's name aside)."""
        mine = {k: v for k, v in self._signature.items() if k != "preset"}
        return mine == {k: v for k, v in signature.items() if k != "preset"}

    def __repr__(self) -> str:
        sig = self._signature
        params = f"pattern={self.pattern!r}, camel={self.camel!r}, stopwords={sig['stopwords']!r}, stem={self.stem!r}"
        return f"Analyser({sig['preset']!r}, {params})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Analyser) and self._signature == other._signature

    def __hash__(self) -> int:
        return hash(tuple(self._signature.values()))

    def words(self, text: str) -> list[str]:
        """The lowercase words of ``text`` in order (identifiers split as set; no stopwords dropped, no stems)."""
        if self._camel == "full":
            text = _CAMEL_LOWER.sub(" ", _CAMEL_UPPER.sub(" ", text))
        elif self._camel == "lower":
            text = _CAMEL_LOWER.sub(" ", text)
        return self._find(text.lower())

    def tokens(self, text: str, *, keep_stopwords: bool = False) -> list[str]:
        """The terms of ``text`` in order, duplicates kept (term frequency matters to BM25).

        Args:
            text: any text.
            keep_stopwords: keep stopwords (stemmed like the rest).
        """
        words = self.words(text)
        if not keep_stopwords and self._stop:
            stop = self._stop
            words = [w for w in words if w not in stop]
        stem = self._stem
        return [stem(w) for w in words] if stem is not None else words

    def terms(self, text: str) -> list[str]:
        """The distinct terms of ``text`` in first-seen order; stopwords only when nothing else is left."""
        toks = self.tokens(text) or self.tokens(text, keep_stopwords=True)
        return list(dict.fromkeys(toks))

    def content_words(self, text: str) -> list[str]:
        """The distinct words of ``text`` without stopwords (all words if only stopwords), unstemmed.

        For engines that stem themselves (SQLite FTS5 ``porter``, PostgreSQL ``english``).
        """
        words = self.words(text)
        kept = [w for w in words if w not in self._stop] or words
        return list(dict.fromkeys(kept))


#: The named presets: the parameters of each (see the module docstring for who uses which).
PRESETS: Final[Mapping[str, Mapping[str, Any]]] = {
    "tools": {"pattern": "word", "camel": "full", "stopwords": "en_plus", "stem": "english"},
    "corpus": {"pattern": "word", "camel": "none", "stopwords": "en_memory", "stem": "english"},
    "bm25s": {"pattern": "word2", "camel": "none", "stopwords": "en", "stem": "english"},
    "lexical": {"pattern": "ascii", "camel": "lower", "stopwords": "en_lexical", "stem": None},
    "ascii": {"pattern": "ascii", "camel": "none", "stopwords": "none", "stem": None},
    "whitespace": {"pattern": "space", "camel": "none", "stopwords": "none", "stem": None},
}


def analyser(preset: str, **overrides: Any) -> Analyser:
    """The analyser of a named preset, with some parameters overridden (``stopwords=``, ``stem=``, …).

    Analysers hold no per-call state and are safe to share between threads; equal requests
    return the same instance.

    Raises:
        ValueError: an unknown preset or parameter value.
    """
    if preset not in PRESETS:
        raise UsageError(f"unknown analyser preset {preset!r}; expected one of {sorted(PRESETS)}")
    return _cached(preset, tuple(sorted(overrides.items())))


@functools.lru_cache(maxsize=64)
def _cached(preset: str, overrides: tuple[tuple[str, Any], ...]) -> Analyser:
    params = {**PRESETS[preset], **dict(overrides)}
    return Analyser(preset=preset, **params)
