"""The exception tree of shortlist: who must act when something goes wrong.

::

    ShortlistError
    ├── UsageError                the caller's input or settings are wrong: fix the call (also a ValueError)
    │   ├── ConfigError           a developer mistake (bad YAML, unknown name); always raised
    │   ├── CatalogError          bad candidate input (unreadable file, duplicate ids, empty catalog)
    │   │   ├── IndexIntegrityError  an index on disk is not what its manifest says (rebuild it)
    │   │   └── MessageFormatError   a message list is not OpenAI chat or Anthropic messages input
    │   ├── ContextBudgetError    a conversation cannot fit its budget without touching protected content
    │   ├── DocumentTooDeep       a wire document nests too deep
    │   ├── MemoryScopeError      a memory operation named no valid scope
    │   ├── MemoryValueError      a memory that could not be stored and returned (e.g. metadata too deep)
    │   └── SkillToolError        a skill tool call failed; returned to the model as a tool error
    ├── OperationalError          something the call depends on failed: retry, fall back, or the operator acts
    │   ├── MissingDependencyError  an optional extra is not installed (also an ImportError)
    │   ├── SelectorError         a selector failed; the turn falls back, never breaks
    │   │   ├── SelectorTimeout   it ran past its deadline
    │   │   ├── SelectorProtocolError  it answered something that is not the wire protocol
    │   │   └── SelectorProcessError   the external process could not start or exited non-zero
    │   ├── EmbeddingError        an embedding provider failed
    │   ├── ModelError            a chat model endpoint failed or answered something unusable
    │   ├── ModelRequestBlocked   a real (maybe paid) model request was refused inside a test suite
    │   ├── MCPServerError        an MCP server could not be reached (after one reconnect)
    │   ├── MemoryStoreUnavailable  the memory database cannot be reached; retry later
    │   ├── MemoryStoreFull       the memory database cannot grow (disk or quota full); the operator must act
    │   └── MemoryStoreCorrupt    the memory database file is damaged; the operator must restore it
    └── Interrupted               a run stopped on purpose, before its end: control flow, not a fault
        ├── ReductionCancelled    the reduction stage was cancelled through its signal
        ├── CallBudgetExhausted   a reducer asked for a model call after the call budget was spent
        └── SummaryRejected       a compressor's parse rejected the model's summary

Catch a branch to handle a kind of failure: ``UsageError`` (and so ``ValueError``) for what the
caller must change, ``OperationalError`` for what may pass or needs the operator (its
``retry_after`` is set when it may pass on its own: a memory, feedback or index database that is
down), ``Interrupted`` for a run that was stopped. Selector errors carry the selector name, the
elapsed time and, for external processes, the tail of what the process wrote on stderr. Every
class is defined here (the modules that raise them re-export them under their old names); none
carries an HTTP status: the service maps error types to statuses (``shortlist.server._errors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CallBudgetExhausted",
    "CatalogError",
    "ConfigError",
    "ContextBudgetError",
    "DocumentTooDeep",
    "EmbeddingError",
    "IndexIntegrityError",
    "Interrupted",
    "MCPServerError",
    "MemoryScopeError",
    "MemoryStoreCorrupt",
    "MemoryStoreFull",
    "MemoryStoreUnavailable",
    "MemoryValueError",
    "MessageFormatError",
    "MissingDependencyError",
    "ModelError",
    "ModelRequestBlocked",
    "OperationalError",
    "ReductionCancelled",
    "SelectorError",
    "SelectorProcessError",
    "SelectorProtocolError",
    "SelectorTimeout",
    "ShortlistError",
    "SkillToolError",
    "SummaryRejected",
    "UsageError",
]


class ShortlistError(Exception):
    """Root of every error shortlist raises on purpose."""


class UsageError(ShortlistError, ValueError):
    """The caller's input or settings are wrong; the message says what to change. Also a :class:`ValueError`."""


#: Seconds a caller is told to wait before retrying a call whose server could not be reached.
RETRY_AFTER_S = 1.0


