"""The ranker contract: score every candidate; the base turns scores into a Selection.

A :class:`Ranker` is a :class:`~shortlist.selection.Selector` whose subclasses implement
one method, :meth:`Ranker.score`. The base applies the shared policy: ``k`` (fixed, or
adaptive where the score gap says the rest is irrelevant; never more than asked) and
:class:`Abstention` (return nothing when nothing fits).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from shortlist._types import Candidate, Query, Selection
from shortlist.errors import UsageError
from shortlist.selection._base import Selector

__all__ = ["Abstention", "Ranker", "Scores", "candidate_text"]

Scores = npt.NDArray[np.float64]

#: The stand-in query of :meth:`Ranker.prepare` (the one warm-up ranking).
WARM_UP_QUERY = "warm up"
#: What :meth:`Ranker.prepare` ranks when it is given no catalog (the model loads all the same).
WARM_UP_CANDIDATES = (
    Candidate(id="warm_up_send_email", description="Send an email to a recipient."),
    Candidate(id="warm_up_weather", description="Get the weather forecast for a city."),
)


def candidate_text(c: Candidate) -> str:
    """The text a ranker embeds or indexes for ``c``: ``"<name>: <description>"``."""
    return f"{c.name}: {c.description}" if c.description else c.name


@dataclass(frozen=True, slots=True)
class Abstention:
    """When to answer "nothing fits".

    Args:
        min_score: abstain when the best score is below this (in the ranker's score units).
        min_margin: abstain when the best score exceeds the median score by less than this.
    """

    min_score: float | None = None
    min_margin: float | None = None

    def abstains(self, scores: Scores) -> bool:
        """Return True when these scores say that nothing fits."""
        if scores.size == 0:
            return True
        best = float(scores.max())
        if self.min_score is not None and best < self.min_score:
            return True
        return self.min_margin is not None and best - float(np.median(scores)) < self.min_margin


class Ranker(Selector):
    """A selector that scores candidates.

    Args:
        name: the name it is registered under.
        top_k: how many to return when the query does not say (``query.k == 0``).
        abstention: when to return nothing (None: never abstain).
        adaptive_k: cut the list where the score drops below ``adaptive_k`` times the best
            score (0 < adaptive_k < 1), keeping at least one; None keeps ``k``.
    """

    def __init__(
        self,
        *,
        name: str,
        top_k: int = 10,
        abstention: Abstention | None = None,
        adaptive_k: float | None = None,
    ) -> None:
        if top_k <= 0:
            raise UsageError("top_k must be positive")
        if adaptive_k is not None and not 0 < adaptive_k < 1:
            raise UsageError("adaptive_k must be between 0 and 1")
        self.name = name
        self.top_k = top_k
        self.abstention = abstention
        self.adaptive_k = adaptive_k

    @abstractmethod
    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        """Return one score per candidate (higher is better), aligned with ``candidates``."""

    def score_with_confidence(self, query: Query, candidates: Sequence[Candidate]) -> tuple[Scores, Scores]:
        """Return ``(ranking scores, confidence scores)``; abstention is judged on the second.

        The default uses :meth:`score` for both. A ranker whose ranking scores are not
        calibrated (rank fusion, say) overrides this to judge abstention on a calibrated
        signal such as a cosine.
        """
        scores = self.score(query, candidates)
        return scores, scores

    def prepare(self, candidates: Sequence[Candidate]) -> None:
        """Load the model and index ``candidates`` (empty: a stand-in catalog) with one untimed ranking.

        The one warm-up of every ranker: a ranking of :data:`WARM_UP_QUERY` builds what a
        turn's ranking needs (the model, the candidates' vectors or index) and caches it.
        """
        self.select(Query(WARM_UP_QUERY), candidates or WARM_UP_CANDIDATES)

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Score, apply abstention, take the top ``k`` (fixed or adaptive)."""
        if not candidates:
            return Selection()
        raw, confidence = self.score_with_confidence(query, candidates)
        scores = np.asarray(raw, dtype=np.float64)
        if scores.shape != (len(candidates),):
            raise UsageError(f"{self.name}: score() returned shape {scores.shape} for {len(candidates)} candidates")
        if self.abstention is not None and self.abstention.abstains(np.asarray(confidence, dtype=np.float64)):
            return Selection(reason="abstained: no candidate fits the query", abstained=True)
        k = min(query.k or self.top_k, len(candidates))
        if k < len(candidates):
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        if self.adaptive_k is not None and top.size:
            best = scores[top[0]]
            keep = [i for i in top if scores[i] >= self.adaptive_k * best] if best > 0 else list(top[:1])
            top = np.asarray(keep or top[:1])
        return Selection(
            tuple(candidates[int(i)].id for i in top),
            scores=tuple(float(scores[int(i)]) for i in top),
        )
