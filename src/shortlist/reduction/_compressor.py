"""Model-backed compressor: summarises whole steps through the run's ``call_model``.

The stage decides which steps to summarise, places the summary where the first of them was, and
discards the summary when ``parse`` rejects it (``TypeError``/``ValueError``), when it is empty,
longer than ``max_output_tokens``, or not smaller than what it replaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shortlist.errors import ConfigError, SummaryRejected
from shortlist.reduction._contract import ContextModelCall
from shortlist.reduction._fragments import Step

__all__ = [
    "PLAIN_TEXT_TRANSPORT",
    "ContextCompressor",
    "ParseFn",
    "SummaryRejected",
    "create_context_compressor",
    "parse_plain_text",
    "render_steps",
]

PLAIN_TEXT_TRANSPORT = "core:plain-text"
"""The transport whose value is the model's raw text."""


ParseFn = Callable[[object], str]
"""Validates the transport's value and returns the summary; raises ``TypeError`` to reject it."""


def parse_plain_text(value: object) -> str:
    """Default ``parse``: accept a non-empty string, stripped.

    Raises:
        TypeError: when ``value`` is not a string or is blank.
    """
    if not isinstance(value, str) or not value.strip():
        raise TypeError("a summary must be a non-empty string")
    return value.strip()


def render_steps(steps: Sequence[Step]) -> str:
    """Render steps as the compressor's input: one ``[step <id> · <kind>]`` header per fragment."""
    parts: list[str] = []
    for step in steps:
        for frag in step.fragments:
            parts.append(f"[step {step.step_id} · {frag.kind}]\n{frag.text}")
    return "\n\n".join(parts)


@dataclass(frozen=True, kw_only=True)
class ContextCompressor:
    """Summarises steps into one summary fragment through the same request's ``call_model``.

    Attributes:
        id: The reducer id (the ``purpose`` of its model calls).
        instruction: The summariser's system prompt.
        transport: The transport registered by the application (default ``core:plain-text``).
        max_output_tokens: Cap on the summary, passed to the model and re-checked on the result.
        parse: Validates the model's value; a ``TypeError`` or ``ValueError`` discards the summary.
    """

    id: str
    instruction: str
    transport: str = PLAIN_TEXT_TRANSPORT
    max_output_tokens: int
    parse: ParseFn = parse_plain_text

    async def compress(self, steps: Sequence[Step], call_model: ContextModelCall) -> str:
        """Summarise ``steps`` with one model call and return the parsed summary.

        Args:
            steps: The steps to replace, oldest first.
            call_model: The stage's budgeted model call.

        Returns:
            The summary text as returned by ``parse`` (the stage checks it is non-empty and smaller).

        Raises:
            SummaryRejected: when ``parse`` raises ``TypeError`` or ``ValueError``.
            CallBudgetExhausted: when no model call is left.
            ReductionCancelled: when the run is cancelled.
        """
        value = await call_model(
            instruction=self.instruction,
            input=render_steps(steps),
            transport=self.transport,
            max_output_tokens=self.max_output_tokens,
        )
        try:
            return self.parse(value)
        except (TypeError, ValueError) as exc:
            raise SummaryRejected(f"{type(exc).__name__}: {exc}") from exc


def create_context_compressor(
    id: str,
    instruction: str,
    *,
    transport: str = PLAIN_TEXT_TRANSPORT,
    max_output_tokens: int,
    parse: ParseFn | None = None,
) -> ContextCompressor:
    """Create a compressor (seed 001 ``createContextCompressor``).

    Args:
        id: Non-empty reducer id.
        instruction: Non-empty summariser prompt.
        transport: A transport the application registers with the stage.
        max_output_tokens: Positive cap on the summary length.
        parse: Output validator; defaults to :func:`parse_plain_text`.

    Returns:
        The compressor.

    Raises:
        ConfigError: on an empty id, instruction or transport, or a non-positive token cap.
    """
    if not isinstance(id, str) or not id.strip():
        raise ConfigError("a context compressor needs a non-empty id")
    if not isinstance(instruction, str) or not instruction.strip():
        raise ConfigError(f"compressor {id!r}: instruction must be a non-empty string")
    if not isinstance(transport, str) or not transport.strip():
        raise ConfigError(f"compressor {id!r}: transport must be a non-empty string")
    if isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 1:
        raise ConfigError(f"compressor {id!r}: max_output_tokens must be a positive integer")
    if parse is not None and not callable(parse):
        raise ConfigError(f"compressor {id!r}: parse must be callable")
    return ContextCompressor(
        id=id,
        instruction=instruction,
        transport=transport,
        max_output_tokens=max_output_tokens,
        parse=parse or parse_plain_text,
    )
