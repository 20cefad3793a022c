"""Value types that cross every boundary: the query, a candidate, a selector's answer, a turn's selection.

They are frozen and validated at construction, so a bad value fails where it was made,
not three layers later. ``kind`` is open: ``"tool"`` and ``"skill"`` are the two hook
points of the runtime, and other kinds (``"document"``, …) are accepted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType
from typing import Any, ClassVar

from shortlist._events import Event, emit
from shortlist.errors import UsageError

__all__ = [
    "FALLBACK_REASONS",
    "KINDS",
    "MAX_REASON_CHARS",
    "REASON_TRUNCATED_MARKER",
    "Candidate",
    "Query",
    "Selection",
    "SelectionReasonTruncated",
    "TurnSelection",
    "candidate_group",
    "cap_reason",
]

#: The kinds the runtime asks about. Any non-empty string is accepted.
KINDS = ("tool", "skill")
#: The longest ``Selection.reason`` kept; a longer one is cut and ends with the marker below.
MAX_REASON_CHARS = 4096
#: What ends a truncated reason.
REASON_TRUNCATED_MARKER = "…[truncated]"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Query:
    """What a selector is asked this turn.

    Args:
        text: the latest user turn's text (may be empty: then nothing is asked).
        kind: ``"tool"`` or ``"skill"`` (open to more).
        k: the most ids wanted; 0 lets the selector use its default.
        pack_id: the pack (agent definition) the turn belongs to.
        agent_id: the agent within the pack.
    """

    text: str
    kind: str = "tool"
    k: int = 0
    pack_id: str = ""
    agent_id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Query.text must be a string, not {type(self.text).__name__}")
        if not isinstance(self.kind, str) or not self.kind:
            raise UsageError("Query.kind must be a non-empty string such as 'tool' or 'skill'")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise UsageError(f"Query.k must be an integer >= 0, got {self.k!r}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One item a selector may choose: a tool, a skill, a document.

    Args:
        id: stable identifier; what a selector returns.
        name: display name (defaults to ``id``).
        description: the text rankers work on.
        metadata: free-form data (tags, namespace, server, …); the core reads only the server or
            suite in it (:func:`candidate_group`).
        parameters: a JSON Schema of the tool's parameters, when it has one.
        examples: example queries this candidate answers (from config or usage feedback).
    """

    id: str
    name: str = ""
    description: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    parameters: Mapping[str, Any] | None = None
    examples: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise UsageError(f"Candidate.id must be a non-empty string, got {self.id!r}")
        if not self.name:
            object.__setattr__(self, "name", self.id)
        if not isinstance(self.description, str):
            raise TypeError(f"Candidate {self.id!r}: description must be a string")
        if self.metadata is None:
            object.__setattr__(self, "metadata", _EMPTY)
        elif not isinstance(self.metadata, Mapping):
            raise TypeError(f"Candidate {self.id!r}: metadata must be a mapping")
        if not isinstance(self.examples, tuple):
            object.__setattr__(self, "examples", tuple(self.examples))
        if any(not isinstance(e, str) for e in self.examples):
            raise TypeError(f"Candidate {self.id!r}: examples must be strings")

    def with_examples(self, examples: Sequence[str]) -> Candidate:
        """Return a copy whose examples are ``examples`` (order kept, duplicates dropped)."""
        return Candidate(
            self.id,
            self.name,
            self.description,
            self.metadata,
            self.parameters,
            tuple(dict.fromkeys(examples)),
        )


def cap_reason(reason: str) -> tuple[str, bool]:
    """Return ``reason`` cut to :data:`MAX_REASON_CHARS` (marker included) and whether it was cut."""
    if len(reason) <= MAX_REASON_CHARS:
        return reason, False
    return reason[: MAX_REASON_CHARS - len(REASON_TRUNCATED_MARKER)] + REASON_TRUNCATED_MARKER, True


@dataclass(frozen=True, kw_only=True)
class SelectionReasonTruncated(Event):
    """A :class:`Selection` was built with a reason longer than :data:`MAX_REASON_CHARS`; it was cut.

    External selectors' reasons are cut earlier, at the protocol boundary (``exec.reason_truncated``,
    which names the selector); this one covers in-process selectors.
    """

    name: ClassVar[str] = "selection.reason_truncated"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    chars: int = 0
    kept: int = 0


