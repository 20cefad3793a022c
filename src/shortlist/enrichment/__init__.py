"""Catalog enrichment: the host's model writes example requests per tool, cached and fed to the feedback log.

Off unless a model is given (offline behaviour is unchanged). See ``docs/enrichment.md``.
"""

from __future__ import annotations

from shortlist.enrichment.enricher import (
    DEFAULT_EXAMPLES,
    CatalogEnricher,
    EnrichmentCompleted,
    EnrichmentFailed,
    EnrichmentOutputRejected,
    EnrichmentReport,
    EnrichmentRequestsDropped,
    EnrichmentRetry,
    PromptModel,
    enrich_catalog,
)
from shortlist.enrichment.prompt import PROMPT_VERSION, build_prompt, clean_request, content_hash, parse_answer
from shortlist.enrichment.screen import RequestScreen
from shortlist.enrichment.store import EnrichmentStore, GeneratedSet

__all__ = [
    "DEFAULT_EXAMPLES",
    "PROMPT_VERSION",
    "CatalogEnricher",
    "EnrichmentCompleted",
    "EnrichmentFailed",
    "EnrichmentOutputRejected",
    "EnrichmentReport",
    "EnrichmentRequestsDropped",
    "EnrichmentRetry",
    "EnrichmentStore",
    "GeneratedSet",
    "PromptModel",
    "RequestScreen",
    "build_prompt",
    "clean_request",
    "content_hash",
    "enrich_catalog",
    "parse_answer",
]
