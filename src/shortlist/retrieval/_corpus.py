"""``CorpusRetriever``: what in the host's documents is relevant to *this* turn, or nothing.

The query is the latest user turn. Passages come from an index backend (hybrid BM25 + dense by
default); a calibrated relevance gate then keeps only passages with real evidence, so a turn
with no user text, or one the corpus has nothing for, returns ``[]`` rather than the nearest
unrelated document. Each result is a :class:`~shortlist.memory.Memory` of type ``"document"``
carrying the document id (``metadata["document_id"]``, and ``metadata["citation_id"]`` for the
chunk), the title and the chunk's position.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from shortlist import _telemetry as telemetry
from shortlist._events import Event, emit
from shortlist._text import analyser
from shortlist.embeddings._base import Embedder
from shortlist.errors import ConfigError
from shortlist.memory._record import Memory
from shortlist.retrieval._backends.base import Hit, IndexBackend
from shortlist.retrieval._document import Chunker, Document
from shortlist.selection._query import last_user_text

__all__ = ["DOCUMENT_TYPE", "CorpusRetriever", "GroundingRetrieved", "Relevance", "Scoring"]

#: The ``Memory.type`` of every retrieved passage.
DOCUMENT_TYPE = "document"

Scoring = Literal["hybrid", "lexical", "overlap"]


@dataclass(frozen=True, kw_only=True)
class GroundingRetrieved(Event):
    """The corpus was asked about a turn: how many passages passed the relevance gate."""

    name: ClassVar[str] = "retrieval.grounding"
    area: ClassVar[str] = "retrieval"
    level: int = 10  # DEBUG
    query_chars: int = 0
    candidates: int = 0
    returned: int = 0
    abstained: bool = False
    latency_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Relevance:
    """The gate passages must pass to be injected (the corpus retriever's abstention).

    Two steps. The turn is *answerable* when at least one passage has a cosine to the query of
    ``min_dense``, or of ``min_dense_with_terms`` while containing at least ``min_coverage`` of
    the query's content terms; otherwise nothing is returned. Then every passage returned must
    still reach ``min_dense_rest`` (or be one that made the turn answerable). Without dense
    scores (lexical or overlap scoring) a passage needs ``min_terms_lexical`` distinct query
    terms (all of them for a shorter query) and ``min_coverage_lexical`` of the terms.

    The defaults were chosen for all-MiniLM-L6-v2 on LiveMCPBench server summaries against
    off-topic questions, and checked on a held-out set of off-topic questions (see
    ``docs/memory-and-grounding.md``); another embedding model needs its own values.

    Args:
        min_dense: cosine that makes a turn answerable on its own.
        min_dense_with_terms: cosine that makes it answerable with lexical evidence.
        min_coverage: share of query content terms present, as lexical evidence.
        min_dense_rest: cosine every further passage needs.
        min_terms_lexical: distinct query terms a passage needs without dense scores.
        min_coverage_lexical: share of query content terms needed without dense scores.
    """

    min_dense: float = 0.35
    min_dense_with_terms: float = 0.25
    min_coverage: float = 0.1
    min_dense_rest: float = 0.2
    min_terms_lexical: int = 2
    min_coverage_lexical: float = 0.1

    def answers(self, dense: float | None, coverage: float, query_terms: int = 0) -> bool:
        """Whether a passage makes the turn answerable.

        Args:
            dense: its cosine to the query (None: no dense score).
            coverage: the share of the query's content terms it contains.
            query_terms: how many content terms the query has (for the lexical rule).
        """
        if dense is None:
            matched = round(coverage * query_terms)
            needed = min(self.min_terms_lexical, query_terms)
            return coverage > 0 and coverage >= self.min_coverage_lexical and matched >= needed
        if dense >= self.min_dense:
            return True
        return dense >= self.min_dense_with_terms and coverage > 0 and coverage >= self.min_coverage

    def keeps(self, dense: float | None, coverage: float, query_terms: int = 0) -> bool:
        """Whether a passage may be returned once the turn is answerable (same arguments)."""
        if dense is None:
            return self.answers(None, coverage, query_terms)
        return dense >= self.min_dense_rest or self.answers(dense, coverage, query_terms)


def _coverage(query_terms: Sequence[str], text: str) -> float:
    if not query_terms:
        return 0.0
    have = set(analyser("corpus").tokens(text, keep_stopwords=True))
    return sum(1 for t in query_terms if t in have) / len(query_terms)


class CorpusRetriever:
    """Ambient grounding from a fixed corpus.

    Give either ``documents`` (indexed in memory by an
    :class:`~shortlist.retrieval._backends.embedded.EmbeddedBackend`) or a ready ``backend``
    (documents, if also given, are upserted into it).

    Args:
        documents: the host's documents.
        backend: an index backend to query.
        embedder: the embedder for a new in-memory index; default: the offline default model
            for ``scoring="hybrid"``, none otherwise.
        scoring: ``"hybrid"`` (BM25 + dense, RRF; default), ``"lexical"`` (BM25 only) or
            ``"overlap"`` (the reference: ranked by the number of shared terms, zero dropped).
        k: the most passages returned.
        relevance: the relevance gate; None disables it (not recommended: then the nearest
            passages are returned whatever they are).
        chunker: chunking for a new in-memory index.
        max_chunks_per_document: the most passages of one document in a result.
        filters: metadata filters applied to every query.

    Raises:
        ConfigError: neither documents nor a backend, or hybrid scoring without an embedder.
    """

    def __init__(
        self,
        documents: Sequence[Document] | None = None,
        *,
        backend: IndexBackend | None = None,
        embedder: Embedder | None = None,
        scoring: Scoring = "hybrid",
        k: int = 5,
        relevance: Relevance | None = Relevance(),
        chunker: Chunker | None = None,
        max_chunks_per_document: int = 1,
        filters: Mapping[str, Any] | None = None,
    ) -> None:
        if scoring not in ("hybrid", "lexical", "overlap"):
            raise ConfigError(f"scoring must be 'hybrid', 'lexical' or 'overlap', not {scoring!r}")
        if k < 1 or max_chunks_per_document < 1:
            raise ConfigError("k and max_chunks_per_document must be >= 1")
        if backend is None:
            if documents is None:
                raise ConfigError("CorpusRetriever needs documents or a backend")
            if embedder is None and scoring == "hybrid":
                from shortlist.embeddings._default import default_embedder

                embedder = default_embedder()
            from shortlist.retrieval._backends.embedded import EmbeddedBackend

            backend = EmbeddedBackend(embedder=embedder if scoring == "hybrid" else None, chunker=chunker)
        if scoring == "hybrid" and backend.embedder is None:
            raise ConfigError("hybrid scoring needs a backend with an embedder")
        if documents is not None:
            backend.upsert(documents)
        self.backend = backend
        self.scoring: Scoring = scoring
        self.k = k
        self.relevance = relevance
        self.max_chunks_per_document = max_chunks_per_document
        self.filters = dict(filters) if filters else None

    def retrieve(self, query: str) -> list[Memory]:
        """Return the relevant passages for a query text (``[]`` when nothing is relevant)."""
        return self._retrieve({}, query)

    def retrieve_context(self, scope: Mapping[str, str], messages: Sequence[Mapping[str, Any] | Any]) -> list[Memory]:
        """Return the passages relevant to the latest user turn of ``messages``.

        Args:
            scope: the subject (carried onto the results; the corpus itself is not scoped).
            messages: the conversation, OpenAI- or Anthropic-style dicts or message objects.

        Returns:
            Memories of type ``"document"``, best first; ``[]`` for a turn without user text or
            one that nothing in the corpus is relevant to.
        """
        return self._retrieve(scope, last_user_text(messages))

    def _retrieve(self, scope: Mapping[str, str], text: str) -> list[Memory]:
        attributes = {**telemetry.selection_attributes("document", self.k, None), "shortlist.scoring": self.scoring}
        with telemetry.span("shortlist.retrieve", attributes) as span:  # an OpenTelemetry span when installed
            out = self._passages(scope, text)
            if span.is_recording():
                ids = [str(m.metadata.get("document_id", "")) for m in out]
                span.set_attributes({"shortlist.returned": len(out), "shortlist.documents": ids})
            return out

    def _passages(self, scope: Mapping[str, str], text: str) -> list[Memory]:
        started = time.perf_counter()
        text = text.strip()
        if not text:
            emit(GroundingRetrieved(abstained=True))
            return []
        qterms = analyser("corpus").terms(text)
        fetch = max(self.k * 4, 20)
        hits = self.backend.query(text, k=fetch, filters=self.filters, use_embedder=self.scoring == "hybrid")
        scored: list[tuple[Hit, float]] = [(h, _coverage(qterms, h.chunk.index_text)) for h in hits]
        if self.scoring == "overlap":
            scored = [(h, c) for h, c in scored if c > 0]
            scored.sort(key=lambda hc: (-hc[1], -hc[0].lexical))
        if self.relevance is not None:
            gate = self.relevance

            def dense(h: Hit) -> float | None:
                return h.dense if self.scoring == "hybrid" else None

            nq = len(qterms)
            if not any(gate.answers(dense(h), c, nq) for h, c in scored):
                scored = []
            scored = [(h, c) for h, c in scored if gate.keeps(dense(h), c, nq)]
        out: list[Memory] = []
        per_doc: dict[str, int] = {}
        for hit, cov in scored:
            doc_id = hit.chunk.document_id
            if per_doc.get(doc_id, 0) >= self.max_chunks_per_document:
                continue
            per_doc[doc_id] = per_doc.get(doc_id, 0) + 1
            out.append(self._memory(scope, hit, cov))
            if len(out) >= self.k:
                break
        emit(
            GroundingRetrieved(
                query_chars=len(text),
                candidates=len(hits),
                returned=len(out),
                abstained=not out,
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        )
        return out

    def _memory(self, scope: Mapping[str, str], hit: Hit, coverage: float) -> Memory:
        chunk = hit.chunk
        use_dense = self.scoring == "hybrid" and hit.dense is not None
        confidence = max(0.0, min(1.0, hit.dense or 0.0)) if use_dense else coverage
        return Memory(
            type=DOCUMENT_TYPE,
            content=chunk.text,
            scope=dict(scope),
            id=chunk.id,
            metadata={
                "document_id": chunk.document_id,
                "citation_id": chunk.id,
                "title": chunk.title,
                "chunk_index": chunk.position,
                "chunk_count": chunk.count,
                "char_start": chunk.char_start,
                "char_end": chunk.char_end,
                "score": hit.score,
                "term_coverage": round(coverage, 4),
                "provenance": "system_generated",
                "source": "corpus",
                "document_metadata": dict(chunk.metadata),
            },
            confidence=round(confidence, 4),
        )
