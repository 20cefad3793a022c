"""Grounding: the corpus retriever, its index backends and ambient injection into the system prompt."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.retrieval._backends.base import IndexBackend
    from shortlist.retrieval._backends.embedded import EmbeddedBackend
    from shortlist.retrieval._backends.postgres import PostgresBackend
    from shortlist.retrieval._backends.qdrant import QdrantBackend
    from shortlist.retrieval._corpus import CorpusRetriever
    from shortlist.retrieval._document import Document
    from shortlist.retrieval._inject import ContextRetriever, render_system_prompt

__all__ = [
    "ContextRetriever",
    "CorpusRetriever",
    "Document",
    "EmbeddedBackend",
    "IndexBackend",
    "PostgresBackend",
    "QdrantBackend",
    "render_system_prompt",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "PostgresBackend": "shortlist.retrieval._backends.postgres",
    "QdrantBackend": "shortlist.retrieval._backends.qdrant",
    "ContextRetriever": "shortlist.retrieval._inject",
    "CorpusRetriever": "shortlist.retrieval._corpus",
    "Document": "shortlist.retrieval._document",
    "EmbeddedBackend": "shortlist.retrieval._backends.embedded",
    "IndexBackend": "shortlist.retrieval._backends.base",
    "render_system_prompt": "shortlist.retrieval._inject",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "Chunk": ("shortlist.retrieval._document", None),
    "Chunker": ("shortlist.retrieval._document", None),
    "DOCUMENT_TYPE": ("shortlist.retrieval._corpus", None),
    "GroundingRetrieved": ("shortlist.retrieval._corpus", None),
    "Hit": ("shortlist.retrieval._backends.base", None),
    "Relevance": ("shortlist.retrieval._corpus", None),
    "RetrievalFailed": ("shortlist.retrieval._inject", None),
    "UpsertReport": ("shortlist.retrieval._backends.base", None),
    "default_line": ("shortlist.retrieval._inject", None),
    "format_context": ("shortlist.retrieval._inject", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
