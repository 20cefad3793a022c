"""The embedding (cosine) ranker: candidates and their usage examples against the query.

Semantics follow the reference cosine selector: a candidate's vector is cached by
``(id, description)`` and embeds the text ``"<name>: <description>"`` (so a renamed
candidate is not re-embedded, a changed description is); every miss of a turn is
embedded in one batch call; the query is embedded on every turn; ``top_k`` defaults to
10; the provider handed to :meth:`EmbeddingRanker.init` overrides the constructor's, and
with neither the embedded default model is used.

Usage examples (``Candidate.examples``: past queries the candidate answered) are embedded
too, cached by their text, and a candidate is scored by its description and its nearest
examples (see :class:`EmbeddingRanker`). Assembled matrices are cached per catalog, so a
stable catalog costs one query embedding plus one matrix-vector product per turn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from shortlist._types import Candidate, Query
from shortlist.embeddings._base import Embedder, matvec
from shortlist.errors import EmbeddingError, UsageError
from shortlist.rankers._base import Abstention, Ranker, Scores, candidate_text
from shortlist.rankers._recent import RecentIndexes
from shortlist.selection._base import SelectorContext

__all__ = [
    "DEFAULT_EXAMPLE_TAU",
    "DEFAULT_EXAMPLE_WEIGHT",
    "EmbeddingRanker",
    "ExampleAggregation",
    "make_abstention",
]

#: How a candidate's example cosines become one score: log-sum-exp or the mean of the nearest.
ExampleAggregation = Literal["lse", "top_mean"]

#: Weight of the example aggregate in the blend with the description cosine (measured in
#: ``docs/evaluation.md``: 0.7 -> 0.75 with tau 0.065 keeps MetaTool with every train example
#: and lifts it with ten examples per tool).
DEFAULT_EXAMPLE_WEIGHT = 0.75
#: Temperature of the log-sum-exp over a candidate's example cosines (0.05 before: softer helps
#: the multi-tool split, 0.808 -> 0.833 with every train example, and ten examples per tool).
DEFAULT_EXAMPLE_TAU = 0.065

_F32 = npt.NDArray[np.float32]
_CATALOG_SLOTS = 4
#: Example vectors are kept in blocks of consecutive candidates of about this many rows, so a catalog
#: whose examples changed (a feedback log's new turn) shares the unchanged blocks with the one before:
#: a new example costs its block (at most twice this), not a copy of every example vector (150 MB at
#: 100,000 examples, 0.4 s of page faults). A row's cosine does not depend on its block.
_EXAMPLE_ROWS = 4096


def make_abstention(
    abstention: Abstention | Mapping[str, Any] | None,
    min_score: float | None = None,
    min_margin: float | None = None,
) -> Abstention | None:
    """Build an :class:`Abstention` from an object, a YAML mapping or the two plain thresholds."""
    if isinstance(abstention, Abstention):
        return abstention
    if isinstance(abstention, Mapping):
        return Abstention(**dict(abstention))
    if abstention is not None:
        raise TypeError(f"abstention must be an Abstention or a mapping, not {type(abstention).__name__}")
    if min_score is None and min_margin is None:
        return None
    return Abstention(min_score=min_score, min_margin=min_margin)


@dataclass(frozen=True, slots=True)
class _Catalog:
    """The matrices of one candidate list, ready for scoring."""

    candidates: tuple[Candidate, ...]
    desc: _F32  # (n, dim)
    examples: tuple[_F32, ...]  # the owners' rows, in blocks of consecutive candidates (see _EXAMPLE_ROWS)
    bounds: tuple[int, ...]  # the first candidate of each block, then len(candidates)
    starts: npt.NDArray[np.intp]  # start of each owner's group in ``examples``
    owners: npt.NDArray[np.intp]  # candidate index of each group
    counts: npt.NDArray[np.intp]  # size of each group
    gather: npt.NDArray[np.intp]  # (groups, widest group) indexes into ``examples``; m for padding


class EmbeddingRanker(Ranker):
    """Cosine similarity between the query and each candidate (and its usage examples).

    With examples, a candidate's score is ``max(desc, (1 - w) * desc + w * ex)``, where
    ``desc`` is the cosine to ``"name: description"``, ``ex`` the aggregate of the cosines
    to its examples and ``w`` the ``example_weight``; a candidate without examples scores
    ``desc`` (so examples only ever lift their own candidate: a candidate without examples
    scores exactly as in a catalog without any). ``ex`` is, with ``example_aggregation="lse"``
    (the default), the log-sum-exp
    ``max + tau * log(sum(exp((s - max) / tau)))`` of the example cosines ``s`` (a soft
    maximum: the nearest example counts most, and several near examples count more than
    one), or with ``"top_mean"`` the mean of the ``example_top`` nearest. Scores stay
    cosine-like, so one abstention threshold serves both.

    Args:
        name: registered name.
        embedder: the provider (overridden by the one given to :meth:`init`; default: the
            embedded default model).
        top_k: how many to return when the query does not say.
        abstention: when to return nothing (an :class:`Abstention` or a mapping of it).
        min_score: shorthand for ``Abstention(min_score=...)`` (cosine units).
        min_margin: shorthand for ``Abstention(min_margin=...)``.
        adaptive_k: see :class:`~shortlist.rankers._base.Ranker`.
        use_examples: score by usage examples too.
        example_weight: weight ``w`` of the example similarity (0..1; default 0.75).
        example_top: how many nearest examples are averaged (``"top_mean"``).
        example_aggregation: ``"lse"`` (log-sum-exp, default) or ``"top_mean"``.
        example_tau: the temperature of ``"lse"`` (cosine units; small: close to the max;
            default 0.065).
        max_examples: keep at most this many examples per candidate (the latest ones).
        vector_cache: a SQLite file where candidate and example vectors persist across
            processes (see :class:`~shortlist.embeddings._cache.CachingEmbedder`).
    """

    def __init__(
        self,
        *,
        name: str = "embedding",
        embedder: Embedder | None = None,
        top_k: int = 10,
        abstention: Abstention | Mapping[str, Any] | None = None,
        min_score: float | None = None,
        min_margin: float | None = None,
        adaptive_k: float | None = None,
        use_examples: bool = True,
        example_weight: float = DEFAULT_EXAMPLE_WEIGHT,
        example_top: int = 3,
        example_aggregation: ExampleAggregation = "lse",
        example_tau: float = DEFAULT_EXAMPLE_TAU,
        max_examples: int = 512,
        vector_cache: str | None = None,
    ) -> None:
        super().__init__(
            name=name,
            top_k=top_k,
            abstention=make_abstention(abstention, min_score, min_margin),
            adaptive_k=adaptive_k,
        )
        if embedder is not None and not isinstance(embedder, Embedder):
            raise TypeError(f"embedder must be a shortlist Embedder, not {type(embedder).__name__}")
        if not 0.0 <= example_weight <= 1.0:
            raise UsageError("example_weight must be between 0 and 1")
        if example_top < 1 or max_examples < 1:
            raise UsageError("example_top and max_examples must be >= 1")
        self.use_examples = use_examples
        self.example_weight = float(example_weight)
        self.example_top = int(example_top)
        if example_aggregation not in ("lse", "top_mean"):
            raise UsageError(f"example_aggregation must be 'lse' or 'top_mean', got {example_aggregation!r}")
        if example_tau <= 0:
            raise UsageError("example_tau must be positive")
        self.example_aggregation: ExampleAggregation = example_aggregation
        self.example_tau = float(example_tau)
        self.max_examples = int(max_examples)
        self.vector_cache = vector_cache
        self._embedder: Embedder | None = self._wrap(embedder) if embedder is not None else None
        self._lock = threading.RLock()
        self._desc_vecs: dict[tuple[str, str], _F32] = {}
        self._example_vecs: dict[str, _F32] = {}
        self._catalogs: RecentIndexes[_Catalog] = RecentIndexes(_CATALOG_SLOTS, lock=self._lock)

    # -- provider ---------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The provider in use (resolving the default model when none was given)."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    from shortlist.embeddings._default import default_embedder

                    self._embedder = self._wrap(default_embedder())
        return self._embedder

    def _wrap(self, embedder: Embedder) -> Embedder:
        """The embedder this ranker uses for ``embedder``: the tools model for the default one, cached if asked."""
        from shortlist.embeddings._default import for_tool_ranking

        embedder = for_tool_ranking(embedder)
        if self.vector_cache is None:
            return embedder
        from shortlist.embeddings._cache import CachingEmbedder

        return CachingEmbedder(embedder, self.vector_cache)

    def init(self, ctx: SelectorContext) -> None:
        """Adopt the shared provider from ``ctx`` (it overrides the constructor's).

        Raises:
            MissingDependencyError: no provider anywhere and the default model is not installed.
        """
        if ctx.embeddings is not None:
            self._set_embedder(ctx.embeddings)
        elif self._embedder is None:
            from shortlist.embeddings._default import TOOL_RANKING_MODEL, default_model_files

            default_model_files(TOOL_RANKING_MODEL)  # fail now if the default model is missing

    def _set_embedder(self, embedder: Embedder) -> None:
        if not isinstance(embedder, Embedder):
            raise TypeError(f"SelectorContext.embeddings must be an Embedder, not {type(embedder).__name__}")
        with self._lock:
            wrapped = self._wrap(embedder)
            current = getattr(self._embedder, "inner", self._embedder) if self.vector_cache else self._embedder
            if (getattr(wrapped, "inner", wrapped) if self.vector_cache else wrapped) is not current:
                self._embedder = wrapped
                self._desc_vecs.clear()
                self._example_vecs.clear()
                self._catalogs.clear()

    # -- index ------------------------------------------------------------------------------

    def _examples_of(self, c: Candidate) -> tuple[str, ...]:
        if not self.use_examples or not c.examples:
            return ()
        return c.examples[-self.max_examples :]

    def _catalog(self, candidates: Sequence[Candidate]) -> _Catalog:
        cands = tuple(candidates)
        # The same candidates with other examples (a feedback log changed): their description matrix
        # is kept, and so are the example blocks of the candidates whose examples did not change.
        return self._catalogs.get(cands, lambda like: self._build(cands, like))

    def _build(self, cands: tuple[Candidate, ...], like: _Catalog | None = None) -> _Catalog:
        """The scoring matrices of ``cands``; ``like``: a catalog of the same candidates but for their
        examples, whose description matrix and unchanged example rows are reused."""
        desc_of = like.desc if like is not None else None
        embedder = self.embedder
        miss_keys: dict[tuple[str, str], str] = {}
        miss_examples: dict[str, None] = {}
        for c in cands:
            key = (c.id, c.description)
            if desc_of is None and key not in self._desc_vecs and key not in miss_keys:
                miss_keys[key] = candidate_text(c)
            for ex in self._examples_of(c):
                if ex not in self._example_vecs:
                    miss_examples[ex] = None
        texts = [*miss_keys.values(), *miss_examples]
        if texts:
            vecs = embedder.embed(texts)  # one batch call for every miss of the turn
            for key, vec in zip(miss_keys, vecs[: len(miss_keys)], strict=True):
                self._desc_vecs[key] = vec
            for ex, vec in zip(miss_examples, vecs[len(miss_keys) :], strict=True):
                self._example_vecs[ex] = vec
        if desc_of is not None:
            desc = desc_of
        else:
            keys = [(c.id, c.description) for c in cands]
            desc = np.stack([self._desc_vecs[key] for key in keys], dtype=np.float32)
            # The memo keeps rows of this matrix, not of the batches they came from: one copy of each
            # vector (at 100,000 tools the batch and the matrix would be 150 MB each).
            for key, row in zip(keys, desc, strict=True):
                self._desc_vecs[key] = row
        # Each block's rows: ``like``'s block when none of its candidates changed, else stacked again
        # (and cut where it reaches twice _EXAMPLE_ROWS). A new catalog cuts blocks of _EXAMPLE_ROWS rows;
        # one like another keeps its cuts, so its unchanged blocks are found again.
        dim = desc.shape[1]
        owners: list[int] = []
        counts: list[int] = []
        blocks: list[_F32] = []
        bounds: list[int] = []
        spans = list(pairwise(like.bounds)) if like is not None else [(0, len(cands))]
        limit = _EXAMPLE_ROWS if like is None else 2 * _EXAMPLE_ROWS
        for k, (start, end) in enumerate(spans):
            reused = like is not None and like.candidates[start:end] == cands[start:end]
            cut = start
            rows: list[_F32] = []
            for i in range(start, end):
                exs = self._examples_of(cands[i])
                if exs:
                    owners.append(i)
                    counts.append(len(exs))
                    if not reused:
                        rows.extend(self._example_vecs[e] for e in exs)
                if len(rows) >= limit:
                    bounds.append(cut)
                    blocks.append(np.stack(rows, dtype=np.float32))
                    cut, rows = i + 1, []
            if reused and like is not None:
                bounds.append(start)
                blocks.append(like.examples[k])
            elif cut < end:
                bounds.append(cut)
                blocks.append(np.stack(rows, dtype=np.float32) if rows else np.zeros((0, dim), dtype=np.float32))
        for block in blocks:
            if block.shape[1] != dim:
                raise EmbeddingError(f"{self.name}: example vectors have {block.shape[1]} dims, not {dim}")
        bounds.append(len(cands))
        total = sum(counts)
        count_arr = np.asarray(counts, dtype=np.intp)
        starts = np.concatenate([[0], np.cumsum(count_arr)[:-1]]).astype(np.intp) if counts else count_arr
        width = int(count_arr.max()) if counts else 0
        offsets = np.arange(width, dtype=np.intp)[None, :]
        gather = np.where(offsets < count_arr[:, None], starts[:, None] + offsets, total).astype(np.intp)
        owner_arr = np.asarray(owners, dtype=np.intp)
        return _Catalog(cands, desc, tuple(blocks), tuple(bounds), starts, owner_arr, count_arr, gather)

    # -- scoring ----------------------------------------------------------------------------

    def embed_query(self, text: str) -> _F32:
        """Embed the query text (one call to the provider).

        Raises:
            EmbeddingError: the provider failed or returned no vector.
        """
        vecs = self.embedder.embed_queries([text])
        if vecs.shape[0] != 1 or vecs.shape[1] == 0:
            raise EmbeddingError(f"{self.name}: the provider returned no vector for the query")
        return np.ascontiguousarray(vecs[0], dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> _F32:
        """Embed several query texts in one call to the provider (one row each).

        Raises:
            EmbeddingError: the provider failed or returned the wrong number of vectors.
        """
        if len(texts) == 1:
            return self.embed_query(texts[0])[None, :]
        vecs = np.asarray(self.embedder.embed_queries(list(texts)), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts) or vecs.shape[1] == 0:
            raise EmbeddingError(f"{self.name}: the provider returned {vecs.shape[0]} vectors for {len(texts)} queries")
        return np.ascontiguousarray(vecs)

    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        """Cosine scores, one per candidate (description blended with the nearest examples)."""
        if not candidates:
            return np.zeros(0, dtype=np.float64)
        held = self._catalogs.superset(tuple(candidates))
        if held is not None:  # most of an indexed catalog: its cosines, read at their places
            entry, positions = held
            return self.score_vector(self.embed_query(query.text), entry)[positions]
        cat = self._catalog(candidates)
        return self.score_vector(self.embed_query(query.text), cat)

    def score_vector(self, qvec: _F32, cat: _Catalog, *, desc: _F32 | None = None) -> Scores:
        """Score a prepared catalog against an already embedded query.

        Args:
            qvec: the query vector.
            cat: the catalog's matrices (:meth:`prepare`).
            desc: the description cosines, when the caller computed them (an adapter's blend).
        """
        if qvec.shape[0] != cat.desc.shape[1]:
            raise EmbeddingError(
                f"{self.name}: query vector has {qvec.shape[0]} dims, candidates have {cat.desc.shape[1]}"
            )
        if desc is None:
            desc = matvec(cat.desc, qvec)
        scores = desc.astype(np.float64)
        if cat.owners.size:
            sims = np.concatenate([matvec(block, qvec) for block in cat.examples if block.shape[0]])
            ex = self._aggregate(sims, cat)
            own = desc[cat.owners].astype(np.float64)
            w = self.example_weight
            scores[cat.owners] = np.maximum(own, (1.0 - w) * own + w * ex)
        return scores

    def _aggregate(self, sims: _F32, cat: _Catalog) -> npt.NDArray[np.float64]:
        if self.example_aggregation == "lse":
            return self._log_sum_exp(sims, cat)
        return self._nearest_mean(sims, cat)

    def _log_sum_exp(self, sims: _F32, cat: _Catalog) -> npt.NDArray[np.float64]:
        # Per owner: max + tau * log(sum(exp((s - max) / tau))), computed on the flat vector.
        s = sims.astype(np.float64)
        best = np.maximum.reduceat(s, cat.starts)
        spread = np.exp((s - np.repeat(best, cat.counts)) / self.example_tau)
        return np.asarray(best + self.example_tau * np.log(np.add.reduceat(spread, cat.starts)), dtype=np.float64)

    def _nearest_mean(self, sims: _F32, cat: _Catalog) -> npt.NDArray[np.float64]:
        if self.example_top == 1:
            return np.maximum.reduceat(sims, cat.starts).astype(np.float64)
        # Gather each owner's similarities into a padded row (-inf pads), keep the top ones.
        padded = np.append(sims, np.float32(-np.inf))[cat.gather]
        width = padded.shape[1]
        top = min(self.example_top, width)
        best = np.partition(padded, width - top, axis=1)[:, width - top :].astype(np.float64)
        valid = np.isfinite(best)
        total = np.where(valid, best, 0.0).sum(axis=1)
        return np.asarray(total / np.maximum(valid.sum(axis=1), 1), dtype=np.float64)

    def scoring_catalog(self, candidates: Sequence[Candidate]) -> _Catalog:
        """Embed what is missing for ``candidates`` and return their scoring matrices (cached).

        (Not :meth:`prepare`, the warm-up every selector has: the hybrid scores through these
        matrices directly.)
        """
        return self._catalog(candidates)

    def indexed_superset(
        self, candidates: Sequence[Candidate]
    ) -> tuple[tuple[Candidate, ...], npt.NDArray[np.int64]] | None:
        """A catalog indexed already that holds ``candidates`` in its order, and their positions in it
        (:meth:`~shortlist.rankers._recent.RecentIndexes.superset`; None: index them alone)."""
        held = self._catalogs.superset(tuple(candidates))
        return None if held is None else (held[0].candidates, held[1])

    def warm(self, candidates: Sequence[Candidate]) -> float:
        """Embed ``candidates`` (and their examples) and load the embedder's query path ahead of the first
        query; return the seconds spent."""
        start = time.perf_counter()
        self._catalog(candidates)
        self.embedder.load()  # the query session (and, once per machine, the int8 query model)
        return time.perf_counter() - start
