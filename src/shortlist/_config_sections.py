"""Runtime configuration, the sections of ``spec``: one strict model per section of ``runtime.yaml``.

Embedding providers and their credentials, sandboxes, selectors (an external process or a
built-in ranker, with their failure behaviour: ``timeout_ms``, ``breaker:``, ``fallback:``),
skills, selection, cache and enrichment. The whole file, its cross-references and its
loading are :mod:`shortlist._config`.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from shortlist._builtins import builtin_selector_names, validate_options
from shortlist.errors import UsageError

__all__ = [
    "EXEC_TYPE",
    "BreakerConfig",
    "CacheConfig",
    "CredentialConfig",
    "EmbeddingProviderConfig",
    "EnrichmentConfig",
    "SandboxConfig",
    "SelectionConfig",
    "SelectorConfig",
    "SkillsConfig",
]

EXEC_TYPE = "exec"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CredentialConfig(_Strict):
    """Where a provider's key comes from: the name of an environment variable."""

    credential_env: str | None = None


class EmbeddingProviderConfig(_Strict):
    """One embedding provider. The first declared is shared with every selector's ``init``.

    ``type``: ``default`` (the embedded offline model) or ``openai`` (any OpenAI-compatible
    ``/v1/embeddings`` endpoint; set ``base_url`` for a local server).
    """

    id: str | None = None
    type: Literal["default", "openai", "ollama", "voyageai", "gemini"]
    model: str | None = None
    base_url: str | None = None
    platform: str | None = None
    credential: CredentialConfig | None = None
    additional_config: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float = 30.0
    batch_size: int = 64

    @property
    def effective_id(self) -> str:
        """The provider's id (defaults to its type)."""
        return self.id or self.type


class SandboxConfig(BaseModel):
    """A named sandbox: ``mode`` plus the mode's own keys (passed to the sandbox factory)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    mode: str

    @property
    def options(self) -> dict[str, Any]:
        """The mode-specific keys."""
        return dict(self.model_extra or {})


class BreakerConfig(_Strict):
    """``breaker:`` of a selector: open after ``failures`` consecutive failures, probe after ``cooldown_ms``.

    See :class:`~shortlist.rankers._breaker.BreakerSelector`.
    """

    failures: int = Field(default=3, ge=1)
    cooldown_ms: float = Field(default=5000.0, gt=0)

    @property
    def cooldown_s(self) -> float:
        """The cooldown in seconds."""
        return self.cooldown_ms / 1000


class SelectorConfig(_Strict):
    """One selector: an external process (``command``) or a built-in ranker (``type``).

    Failure behaviour, for either kind (built by the registry as wrappers, see
    :mod:`shortlist.rankers._wrappers`): ``timeout_ms`` (an external process is killed at its
    deadline; a built-in ranker gets the deadline on its own thread pool — unset or 0: none of
    its own), ``breaker:`` (a circuit breaker) and ``fallback:`` (the selector asked when this
    one fails, times out or answers nothing: a built-in type or another entry, no cycles).
    """

    type: str = EXEC_TYPE
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    timeout_ms: int | None = None
    sandbox: str | None = None
    worker: bool = False
    max_output_bytes: int = 4 * 1024 * 1024
    options: dict[str, Any] = Field(default_factory=dict)
    fallback: str | None = None
    breaker: BreakerConfig | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        builtin = builtin_selector_names()
        if value == EXEC_TYPE or value.startswith("exec:") or value in builtin:
            return value
        hint = difflib.get_close_matches(value, builtin, n=1)
        raise UsageError(
            f"unknown selector type {value!r}"
            + (f"; did you mean {hint[0]!r}?" if hint else "")
            + f" (built-in: {', '.join(builtin)}; or leave `type:` out and set `command:`)"
        )

    @field_validator("options")
    @classmethod
    def _builtin_options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # A built-in ranker's options are its constructor's keywords: check them now, not at first use.
        validate_options(str(info.data.get("type", EXEC_TYPE)), value)
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for entry in value:
            name = entry.split("=", 1)[0]
            if not name or not name.replace("_", "a").isalnum():
                raise UsageError(f"env entry {entry!r} must be NAME or NAME=value")
        return value

    @field_validator("timeout_ms")
    @classmethod
    def _timeout(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise UsageError(
                "timeout_ms must be >= 0 (0 or unset: 10000 for an external process, no deadline of its own "
                "for a built-in ranker)"
            )
        return value

    @field_validator("fallback")
    @classmethod
    def _fallback_name(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise UsageError("fallback must name a selector (a built-in type such as bm25, or another entry)")
        return value

    @model_validator(mode="after")
    def _shape(self) -> SelectorConfig:
        if self.type == EXEC_TYPE:
            if not self.command or not self.command.strip():
                raise UsageError(
                    "an external selector needs `command:` (the program to run); "
                    "for a built-in ranker set `type:` instead (bm25, embedding, hybrid, ...)"
                )
        else:
            exec_only = (
                [k for k in ("command", "sandbox") if getattr(self, k)]
                + (["args"] if self.args else [])
                + (["env"] if self.env else [])
                + (["worker"] if self.worker else [])
            )
            if exec_only:
                raise UsageError(
                    f"keys {exec_only} only apply to external selectors (type: exec), not type {self.type!r}"
                )
        return self

    @property
    def effective_timeout_ms(self) -> int:
        """The external process's timeout in milliseconds (0 or unset means 10000)."""
        return self.timeout_ms or 10_000

    @property
    def is_external(self) -> bool:
        """True for an external process (``type: exec`` or ``exec:COMMAND``), which enforces its own timeout."""
        return self.type == EXEC_TYPE or self.type.startswith("exec:")


