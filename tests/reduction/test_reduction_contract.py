"""The contract types: exact seed fields, the cancellation token, diagnostics, the public surface."""

from __future__ import annotations

import threading

import pytest
from reduction_doubles import WordCounter

from shortlist.errors import ConfigError
from shortlist.reduction import ReductionStage
from shortlist.reduction._contract import (
    CancellationToken,
    ContextSelectionCall,
    ContextSelector,
    Diagnostics,
    ExecutionContext,
    ReductionCancelled,
)
from shortlist.reduction._events import ReductionSkipped

SEED_CALL_FIELDS = {
    "stage_id",
    "candidates",
    "fragments",
    "current_tokens",
    "required_reduction_tokens",
    "current_chars",
    "required_reduction_chars",
    "remaining_calls",
    "call_model",
}


def test_selection_call_has_exactly_the_seed_fields() -> None:
    public = {name for name in dir(ContextSelectionCall) if not name.startswith("_")}
    assert public == SEED_CALL_FIELDS


def test_cancellation_token() -> None:
    token = CancellationToken()
    fired: list[str] = []
    remove = token.on_cancel(lambda: fired.append("a"))
    token.on_cancel(lambda: fired.append("b"))
    remove()
    assert not token.cancelled
    token.raise_if_cancelled()
    thread = threading.Thread(target=token.cancel, args=("shutdown",))
    thread.start()
    thread.join()
    token.cancel("again")  # idempotent: callbacks run once, the first reason stays
    assert token.cancelled and token.reason == "shutdown" and fired == ["b"]
    late: list[int] = []
    token.on_cancel(lambda: late.append(1))  # already cancelled: runs at once
    assert late == [1]
    with pytest.raises(ReductionCancelled, match="shutdown"):
        token.raise_if_cancelled()


def test_execution_context_always_has_a_signal() -> None:
    ctx = ExecutionContext()
    assert isinstance(ctx.signal, CancellationToken) and ctx.logger is None and ctx.diagnostics is None


def test_selector_validation() -> None:
    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        return []

    with pytest.raises(ConfigError, match="non-empty id"):
        ContextSelector(id=" ", select=select)
    with pytest.raises(ConfigError, match="non-negative"):
        ContextSelector(id="s", select=select, max_calls=True)
    with pytest.raises(ConfigError, match="callable"):
        ContextSelector(id="s", select="nope", max_calls=0)  # type: ignore[arg-type]
    assert not ContextSelector(id="s", select=select, max_calls=0).requires_model


async def test_empty_conversation_is_skipped_and_recorded() -> None:
    diagnostics = Diagnostics()
    result = await ReductionStage(max_tokens=1, counter=WordCounter()).reduce(
        [], ExecutionContext(diagnostics=diagnostics)
    )
    assert result.fragments == () and result.skipped
    assert len(diagnostics) == 1 and isinstance(diagnostics.events[0], ReductionSkipped)
    assert diagnostics.to_list()[0]["name"] == "reduction.skipped"
