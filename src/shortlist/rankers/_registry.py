"""Resolve selectors by name: built-in rankers, external processes from config, code-registered ones.

Built-ins are one table (:data:`shortlist._builtins.BUILTIN_SELECTORS`) of ``"module:factory"``
paths imported only when used, so listing them imports nothing heavy. A name registered in
code beats a config entry of the same name (and registering one name twice is an error).
Every selector's ``init`` runs exactly once, when it is first resolved, with the shared
:class:`SelectorContext`.

A config entry's failure behaviour is built here, as wrappers around the selector (see
:mod:`shortlist.rankers._wrappers`), so library, CLI, service and runtime all get it::

    FallbackSelector(BreakerSelector(TimeoutSelector(ranker)), <the fallback, by name>)

``timeout_ms`` (built-in rankers only: an external process enforces its own), then
``breaker:`` (so timeouts count as failures), then ``fallback:`` (so an open breaker's refusal
is answered by the fallback). The fallback is resolved by name through this registry: it is
built and initialised once, closed by the registry, and may be bound elsewhere too.
"""

from __future__ import annotations

import difflib
import shlex
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shortlist._builtins import BUILTIN_SELECTORS, DEFAULT_SELECTOR, builtin_selector_names
from shortlist._config import RuntimeConfig
from shortlist._config_sections import EXEC_TYPE, SelectorConfig
from shortlist._loading import import_attribute
from shortlist.errors import ConfigError, MissingDependencyError, UsageError
from shortlist.rankers._breaker import BreakerSelector
from shortlist.rankers._timeout import TimeoutSelector
from shortlist.rankers._wrappers import FallbackSelector, WrapperSelector
from shortlist.selection._base import Selector, SelectorContext

if TYPE_CHECKING:
    from shortlist.embeddings._base import Embedder

__all__ = [
    "BUILTIN_SELECTORS",
    "DEFAULT_SELECTOR",
    "SelectorRegistry",
    "builtin_selector_names",
    "create_builtin_selector",
]


def _load_factory(type_name: str) -> Any:
    builtin = BUILTIN_SELECTORS.get(type_name)
    if builtin is None:
        hint = difflib.get_close_matches(type_name, list(BUILTIN_SELECTORS), n=1)
        raise ConfigError(
            f"unknown selector type {type_name!r}"
            + (f"; did you mean {hint[0]!r}?" if hint else "")
            + f" (built-in: {', '.join(BUILTIN_SELECTORS)}, or exec:COMMAND)"
        )
    module_name, _, attr = builtin.factory.partition(":")
    try:
        return import_attribute(module_name, attr)
    except MissingDependencyError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"selector type {type_name!r} is not available in this build") from exc
        raise


def create_builtin_selector(type_name: str, *, name: str | None = None, **options: Any) -> Selector:
    """Create a built-in selector (``bm25``, ``embedding``, …) or an ``exec:COMMAND`` one.

    Raises:
        ConfigError: unknown type or invalid options.
    """
    if type_name.startswith("exec:"):
        argv = shlex.split(type_name[len("exec:") :])
        if not argv:
            raise ConfigError("exec: needs a command, e.g. exec:python ranker.py")
        cfg = SelectorConfig(command=argv[0], args=argv[1:], **options)
        return _create_exec(name or "exec", cfg, {})
    factory = _load_factory(type_name)
    try:
        selector = factory(name=name or type_name, **options)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UsageError) and type(exc) is not UsageError:
            raise  # a ConfigError (or another usage error of its own) already says what is wrong
        raise ConfigError(f"invalid options for selector type {type_name!r}: {exc}") from exc
    if not isinstance(selector, Selector):
        raise ConfigError(f"{BUILTIN_SELECTORS[type_name].factory} did not build a Selector")
    return selector


def _create_exec(name: str, cfg: SelectorConfig, sandboxes: Mapping[str, Any]) -> Selector:
    from shortlist.rankers._exec_client import ExecSelector

    selector: Selector = ExecSelector.from_config(name, cfg, sandboxes)
    return selector


class _Borrowed(WrapperSelector):
    """A selector this registry owns, used inside another's chain: ``init``/``close`` are the registry's."""

    def init(self, ctx: SelectorContext) -> None:
        """Nothing: the registry initialised it when it resolved it."""

    def close(self) -> None:
        """Nothing: the registry closes it."""

    async def aclose(self) -> None:
        """Nothing: the registry closes it."""


