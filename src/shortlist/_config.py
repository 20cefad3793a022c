"""Runtime configuration: load and validate ``runtime.yaml`` (the reference format plus ours).

The file has the reference's shape::

    apiVersion: promptkit.altairalabs.ai/v1alpha1   # or shortlist/v1; optional
    kind: RuntimeConfig                             # optional
    spec:
      embedding_providers: [{id, type, model, base_url, credential: {credential_env}}]
      sandboxes:  {NAME: {mode: direct|docker_run|docker_exec|kubectl_exec, ...mode keys}}
      selectors:  {NAME: {command, args, env, timeout_ms, sandbox, worker}   # external process
                   NAME: {type: bm25|embedding|hybrid|..., options: {...}}}   # built-in ranker
                  # either kind also: fallback: NAME, breaker: {failures, cooldown_ms}, timeout_ms
      skills:     {selector: NAME}
      tool_selector: NAME
      selection:  {order, on_abstain, pin_namespaces, always_include, timeout_ms}   # ours

Every mistake is a :class:`~shortlist.errors.ConfigError` naming the file, the key path
and the fix. Sections of the reference format that shortlist does not use (``providers``,
``mcp_servers``, …) are accepted and ignored; any other unknown key is an error.

This module is the whole file: its sections' models are :mod:`shortlist._config_sections`;
here are the ``spec`` and the document, their cross-references (sandboxes, bindings,
fallback chains), loading with errors that name the fix, and the JSON Schema.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shortlist._builtins import BUILTIN_SELECTORS, builtin_selector_names
from shortlist._config_sections import (
    CacheConfig,
    EmbeddingProviderConfig,
    EnrichmentConfig,
    SandboxConfig,
    SelectionConfig,
    SelectorConfig,
    SkillsConfig,
    _Strict,
)
from shortlist.errors import ConfigError, UsageError

__all__ = [
    "RuntimeConfig",
    "RuntimeSpec",
    "load_runtime_config",
    "parse_runtime_config",
    "runtime_config_schema",
]

SANDBOX_MODES = ("direct", "docker_run", "docker_exec", "kubectl_exec")

# Reference sections we accept and ignore: the keys of PromptKit's RuntimeConfigSpec
# (pkg/config/runtime_config.go) that we do not use.
_IGNORED_SPEC_KEYS = frozenset(
    {
        "providers",
        "tts_providers",
        "stt_providers",
        "inference_providers",
        "mcp_servers",
        "state_store",
        "logging",
        "tools",
        "evals",
        "hooks",
    }
)


class RuntimeSpec(BaseModel):
    """``spec``: providers, sandboxes, selectors and their bindings."""

    model_config = ConfigDict(extra="allow", frozen=True)

    embedding_providers: list[EmbeddingProviderConfig] = Field(default_factory=list)
    sandboxes: dict[str, SandboxConfig] = Field(default_factory=dict)
    selectors: dict[str, SelectorConfig | None] = Field(default_factory=dict)
    skills: SkillsConfig | None = None
    tool_selector: str | None = None
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    cache: CacheConfig | None = None
    enrichment: EnrichmentConfig | None = None

    @model_validator(mode="after")
    def _known_sections(self) -> RuntimeSpec:
        known = set(type(self).model_fields) | _IGNORED_SPEC_KEYS
        for key in self.model_extra or {}:
            if key not in _IGNORED_SPEC_KEYS:
                hint = difflib.get_close_matches(key, sorted(known), n=1)
                raise UsageError(
                    f"unknown key {key!r} in spec"
                    + (f"; did you mean {hint[0]!r}?" if hint else f"; known keys: {sorted(known)}")
                )
        return self

    @property
    def active_selectors(self) -> dict[str, SelectorConfig]:
        """Declared selectors, without null entries (which are accepted and ignored)."""
        return {k: v for k, v in self.selectors.items() if v is not None}


class RuntimeConfig(_Strict):
    """The whole ``runtime.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    api_version: str | None = Field(default=None, alias="apiVersion")
    kind: Literal["RuntimeConfig"] | None = None
    metadata: dict[str, Any] | None = None
    spec: RuntimeSpec = Field(default_factory=RuntimeSpec)

    def check_references(self, *, extra_names: Iterable[str] = (), source: str | None = None) -> None:
        """Check that sandbox and binding names resolve.

        Args:
            extra_names: selector names known elsewhere (registered in code, built-in rankers).
            source: the file name, for error messages.

        Raises:
            ConfigError: a selector names an undeclared sandbox, or a binding names an
                undeclared selector.
        """
        spec = self.spec
        for name, sandbox in spec.sandboxes.items():
            if sandbox.mode not in SANDBOX_MODES:
                raise ConfigError(
                    f"unknown sandbox mode {sandbox.mode!r}; known modes: {', '.join(SANDBOX_MODES)}",
                    source=source,
                    path=f"spec.sandboxes.{name}.mode",
                )
        for name, sel in spec.active_selectors.items():
            if sel.sandbox and sel.sandbox != "direct" and sel.sandbox not in spec.sandboxes:
                raise ConfigError(
                    f"sandbox {sel.sandbox!r} is not declared; add it under spec.sandboxes "
                    f"(declared: {sorted(spec.sandboxes) or 'none'})",
                    source=source,
                    path=f"spec.selectors.{name}.sandbox",
                )
        names = set(spec.active_selectors) | set(extra_names)
        self._check_fallbacks(names, source)
        bindings = {"spec.tool_selector": spec.tool_selector}
        if spec.skills is not None:
            bindings["spec.skills.selector"] = spec.skills.selector
        for path, ref in bindings.items():
            if ref and ref not in names:
                hint = difflib.get_close_matches(ref, sorted(names), n=1)
                raise ConfigError(
                    f"selector {ref!r} is not declared under spec.selectors nor registered in code"
                    + (f"; did you mean {hint[0]!r}?" if hint else "")
                    + f" (known: {sorted(names) or 'none'})",
                    source=source,
                    path=path,
                )

    def _check_fallbacks(self, names: set[str], source: str | None) -> None:
        """Every ``fallback:`` names a known selector, and no chain of fallbacks comes back to itself."""
        selectors = self.spec.active_selectors
        for name, sel in selectors.items():
            ref = sel.fallback
            if ref is None:
                continue
            if ref not in names:
                hint = difflib.get_close_matches(ref, sorted(names - {name}), n=1)
                raise ConfigError(
                    f"fallback {ref!r} is not a built-in selector type nor declared under spec.selectors"
                    + (f"; did you mean {hint[0]!r}?" if hint else "")
                    + f" (known: {sorted(names)})",
                    source=source,
                    path=f"spec.selectors.{name}.fallback",
                )
            chain = [name]
            while ref is not None:
                if ref in chain:
                    cycle = " -> ".join([*chain[chain.index(ref) :], ref])
                    raise ConfigError(
                        f"fallback cycle {cycle}: a selector cannot fall back to itself; end the chain with a "
                        "selector that has no fallback (e.g. bm25)",
                        source=source,
                        path=f"spec.selectors.{name}.fallback",
                    )
                chain.append(ref)
                nxt = selectors.get(ref)
                ref = nxt.fallback if nxt is not None else None


