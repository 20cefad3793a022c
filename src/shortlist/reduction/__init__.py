"""Context reduction: fit a conversation to its token and character budget (seed 001).

Build fragments (or convert OpenAI/Anthropic messages with the adapters), then run a
:class:`ReductionStage`: it never touches protected content, applies reductions cheapest first
(truncate, select, summarise, drop oldest), shares one model-call budget, honours cancellation,
and records one event per decision.
"""

from __future__ import annotations

from shortlist.reduction.adapters import (
    SUMMARY_PREFIX,
    MessageFormatError,
    anthropic_from_fragments,
    anthropic_to_fragments,
    check_anthropic_tool_pairs,
    check_openai_tool_pairs,
    openai_from_fragments,
    openai_to_fragments,
)
from shortlist.reduction.compressor import (
    PLAIN_TEXT_TRANSPORT,
    ContextCompressor,
    SummaryRejected,
    create_context_compressor,
    parse_plain_text,
)
from shortlist.reduction.contract import (
    CallBudgetExhausted,
    CancellationToken,
    ContextModelCall,
    ContextSelectionCall,
    ContextSelector,
    Diagnostics,
    ExecutionContext,
    ModelCallable,
    ModelRequest,
    ReductionCancelled,
    current_goal,
)
from shortlist.reduction.events import (
    ReductionApplied,
    ReductionBudgetExceeded,
    ReductionCancelledEvent,
    ReductionCompleted,
    ReductionCompressionDiscarded,
    ReductionEvent,
    ReductionModelCall,
    ReductionSelectionRejected,
    ReductionSkipped,
    ReductionStarted,
)
from shortlist.reduction.facts import FACTS_HEADER, FactSheet, extract_facts
from shortlist.reduction.fragments import (
    ContextFragment,
    ContextSelectionCandidate,
    FragmentKind,
    Step,
    group_steps,
    truncate_middle,
)
from shortlist.reduction.local import (
    Bm25Scorer,
    RelevanceScorer,
    newest_first_selector,
    ranker_scorer,
    relevance_selector,
)
from shortlist.reduction.model_selector import (
    SELECTOR_JSON_TRANSPORT,
    create_context_selector,
    parse_step_ids,
)
from shortlist.reduction.result import ReductionResult
from shortlist.reduction.stage import DEFAULT_LOCAL_SELECTOR, ReductionStage
from shortlist.tokens import (
    CachedCounter,
    HeuristicCounter,
    TiktokenCounter,
    TokenCounter,
    counter_for_model,
    register_model_counter,
)

__all__ = [
    "DEFAULT_LOCAL_SELECTOR",
    "FACTS_HEADER",
    "PLAIN_TEXT_TRANSPORT",
    "SELECTOR_JSON_TRANSPORT",
    "SUMMARY_PREFIX",
    "Bm25Scorer",
    "CachedCounter",
    "CallBudgetExhausted",
    "CancellationToken",
    "ContextCompressor",
    "ContextFragment",
    "ContextModelCall",
    "ContextSelectionCall",
    "ContextSelectionCandidate",
    "ContextSelector",
    "Diagnostics",
    "ExecutionContext",
    "FactSheet",
    "FragmentKind",
    "HeuristicCounter",
    "MessageFormatError",
    "ModelCallable",
    "ModelRequest",
    "ReductionApplied",
    "ReductionBudgetExceeded",
    "ReductionCancelled",
    "ReductionCancelledEvent",
    "ReductionCompleted",
    "ReductionCompressionDiscarded",
    "ReductionEvent",
    "ReductionModelCall",
    "ReductionResult",
    "ReductionSelectionRejected",
    "ReductionSkipped",
    "ReductionStage",
    "ReductionStarted",
    "RelevanceScorer",
    "Step",
    "SummaryRejected",
    "TiktokenCounter",
    "TokenCounter",
    "anthropic_from_fragments",
    "anthropic_to_fragments",
    "check_anthropic_tool_pairs",
    "check_openai_tool_pairs",
    "counter_for_model",
    "create_context_compressor",
    "create_context_selector",
    "current_goal",
    "extract_facts",
    "group_steps",
    "newest_first_selector",
    "openai_from_fragments",
    "openai_to_fragments",
    "parse_plain_text",
    "parse_step_ids",
    "ranker_scorer",
    "register_model_counter",
    "relevance_selector",
    "truncate_middle",
]