class SkillsConfig(_Strict):
    """``spec.skills``: the selector that narrows the ``skill__activate`` index."""

    selector: str | None = None


class SelectionConfig(_Strict):
    """``spec.selection`` (shortlist's own): pins, order, abstention and in-process timeout."""

    order: Literal["ranking", "source"] = "ranking"
    on_abstain: Literal["all", "pins"] = "all"
    pin_namespaces: list[str] | None = None
    always_include: list[str] = Field(default_factory=list)
    timeout_ms: int | None = None
    k: int = 0
    #: a feedback log (SQLite file, relative to this file) whose queries become usage examples
    examples: str | None = None


class CacheConfig(_Strict):
    """``spec.cache`` (shortlist's own): the persistent embedding cache (``docs/caching.md``)."""

    #: the cache folder, ``off``, or a ``postgresql://`` URL: the vectors in that database, shared by replicas
    #: (default: $SHORTLIST_CACHE_DIR, else the user's cache directory)
    dir: str | None = None
    #: the bound of the vector file in MB (default: $SHORTLIST_CACHE_MAX_MB, else 512)
    max_mb: int | None = Field(default=None, ge=1)


class EnrichmentConfig(_Strict):
    """``spec.enrichment`` (shortlist's own): the host's model writes example requests per tool.

    See ``docs/enrichment.md``.

    Used by ``shortlist catalog enrich``; the requests go to the feedback log of
    ``selection.examples`` (or ``db``). Off when absent.
    """

    #: the model's OpenAI-compatible API root, e.g. ``http://127.0.0.1:8000/v1``
    base_url: str | None = None
    #: the model name sent to the endpoint
    model: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    #: instead of an endpoint: ``module:attribute`` of a ``prompt -> str`` callable or a ChatModel
    callable: str | None = None
    #: the feedback log to write (default: ``selection.examples``), relative to this file
    db: str | None = None
    examples: int = Field(default=10, ge=2)
    concurrency: int = Field(default=4, ge=1)
    tools_per_request: int = Field(default=1, ge=1)
    retries: int = Field(default=3, ge=0)
    timeout_s: float = Field(default=60.0, gt=0)
