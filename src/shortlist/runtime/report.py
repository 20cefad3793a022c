"""The turn report: what was offered and why, what reduction did, where the time went."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ToolCallRecord", "TurnReport", "TurnResult"]


@dataclass
class ToolCallRecord:
    """One tool call of the turn and how it went."""

    name: str
    ok: bool
    elapsed_ms: float
    source: str  # "host", "memory", "skill", "mcp", "search", "unknown"
    error: str = ""


@dataclass
class TurnReport:
    """Everything a host needs to audit a turn.

    Attributes:
        tools: the tool narrowing (``TurnSelection.to_dict()``: selected, ranked, scores,
            fallback, ...).
        skills: the skill narrowing, when the pack has skills.
        offered_tools: the tool names in the model request (first round).
        documents: grounding documents injected (id, title, confidence).
        memories: memories injected ambiently (id, type, confidence).
        tokens_before / tokens_after: the history's size before and after reduction.
        reduction: the reduction diagnostics (None when no budget applies).
        rounds: model calls made.
        tool_calls: each tool call.
        timings_ms: time per step (select_skills, select_tools, retrieve, reduce, model, tools, total).
        events: every structured event emitted during the turn.
        offer: the turn's tool offer (``Offer.to_dict()``: policy, block, loaded, prefetched,
            deferred, why the block is what it is) as decided before the first model call.
        searches: each ``find_tools`` call of the turn: its query and the tools it made callable.
        prefix_cached: the tools block and the system prompt of this turn's first request are
            byte-identical to the previous turn's, so the provider's cached prefix survived
            (False on the first turn).
        tool_tokens: tokens of the tool definitions the model saw this turn (the tools block,
            the search tool, the runtime's tools and every loaded definition; deferred ones
            are not in the prompt), counted with the evaluation's offline counter.
    """

    tools: dict[str, Any] | None = None
    skills: dict[str, Any] | None = None
    offered_tools: list[str] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    tokens_before: int | None = None
    tokens_after: int | None = None
    reduction: dict[str, Any] | None = None
    rounds: int = 0
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    offer: dict[str, Any] | None = None
    searches: list[dict[str, Any]] = field(default_factory=list)
    prefix_cached: bool = False
    tool_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class TurnResult:
    """The answer of a turn and its report."""

    answer: str
    report: TurnReport
    request: dict[str, Any] = field(default_factory=dict)
    stopped: str = "answer"  # "answer" or "max_rounds"
