"""``POST /v1/reduce``: fit an OpenAI-style conversation to a token and/or character budget.

Local selectors only (``newest``, ``relevance``) and no model calls: the service never spends
a caller's model budget. Impossible budgets answer 422 ``over_budget`` with by how much.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shortlist.errors import ContextBudgetError, UsageError
from shortlist.reduction._stage import DEFAULT_LOCAL_SELECTOR
from shortlist.server._auth import require_key
from shortlist.server._errors import ApiError
from shortlist.server._routes import MAX_TEXT_CHARS, PositiveJsonInt

__all__ = ["ChatMessage", "ReduceRequest", "ReduceResponse", "router"]

router = APIRouter(tags=["reduction"], dependencies=[Depends(require_key)])


class ToolCall(BaseModel):
    """An assistant's tool call (OpenAI shape)."""

    model_config = ConfigDict(extra="allow", strict=True)

    id: str
    type: str = "function"
    function: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    """One OpenAI chat message; its text (the ``content`` string, or its parts' ``text`` together) is
    at most :data:`~shortlist.server._routes.MAX_TEXT_CHARS` characters, as a query is (422 beyond)."""

    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    function_call: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _capped(self) -> ChatMessage:
        content = self.content
        if isinstance(content, str):
            chars = len(content)
        elif content is None:
            chars = 0
        else:
            chars = sum(len(p["text"]) for p in content if isinstance(p.get("text"), str))
        if chars > MAX_TEXT_CHARS:  # the text is never echoed: only its length
            raise UsageError(f"a message's text is {chars:,} characters; at most {MAX_TEXT_CHARS:,} are accepted")
        return self


class ReduceRequest(BaseModel):
    """Fragments (as chat messages) and a budget."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "anyOf": [
                {"required": ["max_tokens"], "properties": {"max_tokens": {"type": "integer"}}},
                {"required": ["max_chars"], "properties": {"max_chars": {"type": "integer"}}},
            ]
        },
    )

    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000, description="OpenAI chat messages.")
    max_tokens: PositiveJsonInt | None = Field(default=None, description="Token budget.")
    max_chars: PositiveJsonInt | None = Field(default=None, description="Character budget.")
    selector: Literal["newest", "relevance"] = Field(
        default=DEFAULT_LOCAL_SELECTOR, description="Local step selector (default `relevance`, as everywhere)."
    )
    model: str | None = Field(default=None, description="Model name choosing the tokenizer (default o200k_base).")


class ReduceResponse(BaseModel):
    """The reduced conversation and what was done to it."""

    messages: list[dict[str, Any]]
    tokens_before: int | None
    tokens_after: int | None
    chars_before: int
    chars_after: int
    counter: str
    diagnostics: list[dict[str, Any]]


@router.post("/v1/reduce", response_model=ReduceResponse, summary="Fit a conversation to a budget")
def reduce(body: ReduceRequest) -> dict[str, Any]:
    """Reduce ``messages`` to the budget without touching protected content."""
    from shortlist.reduction import ReductionStage, openai_from_fragments, openai_to_fragments
    from shortlist.reduction._adapters import MessageFormatError
    from shortlist.reduction._contract import Diagnostics, ExecutionContext

    if body.max_tokens is None and body.max_chars is None:
        raise ApiError(422, "invalid_request", "give max_tokens, max_chars or both")
    try:
        fragments = openai_to_fragments([m.model_dump(exclude_none=True) for m in body.messages])
    except (MessageFormatError, ValueError, TypeError) as exc:
        raise ApiError(422, "invalid_request", f"invalid messages: {exc}") from None
    stage = ReductionStage.local(
        "http", max_tokens=body.max_tokens, max_chars=body.max_chars, selector=body.selector, model=body.model
    )
    diagnostics = Diagnostics()
    try:
        result = stage.reduce_sync(fragments, ExecutionContext(diagnostics=diagnostics))
    except ContextBudgetError:
        raise
    return {
        "messages": openai_from_fragments(result.fragments),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "chars_before": result.chars_before,
        "chars_after": result.chars_after,
        "counter": stage.counter.name,
        "diagnostics": diagnostics.to_list(),
    }
