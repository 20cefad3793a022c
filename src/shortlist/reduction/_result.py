"""The value a reduction stage run returns: surviving fragments, sizes before and after, diagnostics."""

from __future__ import annotations

from dataclasses import dataclass

from shortlist._events import Event
from shortlist.reduction._fragments import ContextFragment

__all__ = ["ReductionResult"]


@dataclass(frozen=True, kw_only=True)
class ReductionResult:
    """What a stage run returns.

    Attributes:
        fragments: The surviving fragments in their original order (a summary sits where the
            first step it replaces was).
        tokens_before: Tokens before reduction (``None`` when no token budget applies).
        tokens_after: Tokens after reduction (``None`` when no token budget applies).
        chars_before: Characters before reduction.
        chars_after: Characters after reduction.
        over_tokens: Tokens still over the budget (only non-zero in best-effort mode).
        over_chars: Characters still over the budget (only non-zero in best-effort mode).
        skipped: True when the input already fitted and was returned unchanged.
        calls_used: Model calls made by this run.
        counter: Name of the token counter used.
        diagnostics: The events of this run, in order.
    """

    fragments: tuple[ContextFragment, ...]
    tokens_before: int | None
    tokens_after: int | None
    chars_before: int
    chars_after: int
    over_tokens: int = 0
    over_chars: int = 0
    skipped: bool = False
    calls_used: int = 0
    counter: str = ""
    diagnostics: tuple[Event, ...] = ()

    @property
    def over_budget(self) -> bool:
        """True when the result does not fit its budget (best-effort mode only)."""
        return self.over_tokens > 0 or self.over_chars > 0
