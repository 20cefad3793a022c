"""The index backend contract: upsert documents, delete them, query by text and/or vector.

Every backend chunks with a :class:`~shortlist.retrieval._document.Chunker`, embeds with an
:class:`~shortlist.embeddings._base.Embedder` (only the chunks of new or changed documents:
re-indexing is incremental by content hash) and ranks hybrid: BM25 over the shared tokeniser
and cosine over the vectors, fused with reciprocal rank fusion (``1 / (60 + rank)``, rank
from 0 as in Qdrant, the same constant on every backend). Each hit carries both leg scores so a caller can
decide relevance (abstain) from the same evidence whatever the backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shortlist.embeddings._base import Embedder, Vectors
from shortlist.errors import CatalogError
from shortlist.retrieval._document import Chunk, Chunker, Document

__all__ = ["RRF_K", "Hit", "IndexBackend", "Progress", "UpsertReport", "matches_filters"]

#: The reciprocal-rank-fusion constant, the same on every backend (Qdrant's default is 2).
RRF_K = 60
#: How many candidates each leg contributes to the fusion (at least ``k``).
PREFETCH = 50

#: Called with the number of documents just processed (drives a progress bar).
Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Hit:
    """One scored passage.

    Args:
        chunk: the passage and its document's id, title and metadata.
        score: the fused score (RRF; or the single leg's score when only one leg ran).
        dense: cosine similarity to the query vector (None when no vector was used).
        lexical: the BM25 score (0 when no query term occurs in the passage).
    """

    chunk: Chunk
    score: float
    dense: float | None = None
    lexical: float = 0.0


@dataclass(frozen=True, slots=True)
class UpsertReport:
    """What an upsert (or a sync) changed, counted in documents."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0

    def to_dict(self) -> dict[str, int]:
        """The counts as a dict."""
        return {"added": self.added, "updated": self.updated, "unchanged": self.unchanged, "deleted": self.deleted}


def matches_filters(metadata: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """Exact-match metadata filtering: every key must equal the value, or be in it when a list."""
    if not filters:
        return True
    for key, want in filters.items():
        have = metadata.get(key)
        if isinstance(want, list | tuple | set | frozenset):
            if have not in want:
                return False
        elif have != want:
            return False
    return True


def rrf(legs: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal rank fusion of ranked lists of row numbers: ``sum 1 / (k + rank)``, rank from 0 (as Qdrant)."""
    fused: dict[int, float] = {}
    for leg in legs:
        for rank, row in enumerate(leg):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    return fused


class IndexBackend(ABC):
    """Where chunks, their vectors and their BM25 statistics live.

    Subclasses implement the abstract methods; :meth:`sync` is derived.

    Args:
        embedder: embeds chunks and query texts (None: lexical search only).
        chunker: how documents are cut (default 200-word windows, 40 words overlap).
    """

    def __init__(self, *, embedder: Embedder | None, chunker: Chunker | None = None) -> None:
        self.embedder = embedder
        self.chunker = chunker or Chunker()

    @abstractmethod
    def upsert(self, documents: Sequence[Document], *, progress: Progress | None = None) -> UpsertReport:
        """Add new documents and replace changed ones; unchanged ones (same hash) are skipped.

        Raises:
            CatalogError: two documents share an id.
        """

    @abstractmethod
    def delete(self, document_ids: Iterable[str]) -> int:
        """Remove these documents (missing ids are ignored); return how many were removed."""

    @abstractmethod
    def query(
        self,
        text: str = "",
        *,
        vector: Vectors | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        use_embedder: bool = True,
    ) -> list[Hit]:
        """Return the best ``k`` passages for ``text`` and/or ``vector``, best first.

        With text and an embedder (or an explicit vector), both legs run and are fused by RRF;
        with text alone, BM25 only; with a vector alone, cosine only. ``filters`` keep only
        passages whose document metadata matches (see :func:`matches_filters`). With
        ``use_embedder=False`` the text is not embedded (BM25 only unless ``vector`` is given).
        """

    @abstractmethod
    def count(self) -> int:
        """How many documents the index holds."""

    @abstractmethod
    def hashes(self) -> dict[str, str]:
        """Document id -> content hash of every indexed document."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources. The default does nothing."""

    def sync(self, documents: Sequence[Document], *, progress: Progress | None = None) -> UpsertReport:
        """Make the index hold exactly ``documents``: upsert them, delete every other document."""
        wanted = {d.id for d in documents}
        stale = [doc_id for doc_id in self.hashes() if doc_id not in wanted]
        report = self.upsert(documents, progress=progress)
        deleted = self.delete(stale) if stale else 0
        return UpsertReport(report.added, report.updated, report.unchanged, deleted)

    def __enter__(self) -> IndexBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers for subclasses ----------------------------------------------------------------

    def _plan(self, documents: Sequence[Document]) -> tuple[list[Document], int, int, int]:
        """Split ``documents`` into those to (re)index; count added, updated and unchanged."""
        seen: set[str] = set()
        for doc in documents:
            if doc.id in seen:
                raise CatalogError(f"duplicate document id {doc.id!r}")
            seen.add(doc.id)
        known = self.hashes()
        todo, added, updated = [], 0, 0
        for doc in documents:
            old = known.get(doc.id)
            if old is None:
                added += 1
                todo.append(doc)
            elif old != doc.content_hash():
                updated += 1
                todo.append(doc)
        return todo, added, updated, len(documents) - len(todo)

    def _embed_chunks(
        self, docs: Sequence[Document], progress: Progress | None, batch_docs: int = 256
    ) -> tuple[list[Chunk], Vectors | None]:
        """Chunk ``docs`` and embed the chunks in batches, reporting progress per document."""
        chunks: list[Chunk] = []
        parts: list[Vectors] = []
        for start in range(0, len(docs), batch_docs):
            batch = docs[start : start + batch_docs]
            batch_chunks = [c for d in batch for c in self.chunker.split(d)]
            chunks.extend(batch_chunks)
            if self.embedder is not None and batch_chunks:
                parts.append(self.embedder.embed([c.index_text for c in batch_chunks]))
            if progress is not None:
                progress(len(batch))
        if self.embedder is None:
            return chunks, None
        if not parts:
            return chunks, None
        return chunks, np.ascontiguousarray(np.vstack(parts), dtype=np.float32)

    def _query_vector(self, text: str, vector: Vectors | None, use_embedder: bool = True) -> Vectors | None:
        if vector is not None:
            v = np.asarray(vector, dtype=np.float32).reshape(-1)
            norm = float(np.linalg.norm(v))
            return v / norm if norm > 0 else v
        if use_embedder and self.embedder is not None and text.strip():
            return np.asarray(self.embedder.embed([text])[0], dtype=np.float32)
        return None
