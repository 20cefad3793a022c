"""Model-backed selector: shows candidates as clipped excerpts and asks which steps to keep.

The ``selector-json`` transport is registered by the application and must return an already
parsed object ``{"step_ids": [...]}`` (``stepIds`` is accepted). A string is never parsed as JSON:
plain text is not a structured answer, and the selection is rejected.
"""

from __future__ import annotations

from collections.abc import Mapping

from shortlist.errors import ConfigError, SelectorProtocolError
from shortlist.reduction._contract import (
    CallBudgetExhausted,
    ContextSelectionCall,
    ContextSelector,
    ExecutionContext,
    current_goal,
)
from shortlist.reduction._fragments import make_excerpt

__all__ = [
    "DEFAULT_SELECTOR_INSTRUCTION",
    "SELECTOR_JSON_TRANSPORT",
    "create_context_selector",
    "parse_step_ids",
]

SELECTOR_JSON_TRANSPORT = "selector-json"
"""The transport a model-backed selector uses; its value is ``{"step_ids": [...]}``."""

DEFAULT_SELECTOR_INSTRUCTION = (
    "You manage an AI agent's context window. The conversation is over budget. From the candidate "
    "steps below, choose the steps to KEEP: those the agent needs to answer the current turn. "
    "Their total size should be at most the stated allowance. Answer with the ids of the steps to "
    'keep, as {"step_ids": [...]}, using only ids from the list.'
)


def parse_step_ids(value: object) -> list[str]:
    """Validate a ``selector-json`` value and return its step ids, duplicates removed.

    Args:
        value: The transport's value: a mapping with a ``step_ids`` (or ``stepIds``) list of strings.

    Returns:
        The ids, in first-seen order.

    Raises:
        SelectorProtocolError: when ``value`` is text, not a mapping, or has no list of strings.
    """
    if isinstance(value, str | bytes):
        raise SelectorProtocolError(
            'the selector transport returned text; only an already parsed {"step_ids": [...]} '
            "object is accepted (plain text is never treated as JSON)"
        )
    if not isinstance(value, Mapping):
        raise SelectorProtocolError(f"selector answer must be an object, not {type(value).__name__}")
    ids = value.get("step_ids", value.get("stepIds"))
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise SelectorProtocolError('selector answer must have "step_ids": a list of strings')
    return list(dict.fromkeys(ids))


def create_context_selector(
    id: str,
    *,
    transport: str = SELECTOR_JSON_TRANSPORT,
    max_output_tokens: int,
    max_excerpt_chars: int,
    max_calls: int = 1,
    instruction: str = DEFAULT_SELECTOR_INSTRUCTION,
) -> ContextSelector:
    """Create a model-backed selector (seed 001 ``createContextSelector``).

    Args:
        id: Non-empty reducer id.
        transport: Must be ``"selector-json"``.
        max_output_tokens: Positive cap on the answer.
        max_excerpt_chars: Positive cap on each candidate's excerpt in the prompt.
        max_calls: Model calls it may make per run (at least 1: it needs the model).
        instruction: The selector's system prompt.

    Returns:
        The selector.

    Raises:
        ConfigError: on a bad id, transport or limit, or ``max_calls=0``.
    """
    if transport != SELECTOR_JSON_TRANSPORT:
        raise ConfigError(
            f"selector {id!r}: transport must be {SELECTOR_JSON_TRANSPORT!r} (a structured answer), not {transport!r}"
        )
    for name, value in (("max_output_tokens", max_output_tokens), ("max_excerpt_chars", max_excerpt_chars)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"selector {id!r}: {name} must be a positive integer")
    if not isinstance(instruction, str) or not instruction.strip():
        raise ConfigError(f"selector {id!r}: instruction must be a non-empty string")

    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        if call.remaining_calls < 1:
            raise CallBudgetExhausted(f"selector {id!r}: no model call left")
        return parse_step_ids(
            await call.call_model(
                instruction=instruction,
                input=_prompt(call, max_excerpt_chars),
                transport=transport,
                max_output_tokens=max_output_tokens,
            )
        )

    return ContextSelector(id=id, select=select, max_calls=max_calls, transport=transport)


def _prompt(call: ContextSelectionCall, max_excerpt_chars: int) -> str:
    lines: list[str] = []
    goal = current_goal()
    if goal:
        lines += ["Current turn:", make_excerpt(goal, max_excerpt_chars), ""]
    total_chars = sum(c.chars for c in call.candidates)
    allowance = [f"{total_chars - call.required_reduction_chars} chars"]
    if call.required_reduction_tokens is not None:
        total_tokens = sum(c.tokens or 0 for c in call.candidates)
        allowance.insert(0, f"{total_tokens - call.required_reduction_tokens} tokens")
    lines.append(f"Keep at most {' and '.join(allowance)} of these {len(call.candidates)} steps (oldest first):")
    texts: dict[str, list[str]] = {c.step_id: [] for c in call.candidates}
    for frag in call.fragments:
        if frag.step in texts:
            texts[frag.step].append(frag.text)
    for c in sorted(call.candidates, key=lambda c: c.position):
        size = f"{c.tokens} tokens, " if c.tokens is not None else ""
        lines.append(f"\n[{c.step_id}] {c.kind}, {size}{c.chars} chars")
        lines.append(make_excerpt("\n".join(texts[c.step_id]) or c.excerpt, max_excerpt_chars))
    return "\n".join(lines)
