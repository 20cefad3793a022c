"""What an enrichment run did: tools generated, cached and failed, requests, retries and tokens.
Re-exported by :mod:`shortlist.enrichment._enricher`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EnrichmentReport"]


@dataclass
class EnrichmentReport:
    """What a run did (``to_dict`` is the CLI's ``--json`` object)."""

    model: str
    tools: int = 0
    generated: int = 0
    cached: int = 0
    failed: int = 0
    examples: int = 0
    dropped: int = 0
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_tokens: bool = False
    seconds: float = 0.0
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens of this run's requests (cached tools cost none)."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field and ``total_tokens``."""
        return {
            "model": self.model,
            "tools": self.tools,
            "generated": self.generated,
            "cached": self.cached,
            "failed": self.failed,
            "examples": self.examples,
            "dropped": self.dropped,
            "requests": self.requests,
            "retries": self.retries,
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "total": self.total_tokens,
                "estimated": self.estimated_tokens,
            },
            "seconds": round(self.seconds, 3),
            "failures": dict(self.failures),
        }