@dataclass(frozen=True, slots=True)
class Selection:
    """A selector's answer.

    Args:
        selected: chosen ids, best first. Empty means "no opinion" unless ``abstained``.
        reason: free text, logged and reported; at most :data:`MAX_REASON_CHARS` characters
            (a longer one is cut, ends with :data:`REASON_TRUNCATED_MARKER`, and a
            :class:`SelectionReasonTruncated` event says so), so no selector can make every
            response, event and log line carry an unbounded text.
        scores: one score per selected id, when the selector has them.
        abstained: the selector judged that nothing fits (as opposed to failing to answer);
            the pin policy's ``on_abstain`` decides what surfaces then.
    """

    selected: tuple[str, ...] = ()
    reason: str = ""
    scores: tuple[float, ...] | None = None
    abstained: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.selected, tuple):
            object.__setattr__(self, "selected", tuple(self.selected))
        if any(not isinstance(i, str) for i in self.selected):
            raise TypeError("Selection.selected must hold string ids")
        if isinstance(self.reason, str) and len(self.reason) > MAX_REASON_CHARS:
            reason, _ = cap_reason(self.reason)
            emit(SelectionReasonTruncated(chars=len(self.reason), kept=len(reason)))
            object.__setattr__(self, "reason", reason)
        if self.scores is not None:
            scores = tuple(float(s) for s in self.scores)
            if len(scores) != len(self.selected):
                raise UsageError(f"Selection.scores has {len(scores)} values for {len(self.selected)} selected ids")
            if any(math.isnan(s) for s in scores):
                raise UsageError("Selection.scores must not contain NaN")
            object.__setattr__(self, "scores", scores)


#: Every value :attr:`TurnSelection.fallback` can take besides ``None``.
FALLBACK_REASONS: tuple[str, ...] = (
    "no_selector",
    "empty_query",
    "no_candidates",
    "error",
    "timeout",
    "empty",
    "unknown_ids",
)

_ID = attrgetter("id")


@dataclass(frozen=True, slots=True)
class TurnSelection:
    """What surfaces this turn, and why.

    Attributes:
        query: the query the selector was (or would have been) asked.
        surfaced: the candidates offered to the model this turn, pins included.
        ranked: the selector's own answer after validation (known ids, de-duplicated, capped).
        scores: the selector's score per ranked id, when it gave scores.
        reason: the selector's reason, or why the turn fell back.
        fallback: None when narrowed, else one of :data:`FALLBACK_REASONS`.
        selector: the selector's name (None when there was none).
        elapsed_ms: time spent in the selector.
        pinned: ids that surfaced because of the pin policy.
        rejected: unknown ids the selector returned (dropped).
        abstained: the selector judged that nothing fits.
    """

    query: Query
    surfaced: tuple[Candidate, ...]
    ranked: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    fallback: str | None = None
    selector: str | None = None
    elapsed_ms: float = 0.0
    pinned: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    abstained: bool = False

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids that surface this turn, in order."""
        return tuple(map(_ID, self.surfaced))

    @property
    def narrowed(self) -> bool:
        """True when the selector's answer was used (no fallback)."""
        return self.fallback is None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready report used by the CLI and the HTTP API."""
        return {
            "selected": list(self.ids),
            "ranked": list(self.ranked),
            "scores": [self.scores[i] for i in self.ranked if i in self.scores] if self.scores else None,
            "reason": self.reason,
            "fallback": self.fallback,
            "selector": self.selector,
            "pinned": list(self.pinned),
            "rejected": list(self.rejected),
            "abstained": self.abstained,
            "elapsed_ms": round(self.elapsed_ms, 3),
        }


#: The metadata keys that name a candidate's server or suite, in the order they are read
#: (``namespace`` is not one: the MCP and skill adapters set it to a kind, ``mcp`` or ``skill``).
GROUP_METADATA_KEYS = ("server", "suite", "mcp_server")


def candidate_group(c: Candidate) -> str | None:
    """The server, suite or namespace ``c`` belongs to, or None.

    ``metadata`` ``server``, ``suite`` or ``mcp_server`` (a non-empty string) first; else an
    ``mcp__server__tool`` or ``server__tool`` prefix of the id or name; else the id's or name's
    dotted prefix (``Hotels.SearchHotel`` -> ``Hotels``). The ranker weighs a
    server's tools together by it, and the offer the servers a conversation already uses.
    """
    md = c.metadata
    for key in GROUP_METADATA_KEYS:
        value = md.get(key)
        if isinstance(value, str) and value.strip():
            return f"{key}:{value.strip()}"
    for text in (c.id, c.name):
        parts = [p for p in text.split("__") if p]
        if len(parts) >= 3 and parts[0] == "mcp":
            return f"ns:{parts[1]}"
        if len(parts) >= 2:
            return f"ns:{parts[0]}"
    for text in (c.id, c.name):
        stripped = text.strip(".")
        if "." in stripped:
            return f"dot:{stripped.rsplit('.', 1)[0]}"
    return None
