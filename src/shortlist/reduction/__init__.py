"""Context reduction: fit a conversation to its token and character budget (seed 001).

Build fragments (or convert OpenAI/Anthropic messages with the adapters), then run a
:class:`ReductionStage`: it never touches protected content, applies reductions cheapest first
(truncate, select, summarise, drop oldest), shares one model-call budget, honours cancellation,
and records one event per decision.
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.reduction._adapters import (
        anthropic_from_fragments,
        anthropic_to_fragments,
        openai_from_fragments,
        openai_to_fragments,
    )
    from shortlist.reduction._compressor import ContextCompressor, create_context_compressor
    from shortlist.reduction._fragments import ContextFragment
    from shortlist.reduction._local import newest_first_selector, relevance_selector
    from shortlist.reduction._result import ReductionResult
    from shortlist.reduction._stage import ReductionStage

__all__ = [
    "ContextCompressor",
    "ContextFragment",
    "ReductionResult",
    "ReductionStage",
    "anthropic_from_fragments",
    "anthropic_to_fragments",
    "create_context_compressor",
    "newest_first_selector",
    "openai_from_fragments",
    "openai_to_fragments",
    "relevance_selector",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "ContextCompressor": "shortlist.reduction._compressor",
    "ContextFragment": "shortlist.reduction._fragments",
    "ReductionResult": "shortlist.reduction._result",
    "ReductionStage": "shortlist.reduction._stage",
    "anthropic_from_fragments": "shortlist.reduction._adapters",
    "anthropic_to_fragments": "shortlist.reduction._adapters",
    "create_context_compressor": "shortlist.reduction._compressor",
    "newest_first_selector": "shortlist.reduction._local",
    "openai_from_fragments": "shortlist.reduction._adapters",
    "openai_to_fragments": "shortlist.reduction._adapters",
    "relevance_selector": "shortlist.reduction._local",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "ContextSelector": ("shortlist.reduction._contract", None),
    "Bm25Scorer": ("shortlist.reduction._local", None),
    "CachedCounter": ("shortlist._tokens", None),
    "CallBudgetExhausted": ("shortlist.reduction._contract", None),
    "CancellationToken": ("shortlist.reduction._contract", None),
    "ContextModelCall": ("shortlist.reduction._contract", None),
    "ContextSelectionCall": ("shortlist.reduction._contract", None),
    "ContextSelectionCandidate": ("shortlist.reduction._fragments", None),
    "DEFAULT_LOCAL_SELECTOR": ("shortlist.reduction._stage", None),
    "Diagnostics": ("shortlist.reduction._contract", None),
    "ExecutionContext": ("shortlist.reduction._contract", None),
    "FACTS_HEADER": ("shortlist.reduction._facts", None),
    "FactSheet": ("shortlist.reduction._facts", None),
    "FragmentKind": ("shortlist.reduction._fragments", None),
    "HeuristicCounter": ("shortlist._tokens", None),
    "MessageFormatError": ("shortlist.reduction._adapters", None),
    "ModelCallable": ("shortlist.reduction._contract", None),
    "ModelRequest": ("shortlist.reduction._contract", None),
    "PLAIN_TEXT_TRANSPORT": ("shortlist.reduction._compressor", None),
    "ReductionApplied": ("shortlist.reduction._events", None),
    "ReductionBudgetExceeded": ("shortlist.reduction._events", None),
    "ReductionCancelled": ("shortlist.reduction._contract", None),
    "ReductionCancelledEvent": ("shortlist.reduction._events", None),
    "ReductionCompleted": ("shortlist.reduction._events", None),
    "ReductionCompressionDiscarded": ("shortlist.reduction._events", None),
    "ReductionEvent": ("shortlist.reduction._events", None),
    "ReductionModelCall": ("shortlist.reduction._events", None),
    "ReductionSelectionRejected": ("shortlist.reduction._events", None),
    "ReductionSkipped": ("shortlist.reduction._events", None),
    "ReductionStarted": ("shortlist.reduction._events", None),
    "RelevanceScorer": ("shortlist.reduction._local", None),
    "SELECTOR_JSON_TRANSPORT": ("shortlist.reduction._model_selector", None),
    "SUMMARY_PREFIX": ("shortlist.reduction._adapters", None),
    "Step": ("shortlist.reduction._fragments", None),
    "SummaryRejected": ("shortlist.reduction._compressor", None),
    "TiktokenCounter": ("shortlist._tokens", None),
    "TokenCounter": ("shortlist._tokens", None),
    "check_anthropic_tool_pairs": ("shortlist.reduction._adapters", None),
    "check_openai_tool_pairs": ("shortlist.reduction._adapters", None),
    "counter_for_model": ("shortlist._tokens", None),
    "create_context_selector": ("shortlist.reduction._model_selector", None),
    "current_goal": ("shortlist.reduction._contract", None),
    "extract_facts": ("shortlist.reduction._facts", None),
    "group_steps": ("shortlist.reduction._fragments", None),
    "parse_plain_text": ("shortlist.reduction._compressor", None),
    "parse_step_ids": ("shortlist.reduction._model_selector", None),
    "ranker_scorer": ("shortlist.reduction._local", None),
    "register_model_counter": ("shortlist._tokens", None),
    "truncate_middle": ("shortlist.reduction._fragments", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