def _format_loc(loc: tuple[Any, ...]) -> str:
    parts = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif str(item).startswith(("function-", "tagged-union")):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _misplaced(data: Mapping[str, Any], exc: ValidationError) -> tuple[str, str] | None:
    """A diagnosis for keys in the wrong place, when that is what failed: ``(path, message)`` or None.

    Two mistakes read as "unknown key" otherwise, and the message then names the wrong culprit:

    * spec sections at the top level (``selectors:`` without the ``spec:`` wrapper): "remove
      `selectors`" is the wrong fix; the sections belong under ``spec:``;
    * a selector's key indented one level too little (``options:`` beside the selectors, under
      ``selectors:``): it is read as a selector named ``options`` and its own keys are blamed
      ("unknown key `top_k`"); it belongs under the selector it configures.
    """
    errors = exc.errors()
    spec_keys = set(RuntimeSpec.model_fields)
    top = [
        str(e["loc"][0])
        for e in errors
        if e["type"] == "extra_forbidden" and len(e["loc"]) == 1 and str(e["loc"][0]) in spec_keys
    ]
    if top:
        keys = ", ".join(f"`{k}:`" for k in dict.fromkeys(top))
        if "spec" not in data:
            return top[0], (
                f"{keys} must be under `spec:`: this file has no `spec:` wrapper. Put `spec:` at the top level "
                "and indent the sections under it (apiVersion, kind and metadata stay at the top)"
            )
        return top[0], f"{keys} must be under `spec:`, not at the top level: indent it under `spec:`"
    selector_keys = set(SelectorConfig.model_fields)
    for e in errors:
        loc = tuple(e["loc"])
        if len(loc) >= 3 and loc[:2] == ("spec", "selectors") and str(loc[2]) in selector_keys:
            key = str(loc[2])
            spec = data.get("spec")
            selectors = spec.get("selectors") if isinstance(spec, Mapping) else None
            before: list[str] = []
            for n in selectors if isinstance(selectors, Mapping) else ():
                if n == key:
                    break
                if n not in selector_keys:
                    before.append(str(n))
            owner = f"`{before[-1]}:`" if before else "its selector"
            return f"spec.selectors.{key}", (
                f"`{key}:` is indented directly under `selectors:`, so it reads as a selector named {key!r}; "
                f"`{key}` is a key of a selector: indent it under the selector it configures (e.g. {owner})"
            )
    return None


