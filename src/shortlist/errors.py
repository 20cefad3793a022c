"""The exception tree of shortlist: who must act when something goes wrong.

::

    ShortlistError
    ├── ConfigError               a developer mistake (bad YAML, unknown name); always raised
    ├── CatalogError              bad candidate input (unreadable file, duplicate ids, empty catalog)
    ├── MissingDependencyError    an optional extra is not installed (also an ImportError)
    ├── SelectorError             a selector failed; the turn falls back, never breaks
    │   ├── SelectorTimeout       it ran past its deadline
    │   ├── SelectorProtocolError it answered something that is not the wire protocol
    │   └── SelectorProcessError  the external process could not start or exited non-zero
    ├── EmbeddingError            an embedding provider failed
    ├── ContextBudgetError        a conversation cannot fit its budget without touching protected content
    ├── MemoryScopeError          a memory operation named no valid scope
    └── MemoryValueError          a memory that could not be stored and returned (e.g. metadata too deep)

Selector errors carry the selector name, the elapsed time and, for external processes,
the tail of what the process wrote on stderr.
"""

from __future__ import annotations

__all__ = [
    "CatalogError",
    "ConfigError",
    "ContextBudgetError",
    "EmbeddingError",
    "MemoryScopeError",
    "MemoryValueError",
    "MissingDependencyError",
    "SelectorError",
    "SelectorProcessError",
    "SelectorProtocolError",
    "SelectorTimeout",
    "ShortlistError",
]


class ShortlistError(Exception):
    """Root of every error shortlist raises on purpose."""


class ConfigError(ShortlistError):
    """A configuration mistake: names the source, the key path and the fix."""

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None) -> None:
        self.source = source
        self.path = path
        prefix = ""
        if source:
            prefix += f"{source}: "
        if path:
            prefix += f"{path}: "
        super().__init__(prefix + message)


class CatalogError(ShortlistError):
    """Candidate input that cannot be used: unreadable, malformed, duplicated or empty."""


class MissingDependencyError(ShortlistError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class SelectorError(ShortlistError):
    """A selector failed. The selection core turns this into an observable fallback."""

    def __init__(
        self,
        message: str,
        *,
        selector: str = "",
        elapsed_ms: float | None = None,
        stderr_tail: str = "",
    ) -> None:
        self.selector = selector
        self.elapsed_ms = elapsed_ms
        self.stderr_tail = stderr_tail
        super().__init__(message)


class SelectorTimeout(SelectorError):
    """The selector did not answer before its deadline."""


class SelectorProtocolError(SelectorError):
    """The selector's answer is not a valid protocol response (bad JSON, wrong shape, too large)."""


class SelectorProcessError(SelectorError):
    """An external selector process failed to spawn or exited with a non-zero status."""


class EmbeddingError(ShortlistError):
    """An embedding provider failed or returned vectors of the wrong count or shape."""


class ContextBudgetError(ShortlistError):
    """The budget cannot be met without touching protected content.

    Attributes:
        over_tokens: tokens still over the token budget (0 when no token budget applies).
        over_chars: characters still over the character budget (0 when none applies).
    """

    def __init__(self, message: str, *, over_tokens: int = 0, over_chars: int = 0) -> None:
        self.over_tokens = over_tokens
        self.over_chars = over_chars
        super().__init__(message)


class MemoryScopeError(ShortlistError):
    """A memory operation was given an invalid scope."""


class MemoryValueError(ShortlistError, ValueError):
    """A memory holds a value that could not be stored and returned intact.

    Raised before anything is stored: metadata nested too deep, too large, with non-string
    keys or values that are not JSON (so a scope can never be poisoned by one write).
    """
