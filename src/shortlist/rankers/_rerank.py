"""The rerank ranker: a remote rerank endpoint re-orders the top of a local first stage.

The remote contract is the reference rerank script's: POST ``{"query", "documents",
"top_k"}`` with ``Authorization: Bearer <key>`` to ``RERANK_URL`` (key in
``RERANK_API_KEY``), documents being ``"<name>: <description>"``; results come back by
``index``. Answers in the Cohere (``results[{index, relevance_score}]``), Jina (the same
plus ``document``), Voyage (``data[{index, relevance_score}]``), TEI (a bare list of
``{index, score}``) and Elasticsearch (``rerank[...]``) shapes are all understood.

A local first stage (hybrid by default; ``bm25`` or ``embedding`` on request) picks the
``candidates_n`` documents sent. With no endpoint configured, or when the endpoint fails
(an HTTP error, a timeout, an unreadable answer), the first stage's order is the answer
and a :class:`RerankFallback` event says why; the ranker never fails because of the remote.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx
import numpy as np

from shortlist._events import Event, emit
from shortlist._model_guard import check_model_request
from shortlist._types import Candidate, Query
from shortlist.embeddings._base import Embedder
from shortlist.errors import UsageError
from shortlist.rankers._base import Abstention, Ranker, Scores, candidate_text
from shortlist.rankers._embedding import make_abstention
from shortlist.selection._base import SelectorContext

__all__ = ["RerankFallback", "RerankRanker", "parse_rerank_response"]

FirstStage = Literal["hybrid", "bm25", "embedding"]
Protocol = Literal["default", "cohere", "voyage", "tei"]


@dataclass(frozen=True, kw_only=True)
class RerankFallback(Event):
    """The remote reranker was not used; the first stage's order was returned.

    ``reason``: ``not_configured`` (DEBUG) or ``error`` (WARNING, with ``error``).
    """

    name: ClassVar[str] = "rankers.rerank_fallback"
    area: ClassVar[str] = "rankers"
    level: int = logging.WARNING
    ranker: str = ""
    reason: str = ""
    error: str = ""


def parse_rerank_response(payload: Any, count: int) -> list[tuple[int, float]]:
    """Normalise a rerank answer to ``[(index, score)]`` in the order given.

    Accepts ``{"results": [...]}`` (Cohere, Jina, the reference), ``{"data": [...]}``
    (Voyage), ``{"rerank": [...]}`` (Elasticsearch) and a bare list (TEI); each item has
    ``index`` and one of ``relevance_score`` / ``score``. Indexes outside ``0..count-1``
    and repeated indexes are dropped.

    Raises:
        ValueError: the payload has none of these shapes.
    """
    if isinstance(payload, Mapping):
        items = next((payload[k] for k in ("results", "data", "rerank") if isinstance(payload.get(k), list)), None)
    else:
        items = payload if isinstance(payload, list) else None
    if items is None:
        raise UsageError("rerank response has no results/data/rerank list")
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for rank, item in enumerate(items):
        if not isinstance(item, Mapping) or isinstance(item.get("index"), bool):
            raise UsageError(f"rerank result {rank} is not an object with an index")
        try:
            index = int(item["index"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"rerank result {rank} has no integer index") from exc
        raw = item.get("relevance_score", item.get("score"))
        score = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else -float(rank)
        if 0 <= index < count and index not in seen:
            seen.add(index)
            out.append((index, score))
    return out


class RerankRanker(Ranker):
    """A remote reranker over a local first stage, falling back to the first stage.

    Args:
        name: registered name.
        url: the rerank endpoint (default: ``$RERANK_URL``).
        api_key: the key (default: the variable named by ``api_key_env``).
        api_key_env: where the key is read from (``RERANK_API_KEY``).
        model: sent as ``model`` when set (Cohere, Jina, Voyage need it).
        protocol: request body shape: ``default`` (``{query, documents, top_k}``, the
            reference), ``cohere`` (``top_n``, for Cohere and Jina), ``voyage``
            (``top_k``), ``tei`` (``{query, texts}``).
        first_stage: ``hybrid``, ``bm25`` or ``embedding``: picks what is sent and is the fallback.
        candidates_n: how many first-stage candidates are sent.
        timeout_s: the HTTP timeout (the reference uses 2.5 s).
        top_k: how many to return when the query does not say.
        abstention: abstention on the first stage's confidence (see that ranker).
        min_score: shorthand for ``Abstention(min_score=...)``.
        min_margin: shorthand for ``Abstention(min_margin=...)``.
        embedder: the embedding provider of the first stage (overridden by :meth:`init`'s).
        transport: an httpx transport (tests, proxies).
    """

    def __init__(
        self,
        *,
        name: str = "rerank",
        url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "RERANK_API_KEY",
        model: str | None = None,
        protocol: Protocol = "default",
        first_stage: FirstStage = "hybrid",
        candidates_n: int = 50,
        timeout_s: float = 2.5,
        top_k: int = 10,
        abstention: Abstention | Mapping[str, Any] | None = None,
        min_score: float | None = None,
        min_margin: float | None = None,
        embedder: Embedder | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(name=name, top_k=top_k, abstention=make_abstention(abstention, min_score, min_margin))
        if protocol not in ("default", "cohere", "voyage", "tei"):
            raise UsageError(f"protocol must be default, cohere, voyage or tei, got {protocol!r}")
        if candidates_n < 1 or timeout_s <= 0:
            raise UsageError("candidates_n must be >= 1 and timeout_s > 0")
        self._url = url
        self._api_key = api_key
        self.api_key_env = api_key_env
        self.model = model
        self.protocol: Protocol = protocol
        self.candidates_n = candidates_n
        self.timeout_s = timeout_s
        self._transport = transport
        self.first_stage = _first_stage(first_stage, name, top_k, embedder)

    @property
    def url(self) -> str | None:
        """The endpoint in use (the constructor's, else ``$RERANK_URL``), or None."""
        return self._url or os.environ.get("RERANK_URL") or None

    def _key(self) -> str | None:
        return self._api_key or os.environ.get(self.api_key_env) or None

    def init(self, ctx: SelectorContext) -> None:
        """Pass the shared embedding provider to the first stage."""
        self.first_stage.init(ctx)

    def _body(self, query: str, documents: list[str], k: int) -> dict[str, Any]:
        if self.protocol == "tei":
            body: dict[str, Any] = {"query": query, "texts": documents}
        elif self.protocol == "cohere":
            body = {"query": query, "documents": documents, "top_n": k}
        else:
            body = {"query": query, "documents": documents, "top_k": k}
        if self.model and self.protocol != "tei":
            body["model"] = self.model
        return body

    def remote(self, query: str, documents: list[str], k: int) -> list[tuple[int, float]]:
        """Call the endpoint; return ``[(index into documents, score)]`` best first.

        Raises:
            httpx.HTTPError: transport failure or an HTTP error status.
            ValueError: the answer is not a known rerank shape.
            ModelRequestBlocked: inside a test suite, the URL is not a loopback host.
        """
        url = self.url
        if not url:
            raise UsageError("no rerank URL configured")
        check_model_request(url, who=self.name, test_double=isinstance(self._transport, httpx.MockTransport))
        headers = {"Content-Type": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        with httpx.Client(timeout=self.timeout_s, transport=self._transport) as client:
            response = client.post(url, json=self._body(query, documents, k), headers=headers)
            response.raise_for_status()
            return parse_rerank_response(response.json(), len(documents))

    def score_with_confidence(self, query: Query, candidates: Sequence[Candidate]) -> tuple[Scores, Scores]:
        """First-stage scores with the remote order laid over the top ``candidates_n``."""
        base, confidence = self.first_stage.score_with_confidence(query, candidates)
        base = np.asarray(base, dtype=np.float64)
        if not self.url:
            emit(RerankFallback(ranker=self.name, reason="not_configured", level=logging.DEBUG))
            return base, confidence
        n = min(self.candidates_n, len(candidates))
        top = np.argsort(-base, kind="stable")[:n]
        documents = [candidate_text(candidates[int(i)]) for i in top]
        try:
            ranked = self.remote(query.text, documents, min(query.k or self.top_k, n))
            if not ranked:
                raise UsageError("the rerank endpoint returned no results")
        except (httpx.HTTPError, ValueError) as exc:
            emit(RerankFallback(ranker=self.name, reason="error", error=f"{type(exc).__name__}: {exc}"[:500]))
            return base, confidence
        # Reranked documents come first, in the remote's order; the rest keep first-stage order.
        scores = np.full(len(candidates), -np.inf)
        rest = top[np.isin(np.arange(n), [i for i, _ in ranked], invert=True)]
        order = [int(top[i]) for i, _ in ranked] + [int(i) for i in rest]
        scores[order] = np.arange(len(order), 0, -1, dtype=np.float64) + len(candidates)
        remaining = np.isneginf(scores)
        scores[remaining] = len(candidates) - _rank_positions(base[remaining])
        return scores, confidence

    def score(self, query: Query, candidates: Sequence[Candidate]) -> Scores:
        """Scores whose order is the reranked order (first stage for the rest)."""
        return self.score_with_confidence(query, candidates)[0]


def _rank_positions(scores: Scores) -> Scores:
    order = np.argsort(-scores, kind="stable")
    pos = np.empty(scores.size, dtype=np.float64)
    pos[order] = np.arange(1, scores.size + 1, dtype=np.float64)
    return pos


def _first_stage(kind: str, name: str, top_k: int, embedder: Embedder | None) -> Ranker:
    if kind == "bm25":
        from shortlist.rankers._bm25 import Bm25Ranker

        return Bm25Ranker(name=f"{name}.bm25", top_k=top_k)
    if kind == "embedding":
        from shortlist.rankers._embedding import EmbeddingRanker

        return EmbeddingRanker(name=f"{name}.embedding", top_k=top_k, embedder=embedder)
    if kind == "hybrid":
        from shortlist.rankers._hybrid import HybridRanker

        return HybridRanker(name=f"{name}.hybrid", top_k=top_k, embedder=embedder)
    raise UsageError(f"first_stage must be hybrid, bm25 or embedding, got {kind!r}")
