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
        documents: the grounding passages retrieved this turn (id, citation, title, confidence,
            ``injected``: it entered the context this turn, ``in_history``: the history already
            carried it, so it was not injected again).
        memories: the memories retrieved ambiently (id, type, confidence, ``injected``,
            ``in_history``).
        tokens_before / tokens_after: the history's size before and after reduction.
        reduction: what the budget check did (None when no budget applies): ``reduced`` (the
            history passed its budget and was brought down to the low-water mark; ``skipped``
            is its negation), tokens and chars before and after, ``target_tokens`` /
            ``target_chars``, ``cleared_tool_results``, ``cleared_context``,
            ``dropped_messages``, ``kept_searches``, ``over_budget``; ``{"error": ...}`` when
            it failed and the history went unreduced.
        rounds: model calls made.
        tool_calls: each tool call.
        timings_ms: time per step (select_skills, select_tools, retrieve, reduce, model, tools, total).
        events: every structured event emitted during the turn.
        offer: the turn's tool offer (``Offer.to_dict()``: policy, block, loaded, prefetched,
            deferred, why the block is what it is) as decided before the first model call.
        searches: each ``find_tools`` call of the turn: its query and the tools it made callable.
        prefix_cached: this turn's first request extends the conversation's previous request
            (tools and system prompt byte-identical, the previous messages unchanged and
            extended), so the provider's cached prefix survived (False on the first turn).
        prefix: that check in full (``PrefixCheck.to_dict()``): ``request`` (its number in the
            conversation), ``survived``, and when not, ``part`` (``tools``, ``system``,
            ``history``) and ``reason`` (``first_request``, ``offer_changed``, ``tool_loaded``,
            ``skill_tools``, ``skill_index``, ``grounding``, ``system_prompt``, ``reduction``,
            ``history_replaced``, or ``<part>_changed``), ``cache_miss_reason`` (the same break
            in the provider's words: ``tools_changed``, ``system_changed``,
            ``messages_changed``) and ``detail`` (what changed: the tools added, removed or
            redefined, where the system prompt first differs, the first history message that
            differs or how much shorter the history got).
        prefix_breaks: every request of the turn (every round) that broke the cached prefix,
            as the same dicts (the conversation's first request is not a break).
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
    prefix: dict[str, Any] = field(default_factory=dict)
    prefix_breaks: list[dict[str, Any]] = field(default_factory=list)
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
