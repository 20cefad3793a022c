"""Grounding: the corpus retriever, its index backends and ambient injection into the system prompt."""

from shortlist.retrieval.backends.base import Hit, IndexBackend, UpsertReport
from shortlist.retrieval.backends.embedded import EmbeddedBackend
from shortlist.retrieval.corpus import DOCUMENT_TYPE, CorpusRetriever, GroundingRetrieved, Relevance
from shortlist.retrieval.document import Chunk, Chunker, Document
from shortlist.retrieval.inject import (
    ContextRetriever,
    RetrievalFailed,
    default_line,
    format_context,
    render_system_prompt,
)

__all__ = [
    "DOCUMENT_TYPE",
    "Chunk",
    "Chunker",
    "ContextRetriever",
    "CorpusRetriever",
    "Document",
    "EmbeddedBackend",
    "GroundingRetrieved",
    "Hit",
    "IndexBackend",
    "Relevance",
    "RetrievalFailed",
    "UpsertReport",
    "default_line",
    "format_context",
    "render_system_prompt",
]