class OperationalError(ShortlistError):
    """Something the call depends on failed (a process, a server, a database, an extra): retry, fall back or
    have the operator act.

    ``retry_after``: set when the failure is expected to pass on its own (a database that is down or
    restarting): retry after about that many seconds (the service answers 503 with a ``Retry-After``
    header). None when retrying alone will not help (a missing extra, a full disk, a damaged file).
    """

    retry_after: float | None = None

    def __init__(self, *args: object, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if retry_after is not None:
            self.retry_after = float(retry_after)


class Interrupted(ShortlistError):
    """A run stopped on purpose before its end (cancelled, out of budget, a result refused): control flow."""


class ConfigError(UsageError):
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


class CatalogError(UsageError):
    """Candidate input that cannot be used: unreadable, malformed, duplicated or empty."""


class MissingDependencyError(OperationalError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class SelectorError(OperationalError):
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


class EmbeddingError(OperationalError):
    """An embedding provider failed or returned vectors of the wrong count or shape."""


class ContextBudgetError(UsageError):
    """The budget cannot be met without touching protected content.

    Attributes:
        over_tokens: tokens still over the token budget (0 when no token budget applies).
        over_chars: characters still over the character budget (0 when none applies).
    """

    def __init__(self, message: str, *, over_tokens: int = 0, over_chars: int = 0) -> None:
        self.over_tokens = over_tokens
        self.over_chars = over_chars
        super().__init__(message)


class MemoryScopeError(UsageError):
    """A memory operation was given an invalid scope."""


class MemoryValueError(UsageError):
    """A memory holds a value that could not be stored and returned intact.

    Raised before anything is stored: metadata nested too deep, too large, with non-string
    keys or values that are not JSON (so a scope can never be poisoned by one write).
    """


class MemoryStoreUnavailable(OperationalError):
    """The memory database cannot be reached (or the connection broke mid-operation); retry later."""

    retry_after: float | None = RETRY_AFTER_S


class MemoryStoreFull(OperationalError):
    """The memory database cannot grow: its disk (or quota, or ``max_page_count``) is full; nothing was written."""


class MemoryStoreCorrupt(OperationalError):
    """The memory database file is damaged (SQLite reports it malformed or not a database)."""


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a database's are several lines long)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def unavailable(what: str, cause: BaseException) -> OperationalError:
    """The error of a call whose ``what`` (``"feedback database"``, ``"index server"``) cannot be reached:
    it may pass on its own, so it carries ``retry_after`` (the service answers 503 with ``Retry-After``).
    The one home of that error for the stores without a class of their own (the memory store has
    :class:`MemoryStoreUnavailable`)."""
    return OperationalError(f"{what} unavailable: {first_line(cause)}", retry_after=RETRY_AFTER_S)


REBUILD_INDEX_HINT = "rebuild it with 'shortlist index build'"


@dataclass(frozen=True, slots=True)
class IndexProblem:
    """One thing wrong with an index: the file (or folder) concerned and what is wrong with it."""

    file: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}: {self.problem}"


class IndexIntegrityError(CatalogError):
    """An index on disk is not what its manifest says: a file is missing, unexpected, of another
    size or checksum, or the manifest points outside the index folder.

    Attributes:
        file: the file (or folder) of the first problem.
        problems: every problem found.
    """

    def __init__(self, problems: Sequence[IndexProblem]) -> None:
        self.problems = tuple(problems)
        self.file = self.problems[0].file if self.problems else ""
        more = f" (and {len(self.problems) - 1} more problems)" if len(self.problems) > 1 else ""
        super().__init__(
            f"damaged index: {self.problems[0]}{more}; {REBUILD_INDEX_HINT}" if self.problems else "damaged index"
        )


class MessageFormatError(CatalogError):
    """A message list is not valid OpenAI chat or Anthropic messages input."""


class DocumentTooDeep(UsageError):
    """A document nests arrays and objects deeper than ``limit`` levels (the wire protocol's ``MAX_DEPTH``).

    A :class:`UsageError`, so a :class:`ValueError`: every caller that refuses a bad document refuses this one too
    (the exec-selector answers it in-band, the wire route answers 422 ``too_deep``).
    """

    def __init__(self, what: str, limit: int = 100) -> None:
        super().__init__(f"{what} nests arrays and objects deeper than {limit} levels")
        self.limit = limit


class ModelError(OperationalError):
    """The model endpoint failed or answered something unusable."""


class ModelRequestBlocked(OperationalError):
    """A model, embedder or reranker was about to call a non-local endpoint inside a test suite.

    See :mod:`shortlist._model_guard`: a loopback server or a test transport is allowed, and
    ``shortlist.testing.allow_model_requests()`` lifts the block deliberately.
    """


class MCPServerError(OperationalError):
    """An MCP server could not be reached, or stayed unreachable after one reconnect."""


class SkillToolError(UsageError):
    """A skill tool call failed; the message is meant to be returned to the model as a tool error."""


class ReductionCancelled(Interrupted):
    """The stage was cancelled through its signal; no partial result exists."""


class CallBudgetExhausted(Interrupted):
    """A reducer asked for a model call after the shared model-call budget was spent."""


class SummaryRejected(Interrupted):
    """``parse`` rejected the model's output (it raised ``TypeError`` or ``ValueError``)."""
