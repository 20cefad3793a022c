"""Host content to ground a turn in: ``Document``, the ``Chunk`` an index stores, and the chunker.

A document is what the host supplies (a help page, a catalog entry, a KB article). Long
documents are cut into overlapping word windows; each chunk keeps its document id, title,
metadata and position (index, count and character span) so an injected passage can be cited.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from shortlist.errors import UsageError

__all__ = ["Chunk", "Chunker", "Document"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_NONSPACE = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Document:
    """One unit of host content.

    Args:
        id: stable identifier, carried onto every retrieved passage so a prompt can cite it.
        title: a human-readable label (indexed with the text, surfaced in metadata).
        text: the content injected into the prompt.
        metadata: free-form JSON-ready data; backends can filter on its top-level keys.
    """

    id: str
    title: str = ""
    text: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise UsageError(f"Document.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.title, str) or not isinstance(self.text, str):
            raise TypeError(f"Document {self.id!r}: title and text must be strings")
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"Document {self.id!r}: metadata must be a mapping")

    def content_hash(self) -> str:
        """sha256 of the title, text and metadata: what decides whether a re-index is needed."""
        payload = json.dumps(
            [self.title, self.text, dict(self.metadata)], sort_keys=True, ensure_ascii=False, default=str
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage of a document, the unit an index stores and returns.

    Args:
        id: ``"<document id>#<position>"``.
        document_id: the document it comes from.
        title: the document's title.
        text: the passage.
        position: 0-based index of the chunk in its document.
        count: how many chunks the document has.
        char_start: offset of the passage in the document text.
        char_end: end offset (exclusive).
        metadata: the document's metadata.
        doc_hash: the document's content hash when it was indexed.
    """

    id: str
    document_id: str
    title: str
    text: str
    position: int = 0
    count: int = 1
    char_start: int = 0
    char_end: int = 0
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    doc_hash: str = ""

    @property
    def index_text(self) -> str:
        """The text that is embedded and indexed: the title, then the passage."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (also the Qdrant payload)."""
        return {
            "chunk_id": self.id,
            "document_id": self.document_id,
            "title": self.title,
            "text": self.text,
            "position": self.position,
            "count": self.count,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "metadata": dict(self.metadata),
            "doc_hash": self.doc_hash,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chunk:
        """Inverse of :meth:`to_dict`."""
        return cls(
            id=str(data["chunk_id"]),
            document_id=str(data["document_id"]),
            title=str(data.get("title", "")),
            text=str(data.get("text", "")),
            position=int(data.get("position", 0)),
            count=int(data.get("count", 1)),
            char_start=int(data.get("char_start", 0)),
            char_end=int(data.get("char_end", 0)),
            metadata=dict(data.get("metadata") or {}),
            doc_hash=str(data.get("doc_hash", "")),
        )


@dataclass(frozen=True, slots=True)
class Chunker:
    """Cuts documents into overlapping windows of words.

    Args:
        max_words: the most words in a chunk; a document at most this long is one chunk.
        overlap: words shared by consecutive chunks.
    """

    max_words: int = 200
    overlap: int = 40

    def __post_init__(self) -> None:
        if self.max_words < 1 or not 0 <= self.overlap < self.max_words:
            raise UsageError("Chunker needs max_words >= 1 and 0 <= overlap < max_words")

    def to_dict(self) -> dict[str, int]:
        """The settings, as recorded in an index manifest."""
        return {"max_words": self.max_words, "overlap": self.overlap}

    def split(self, doc: Document) -> list[Chunk]:
        """Return the chunks of ``doc`` (one chunk, possibly empty, for a short document)."""
        digest = doc.content_hash()
        spans = [m.span() for m in _NONSPACE.finditer(doc.text)]
        if len(spans) <= self.max_words:
            return [Chunk(f"{doc.id}#0", doc.id, doc.title, doc.text, 0, 1, 0, len(doc.text), doc.metadata, digest)]
        step = self.max_words - self.overlap
        starts = list(range(0, len(spans) - self.overlap, step))
        out = []
        for pos, first in enumerate(starts):
            last = min(first + self.max_words, len(spans)) - 1
            lo, hi = spans[first][0], spans[last][1]
            out.append(
                Chunk(
                    f"{doc.id}#{pos}",
                    doc.id,
                    doc.title,
                    doc.text[lo:hi],
                    pos,
                    len(starts),
                    lo,
                    hi,
                    doc.metadata,
                    digest,
                )
            )
        return out
