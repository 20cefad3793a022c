"""Enrichment settings: command-line flags over ``spec.enrichment`` of a ``runtime.yaml``, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shortlist.errors import ConfigError

__all__ = ["EnrichmentSettings", "enrichment_settings"]


@dataclass(frozen=True)
class EnrichmentSettings:
    """Where to write, which model to ask, and how (see :class:`~shortlist.enrichment.CatalogEnricher`)."""

    db: str
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    callable_path: str | None = None
    examples: int = 10
    concurrency: int = 4
    tools_per_request: int = 1
    retries: int = 3
    timeout_s: float = 60.0

    def build_model(self) -> Any:
        """The model: an ``OpenAIChatModel`` for ``base_url`` + ``model``, or the named callable."""
        if self.callable_path:
            from shortlist.enrichment._model import resolve_model

            return resolve_model(self.callable_path)
        from shortlist.runtime._model import OpenAIChatModel

        assert self.base_url and self.model  # checked by enrichment_settings
        return OpenAIChatModel(
            self.model, base_url=self.base_url, api_key_env=self.api_key_env, timeout_s=self.timeout_s
        )

    def enricher_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~shortlist.enrichment.CatalogEnricher`."""
        return {
            "examples": self.examples,
            "concurrency": self.concurrency,
            "tools_per_request": self.tools_per_request,
            "retries": self.retries,
        }


def _section(config: str | None) -> tuple[dict[str, Any], str | None, Path | None]:
    if not config:
        return {}, None, None
    from shortlist._config import load_runtime_config

    cfg = load_runtime_config(config)
    section = getattr(cfg.spec, "enrichment", None)
    raw: dict[str, Any] = section.model_dump(exclude_none=True) if section is not None else {}
    base = Path(config).resolve().parent
    if raw.get("db"):
        raw["db"] = str(base / raw["db"])
    return raw, cfg.spec.selection.examples, base


def enrichment_settings(*, config: str | None = None, **flags: Any) -> EnrichmentSettings:
    """Merge flags (None: not given) over the config's ``spec.enrichment``; the db defaults to ``selection.examples``.

    Raises:
        ConfigError: no feedback log, no model (a ``base_url`` and ``model``, or a callable),
            both kinds of model, or an out-of-range number.
    """
    raw, examples_db, base = _section(config)
    merged: dict[str, Any] = {**raw, **{k: v for k, v in flags.items() if v is not None}}
    if "callable" in merged:
        merged["callable_path"] = merged.pop("callable")
    db = merged.get("db") or (str(base / examples_db) if base is not None and examples_db else None)
    if not db:
        raise ConfigError("catalog enrich needs --db FEEDBACK_DB (or a config whose selection.examples names one)")
    merged["db"] = db
    if merged.get("callable_path") and merged.get("base_url"):
        raise ConfigError("give the enrichment model either as --callable or as --base-url/--model, not both")
    if not merged.get("callable_path") and not (merged.get("base_url") and merged.get("model")):
        raise ConfigError(
            "enrichment is off until a model is configured: pass --base-url URL --model NAME (any OpenAI-compatible "
            "endpoint), --callable MODULE:ATTR, or a config with spec.enrichment"
        )
    known = set(EnrichmentSettings.__dataclass_fields__)
    unknown = sorted(set(merged) - known)
    if unknown:
        raise ConfigError(f"unknown enrichment setting(s): {', '.join(unknown)}")
    s = EnrichmentSettings(**merged)
    if s.examples < 2:
        raise ConfigError("--examples must be at least 2 (one example per tool hurts ranking)")
    if s.concurrency < 1 or s.tools_per_request < 1 or s.retries < 0 or s.timeout_s <= 0:
        raise ConfigError("--concurrency and --tools-per-request must be >= 1, --retries >= 0, --timeout > 0")
    return s