def parse_runtime_config(data: Mapping[str, Any] | None, *, source: str = "<config>") -> RuntimeConfig:
    """Validate an already-parsed config mapping.

    Raises:
        ConfigError: the first validation problem, with its key path and the fix.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError("the top level must be a mapping with a `spec:` key", source=source)
    try:
        config = RuntimeConfig.model_validate(dict(data))
    except ValidationError as exc:
        misplaced = _misplaced(data, exc)
        if misplaced is not None:
            raise ConfigError(misplaced[1], source=source, path=misplaced[0]) from None
        err = exc.errors()[0]
        path = _format_loc(tuple(err["loc"]))
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            field = str(err["loc"][-1])
            msg = f"unknown key {field!r}; remove it or check its spelling"
        elif err["type"] == "missing":
            msg = f"required key {str(err['loc'][-1])!r} is missing"
        more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
        raise ConfigError(msg + more, source=source, path=path or None) from None
    config.check_references(extra_names=builtin_selector_names(), source=source)
    return config


def load_runtime_config(path: str | Path) -> RuntimeConfig:
    """Read and validate a ``runtime.yaml`` (or JSON) file.

    Raises:
        ConfigError: the file cannot be read, is not YAML, or does not validate.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", source=str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {' '.join(str(exc).split())}", source=str(p)) from None
    return parse_runtime_config(data, source=str(p))


def runtime_config_schema() -> dict[str, Any]:
    """Return the JSON Schema of ``runtime.yaml``."""
    from pydantic.json_schema import models_json_schema

    schema = RuntimeConfig.model_json_schema(by_alias=True)
    # Each built-in type's `options:` model, applied by `type` (if/then), beside the config's own $defs.
    refs, options_defs = models_json_schema(
        [(b.options, "validation") for b in BUILTIN_SELECTORS.values()], ref_template="#/$defs/{model}"
    )
    schema["$defs"].update(options_defs["$defs"])
    schema["$defs"]["SelectorConfig"]["allOf"] = [
        {
            "if": {"properties": {"type": {"const": type_name}}, "required": ["type"]},
            "then": {"properties": {"options": refs[(b.options, "validation")]}},
        }
        for type_name, b in BUILTIN_SELECTORS.items()
    ]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "shortlist runtime configuration"
    return schema
