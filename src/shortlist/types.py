"""Value types that cross every boundary: the query, a candidate, a selector's answer.

They are frozen and validated at construction, so a bad value fails where it was made,
not three layers later. ``kind`` is open: ``"tool"`` and ``"skill"`` are the two hook
points of the runtime, and other kinds (``"document"``, …) are accepted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["KINDS", "Candidate", "Query", "Selection"]

#: The kinds the runtime asks about. Any non-empty string is accepted.
KINDS = ("tool", "skill")

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
            raise ValueError("Query.kind must be a non-empty string such as 'tool' or 'skill'")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise ValueError(f"Query.k must be an integer >= 0, got {self.k!r}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One item a selector may choose: a tool, a skill, a document.

    Args:
        id: stable identifier; what a selector returns.
        name: display name (defaults to ``id``).
        description: the text rankers work on.
        metadata: free-form data (tags, namespace, server, …); not interpreted by the core.
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
            raise ValueError(f"Candidate.id must be a non-empty string, got {self.id!r}")
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


@dataclass(frozen=True, slots=True)
class Selection:
    """A selector's answer.

    Args:
        selected: chosen ids, best first. Empty means "no opinion" unless ``abstained``.
        reason: free text, logged and reported.
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
        if self.scores is not None:
            scores = tuple(float(s) for s in self.scores)
            if len(scores) != len(self.selected):
                raise ValueError(f"Selection.scores has {len(scores)} values for {len(self.selected)} selected ids")
            if any(math.isnan(s) for s in scores):
                raise ValueError("Selection.scores must not contain NaN")
            object.__setattr__(self, "scores", scores)
