"""Build an embedding provider from its runtime-config entry (``spec.embedding_providers``)."""

from __future__ import annotations

from typing import Any

from shortlist._config_sections import EmbeddingProviderConfig
from shortlist.embeddings._base import Embedder
from shortlist.errors import ConfigError, UsageError

__all__ = ["OPENAI_COMPATIBLE_DEFAULTS", "build_embedder"]

#: Provider type -> (default base URL, default key variable) of its OpenAI-compatible endpoint.
OPENAI_COMPATIBLE_DEFAULTS: dict[str, tuple[str, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "ollama": ("http://localhost:11434/v1", None),
    "voyageai": ("https://api.voyageai.com/v1", "VOYAGE_API_KEY"),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/openai", "GEMINI_API_KEY"),
}

_DEFAULT_OPTIONS = frozenset(
    {"intra_op_num_threads", "batch_threads", "max_length", "query_cache_size", "query_precision", "vector_cache"}
)
_OPENAI_OPTIONS = frozenset({"max_retries", "backoff_s", "dimensions", "headers"})


def build_embedder(cfg: EmbeddingProviderConfig) -> Embedder:
    """Return the :class:`Embedder` an ``embedding_providers`` entry describes.

    ``default`` is the embedded offline model (``model`` must be empty or its name);
    ``openai``, ``ollama``, ``voyageai`` and ``gemini`` use their OpenAI-compatible
    ``/embeddings`` endpoint (``base_url`` overrides the usual one; ``model`` is required;
    the key comes from ``credential.credential_env`` or the provider's usual variable).
    ``additional_config`` passes extra options (e.g. ``intra_op_num_threads``,
    ``dimensions``, ``max_retries``; ``vector_cache``: where vectors persist across processes,
    for any type: the user's cache directory when unset, a SQLite file, or ``off``).

    Every embedder it builds goes through the persistent vector cache
    (:mod:`shortlist.embeddings._cache`) unless it is off, so the CLI, the service, the exec
    selector and the MCP proxy share one store per machine, keyed by model identity.

    Raises:
        ConfigError: a missing model, an unknown option or an unsupported type.
    """
    where = f"embedding_providers[{cfg.effective_id}]"
    extra: dict[str, Any] = dict(cfg.additional_config)
    cache = extra.pop("vector_cache", None)
    off = (isinstance(cache, str) and cache.strip().lower() in ("off", "none", "false")) or cache is False
    if cfg.type == "default":
        extra["vector_cache"] = None if off else (str(cache) if cache else "default")
        return _build(cfg, extra, where)
    embedder = _build(cfg, extra, where)
    if off:
        return embedder
    from shortlist.embeddings._cache import CachingEmbedder, default_store

    store = str(cache) if cache else default_store()
    return CachingEmbedder(embedder, store) if store is not None else embedder


def _build(cfg: EmbeddingProviderConfig, extra: dict[str, Any], where: str) -> Embedder:
    if cfg.type == "default":
        from shortlist.embeddings._default import DEFAULT_MODEL_NAME, EMBEDDED_MODELS, DefaultEmbedder

        if cfg.model not in (None, "", *EMBEDDED_MODELS, "all-MiniLM-L6-v2"):
            raise ConfigError(
                f"type 'default' is an embedded model ({', '.join(EMBEDDED_MODELS)}); remove model={cfg.model!r} "
                "or use type 'openai' with a base_url for another model",
                path=where,
            )
        _check_options(extra, _DEFAULT_OPTIONS, where)
        if cfg.model in EMBEDDED_MODELS:
            extra["model"] = cfg.model
        elif cfg.model == "all-MiniLM-L6-v2":
            extra["model"] = DEFAULT_MODEL_NAME
        try:
            return DefaultEmbedder(batch_size=cfg.batch_size, **extra)
        except UsageError as exc:
            if type(exc) is not UsageError:
                raise  # a ConfigError already says where
            raise ConfigError(str(exc), path=where) from exc
    defaults = OPENAI_COMPATIBLE_DEFAULTS.get(cfg.type)
    if defaults is None:
        raise ConfigError(
            f"embedding provider type {cfg.type!r} is not supported; use 'default' or an "
            "OpenAI-compatible type ('openai' with base_url)",
            path=where,
        )
    if not cfg.model:
        raise ConfigError(f"type {cfg.type!r} needs 'model' (the embedding model name to request)", path=where)
    base_url, key_env = defaults
    if cfg.credential and cfg.credential.credential_env:
        key_env = cfg.credential.credential_env
    _check_options(extra, _OPENAI_OPTIONS, where)
    from shortlist.embeddings._openai import OpenAIEmbedder

    try:
        return OpenAIEmbedder(
            model=cfg.model,
            base_url=cfg.base_url or base_url,
            api_key_env=key_env,
            timeout_s=cfg.timeout_s,
            batch_size=cfg.batch_size,
            **extra,
        )
    except ValueError as exc:
        if isinstance(exc, UsageError) and type(exc) is not UsageError:
            raise  # a ConfigError (or another usage error of its own) already says what is wrong
        raise ConfigError(f"{exc} (set base_url to the endpoint's /v1 root)", path=where) from exc


def _check_options(extra: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(extra) - allowed)
    if unknown:
        raise ConfigError(
            f"unknown additional_config option(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}",
            path=where,
        )