class SelectorRegistry:
    """The selectors of one runtime: resolved lazily, initialised once, closed together.

    Args:
        config: the runtime config (declares selectors, sandboxes and bindings).
        selectors: selectors registered in code; they win over config entries of the same name.
        embeddings: the shared embedding provider for ``init`` (default: the first provider
            declared in the config, built on first use; else None).
        source: the config file name, for error messages.
    """

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        *,
        selectors: Mapping[str, Selector] | None = None,
        embeddings: Embedder | None = None,
        source: str | None = None,
    ) -> None:
        self.config = config or RuntimeConfig()
        self._code: dict[str, Selector] = {}
        self._built: dict[str, Selector] = {}
        self._initialised: set[str] = set()
        self._lock = threading.RLock()
        self._embeddings = embeddings
        self._embeddings_resolved = embeddings is not None
        self._source = source
        for name, sel in (selectors or {}).items():
            self.register(name, sel)
        self.config.check_references(extra_names=[*self._code, *BUILTIN_SELECTORS], source=source)

    def register(self, name: str, selector: Selector) -> None:
        """Register an in-code selector under ``name``.

        Raises:
            ConfigError: empty name, not a Selector, or the name is already registered.
        """
        if not name:
            raise ConfigError("a selector needs a non-empty name")
        if not isinstance(selector, Selector):
            raise ConfigError(f"selector {name!r} must be a shortlist Selector, not {type(selector).__name__}")
        with self._lock:
            if name in self._code:
                raise ConfigError(f"selector {name!r} is already registered")
            self._code[name] = selector

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that resolves: code-registered, declared in config, built-in types."""
        return tuple(dict.fromkeys([*self._code, *self.config.spec.active_selectors, *BUILTIN_SELECTORS]))

    def _context(self) -> SelectorContext:
        if not self._embeddings_resolved:
            providers = self.config.spec.embedding_providers
            if providers:
                from shortlist.embeddings._factory import build_embedder

                self._embeddings = build_embedder(providers[0])
            self._embeddings_resolved = True
        return SelectorContext(embeddings=self._embeddings)

    def get(self, name: str) -> Selector:
        """Return the selector called ``name``, building and initialising it on first use.

        Raises:
            ConfigError: the name does not resolve, or the selector's ``init`` failed.
        """
        with self._lock:
            selector = self._code.get(name) or self._built.get(name)
            if selector is None:
                selector = self._build(name)
                self._built[name] = selector
            if name not in self._initialised:
                try:
                    selector.init(self._context())
                except ConfigError:
                    raise
                except Exception as exc:
                    raise ConfigError(f"selector {name!r} failed to initialise: {exc}", source=self._source) from exc
                self._initialised.add(name)
            return selector

    def _build(self, name: str) -> Selector:
        cfg = self.config.spec.active_selectors.get(name)
        if cfg is not None:
            if cfg.type == EXEC_TYPE:
                selector = _create_exec(name, cfg, self.config.spec.sandboxes)
            else:
                selector = create_builtin_selector(cfg.type, name=name, **cfg.options)
            return self._wrap(name, cfg, selector)
        if name in BUILTIN_SELECTORS or name.startswith("exec:"):
            return create_builtin_selector(name)
        raise self._unknown(name)

    def _unknown(self, name: str) -> ConfigError:
        hint = difflib.get_close_matches(name, list(self.names), n=1)
        return ConfigError(
            f"no selector named {name!r}"
            + (f"; did you mean {hint[0]!r}?" if hint else "")
            + f" (known: {', '.join(self.names)})",
            source=self._source,
        )

    def check(self, name: str) -> None:
        """Raise the error :meth:`get` would for a name that resolves to nothing, building nothing.

        A declared selector's options and references were checked when the config loaded.

        Raises:
            ConfigError: no selector is called ``name``.
        """
        known = name in self._code or name in self.config.spec.active_selectors or name in BUILTIN_SELECTORS
        if not known and not name.startswith("exec:"):
            raise self._unknown(name)

    def _wrap(self, name: str, cfg: SelectorConfig, selector: Selector) -> Selector:
        """``selector`` inside the wrappers ``cfg`` asks for (timeout, breaker, fallback)."""
        if cfg.timeout_ms and not cfg.is_external:
            selector = TimeoutSelector(selector, cfg.timeout_ms / 1000)
        if cfg.breaker is not None:
            selector = BreakerSelector(selector, failures=cfg.breaker.failures, cooldown_s=cfg.breaker.cooldown_s)
        if cfg.fallback:  # no cycles: checked when the config loaded (check_references)
            selector = FallbackSelector(selector, _Borrowed(self.get(cfg.fallback)), name=name)
        return selector

    def tool_selector(self) -> Selector | None:
        """The selector bound to ``spec.tool_selector``, or None."""
        name = self.config.spec.tool_selector
        return self.get(name) if name else None

    def skills_selector(self) -> Selector | None:
        """The selector bound to ``spec.skills.selector``, or None."""
        skills = self.config.spec.skills
        return self.get(skills.selector) if skills and skills.selector else None

    def close(self) -> None:
        """Close every selector this registry built or was given."""
        with self._lock:
            for sel in [*self._built.values(), *self._code.values()]:
                sel.close()
