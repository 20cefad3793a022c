"""BM25 ranking on ``bm25s``, served from indexes cached by the candidates' content.

Each candidate becomes a document made of its name, description and parameter names and
descriptions (see :mod:`shortlist.rankers._text`). Its example queries (from configuration
or the feedback log) are either merged into that document or, by default, indexed as a
second field whose score is added with its own weight (``examples_mode``; measured on
MetaTool in ``docs/evaluation.md``).

Per-call candidate sets are matched against a small LRU of indexes by tuple equality:
element identity first (a C-speed pointer comparison, no hashing of text), then candidate
equality (so a reloaded but unchanged catalog is not re-indexed either). A changed
description or a new example builds a new index; the terms of unchanged candidates are
re-used from a term cache, so only the changed ones are re-tokenised.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import bm25s
import numpy as np

from shortlist._types import Candidate, Query, Selection
from shortlist.errors import UsageError
from shortlist.rankers._base import Abstention, Ranker, Scores
from shortlist.rankers._recent import RecentIndexes
from shortlist.rankers._text import candidate_fields, content_key, joined, tool_analyser

__all__ = ["FUSED_EXAMPLES_WEIGHT", "Bm25Ranker", "ExamplesMode"]

ExamplesMode = Literal["field", "merge"]

# bm25s sets its own logger to DEBUG, which would print "Building index" lines through any
# root handler (the CLI's included); keep it at WARNING unless the application lowers it.
if logging.getLogger("bm25s").level < logging.WARNING:
    logging.getLogger("bm25s").setLevel(logging.WARNING)

#: The examples field's weight when BM25 is fused with the embedding side (the hybrid ranker):
#: there the examples also score through their cosines, and 1.0 beats BM25 alone's 2.0
#: (MetaTool, every train example: multi split 0.808 -> 0.816 at once; ten per tool: +0.003).
FUSED_EXAMPLES_WEIGHT = 1.0

_MainKey = tuple[str, str, str, str]  # content_key without the examples
_MAX_TERM_CACHE = 250_000


@dataclass(slots=True)
class _Field:
    bm25: Any
    vocab: dict[str, int]
    idf: dict[str, float]
    max_idf: float

    def ceiling(self, terms: list[str]) -> float:
        """The most a document can score for ``terms``: Σ idf (an unseen term counts as the rarest)."""
        return sum(self.idf.get(t, self.max_idf) for t in terms)

    def scores(self, terms: list[str], n: int) -> Scores:
        ids = [self.vocab[t] for t in terms if t in self.vocab]
        if not ids:
            return np.zeros(n, dtype=np.float64)
        return np.asarray(self.bm25.get_scores_from_ids(ids), dtype=np.float64)


@dataclass(slots=True)
class _Index:
    candidates: tuple[Candidate, ...]  # strong references keep the identity key valid
    main: _Field | None
    examples: _Field | None
    build_s: float


def _field_index(docs: list[list[str]], k1: float, b: float) -> _Field | None:
    if not any(docs):
        return None
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.index(docs, show_progress=False)
    n = len(docs)
    df = Counter(t for d in docs for t in set(d))
    idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
    return _Field(retriever, dict(retriever.vocab_dict), idf, math.log(1 + (n + 0.5) / 0.5))


class Bm25Ranker(Ranker):
    """Okapi BM25 (Lucene variant, via ``bm25s``) over names, descriptions, parameters and examples.

    Args:
        name: the name it is registered under.
        top_k: how many to return when the query does not say.
        k1: term-frequency saturation.
        b: length normalisation.
        stopwords: ``"en_plus"`` (default, NLTK's English list), ``"en"`` (Lucene's 33 words) or ``"none"``.
        stem: Snowball English stemming (default True).
        name_weight: how many times the name's terms count in the document.
        examples_mode: ``"field"`` scores example queries as a separate field added with
            ``examples_weight``; ``"merge"`` appends them to the description's document.
        examples_weight: the weight of the examples field (``"field"`` mode).
        min_score: abstain when the best score is below this (BM25 units).
        min_margin: abstain when the best score exceeds the median by less than this.
        adaptive_k: cut where the score falls below this fraction of the best (0–1).
        normalize: divide each turn's scores by the most any document could score for the
            query's terms (Σ idf, an unseen term counting as the rarest), so scores fall in
            [0, 1) and one ``min_score`` means the same for short and long queries. The
            ranking is unchanged.
        cache_size: how many indexes (distinct candidate sets) to keep.
    """

    def __init__(
        self,
        *,
        name: str = "bm25",
        top_k: int = 10,
        k1: float = 1.2,
        b: float = 0.75,
        stopwords: str = "en_plus",
        stem: bool = True,
        name_weight: int = 1,
        examples_mode: ExamplesMode = "field",
        examples_weight: float = 2.0,
        min_score: float | None = None,
        min_margin: float | None = None,
        adaptive_k: float | None = None,
        normalize: bool = False,
        cache_size: int = 4,
    ) -> None:
        abstention = Abstention(min_score, min_margin) if min_score is not None or min_margin is not None else None
        super().__init__(name=name, top_k=top_k, abstention=abstention, adaptive_k=adaptive_k)
        if k1 < 0 or not 0 <= b <= 1:
            raise UsageError("k1 must be >= 0 and b between 0 and 1")
        if examples_mode not in ("field", "merge"):
            raise UsageError(f"examples_mode must be 'field' or 'merge', got {examples_mode!r}")
        if name_weight < 0 or examples_weight < 0 or cache_size < 1:
            raise UsageError("name_weight and examples_weight must be >= 0, cache_size >= 1")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = tool_analyser(stopwords=stopwords, stem=stem)
        self.name_weight = int(name_weight)
        self.examples_mode: ExamplesMode = examples_mode
        self.examples_weight = float(examples_weight)
        self.normalize = bool(normalize)
        self.cache_size = cache_size
        #: Number of indexes built so far (for diagnostics and tests).
        self.index_builds = 0
        self._lock = threading.Lock()  # builds, and the term caches they fill
        self._entries: RecentIndexes[_Index] = RecentIndexes(cache_size, lock=self._lock)
        self._terms: dict[_MainKey, list[str]] = {}
        self._example_cache: dict[tuple[str, ...], list[str]] = {}

    # -- indexing -------------------------------------------------------------------------

    def _main_terms(self, c: Candidate) -> list[str]:
        """The terms of ``c``'s main field: name, description, parameters (cached by those, not the examples)."""
        key: _MainKey = content_key(c)[:4]
        cached = self._terms.get(key)
        if cached is None:
            f = candidate_fields(c)
            tok = self.analyzer.tokens
            cached = tok(f["name"]) * self.name_weight + tok(joined((f["description"], f["parameters"])))
            if len(self._terms) >= _MAX_TERM_CACHE:
                self._terms.clear()
            self._terms[key] = cached
        return cached

    def _example_terms(self, c: Candidate) -> list[str]:
        """The terms of ``c``'s examples field (cached by the examples)."""
        if not c.examples:
            return []
        cached = self._example_cache.get(c.examples)
        if cached is None:
            cached = self.analyzer.tokens(candidate_fields(c)["examples"])
            if len(self._example_cache) >= _MAX_TERM_CACHE:
                self._example_cache.clear()
            self._example_cache[c.examples] = cached
        return cached

    def _build(self, candidates: tuple[Candidate, ...], main_of: _Index | None = None) -> _Index:
        """Index ``candidates``; ``main_of``: an index of the same candidates but for their examples,
        whose main field is kept (``"field"`` mode: only the examples field is built)."""
        start = time.perf_counter()
        exs: list[list[str]] = []
        if self.examples_mode == "merge":
            main_field = _field_index(
                [self._main_terms(c) + self._example_terms(c) for c in candidates], self.k1, self.b
            )
        else:
            exs = [self._example_terms(c) for c in candidates]
            main_field = (
                main_of.main
                if main_of is not None
                else _field_index([self._main_terms(c) for c in candidates], self.k1, self.b)
            )
        ex_field = _field_index(exs, self.k1, self.b) if exs and self.examples_weight > 0 else None
        self.index_builds += 1
        return _Index(candidates, main_field, ex_field, time.perf_counter() - start)

    def _index(self, candidates: Sequence[Candidate]) -> _Index:
        cands = candidates if isinstance(candidates, tuple) else tuple(candidates)
        # The same candidates with other examples (a feedback log changed): the main field does not
        # read them, so only the examples field is built (at 10,000 tools, a fifth of the work).
        return self._entries.get(cands, lambda like: self._build(cands, like))

    def warm(self, candidates: Sequence[Candidate]) -> float:
        """Build (or find) the index of ``candidates`` ahead of the first query.

        Returns:
            The seconds it took to build the index (0.0 when it was cached).
        """
        builds = self.index_builds
        index = self._index(candidates)
        return index.build_s if self.index_builds > builds else 0.0

    def clear_cache(self) -> None:
        """Forget every cached index and term list."""
        with self._lock:
            self._entries.clear()
            self._terms.clear()
            self._example_cache.clear()

    # -- scoring --------------------------------------------------------------------------

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """The top ``k`` by BM25, not padded with candidates that share no term with the query.

        When no candidate shares a term, the answer is left as ranked (every score 0.0), so that
        the ranking view of an evaluation still sees a best score of 0 (abstention thresholds and
        their curve need it); a ``min_score`` abstains on it.
        """
        selection = super().select(query, candidates)
        if selection.abstained or selection.scores is None:
            return selection
        keep = [(i, s) for i, s in zip(selection.selected, selection.scores, strict=True) if s > 0]
        if len(keep) == len(selection.selected):
            return selection
        if not keep:
            return selection
        return Selection(tuple(i for i, _ in keep), reason=selection.reason, scores=tuple(s for _, s in keep))

    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        """Return the BM25 score of every candidate (0.0 when it shares no term with the query)."""
        n = len(candidates)
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        cands = candidates if isinstance(candidates, tuple) else tuple(candidates)
        held = self._entries.superset(cands)
        if held is not None:
            # most of an indexed catalog (a search's pool): scored among it, not indexed again; each
            # score is the candidate's own, with the catalog's term weights
            entry, positions = held
            return self.score(query, entry.candidates)[positions]
        index = self._index(cands)
        terms = self.analyzer.tokens(query.text)
        scores = index.main.scores(terms, n) if index.main is not None else np.zeros(n, dtype=np.float64)
        if index.examples is not None:
            scores += self.examples_weight * index.examples.scores(terms, n)
        if self.normalize and terms:
            ceiling = index.main.ceiling(terms) if index.main is not None else 0.0
            if index.examples is not None:
                ceiling += self.examples_weight * index.examples.ceiling(terms)
            if ceiling > 0:
                scores /= ceiling
        return scores
