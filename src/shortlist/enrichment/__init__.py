"""Catalog enrichment: the host's model writes example requests per tool, cached and fed to the feedback log.

Off unless a model is given (offline behaviour is unchanged). See ``docs/enrichment.md``.
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.enrichment._enricher import CatalogEnricher, enrich_catalog
    from shortlist.enrichment._store import EnrichmentStore

__all__ = [
    "CatalogEnricher",
    "EnrichmentStore",
    "enrich_catalog",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "CatalogEnricher": "shortlist.enrichment._enricher",
    "EnrichmentStore": "shortlist.enrichment._store",
    "enrich_catalog": "shortlist.enrichment._enricher",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "DEFAULT_EXAMPLES": ("shortlist.enrichment._enricher", None),
    "EnrichmentCompleted": ("shortlist.enrichment._enricher", None),
    "EnrichmentFailed": ("shortlist.enrichment._enricher", None),
    "EnrichmentOutputRejected": ("shortlist.enrichment._enricher", None),
    "EnrichmentReport": ("shortlist.enrichment._enricher", None),
    "EnrichmentRequestsDropped": ("shortlist.enrichment._enricher", None),
    "EnrichmentRetry": ("shortlist.enrichment._enricher", None),
    "GeneratedSet": ("shortlist.enrichment._store", None),
    "PROMPT_VERSION": ("shortlist.enrichment._prompt", None),
    "PromptModel": ("shortlist.enrichment._enricher", None),
    "RequestScreen": ("shortlist.enrichment._screen", None),
    "build_prompt": ("shortlist.enrichment._prompt", None),
    "clean_request": ("shortlist.enrichment._prompt", None),
    "content_hash": ("shortlist.enrichment._prompt", None),
    "parse_answer": ("shortlist.enrichment._prompt", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
