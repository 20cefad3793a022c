"""OpenTelemetry spans of every decision: select, retrieve, reduce and each external selector call.

A no-op unless ``opentelemetry-api`` is installed (``pip install 'shortlist[otel]'``); with the API
but no SDK configured, OpenTelemetry's own non-recording tracer makes each span nearly free, and
the decision's attributes are computed only for a recording span.

Names follow the GenAI semantic conventions where they apply: choosing tools, skills or
documents is a ``retrieval`` (``gen_ai.operation.name``) over a data source
(``gen_ai.data_source.id``: ``tools``, ``skills`` or ``corpus``) with ``gen_ai.request.top_k``; an
external selector call is a ``CLIENT`` span (``error.type`` on failure). What the conventions do
not name is under ``shortlist.*``: the selector, the fallback reason, the ids offered, pinned and
rejected, the candidate count and the tool-definition tokens saved. The user's query text
(``gen_ai.retrieval.query.text``) is recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, as the conventions ask of content.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shortlist._tokens import tool_tokens

if TYPE_CHECKING:
    from shortlist._types import Candidate, TurnSelection

__all__ = [
    "TRACER_NAME",
    "capture_content",
    "enabled",
    "record_selection",
    "span",
]

#: The instrumentation scope of every span.
TRACER_NAME = "shortlist"
_DATA_SOURCE = {"tool": "tools", "skill": "skills", "document": "corpus"}

_tracer: Any = None
_loaded = False
_lock = threading.Lock()


def _get_tracer() -> Any:
    global _tracer, _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                try:
                    from opentelemetry import trace
                except ImportError:
                    _tracer = None
                else:
                    from shortlist import __version__

                    _tracer = trace.get_tracer(TRACER_NAME, __version__)
                _loaded = True
    return _tracer


def enabled() -> bool:
    """True when ``opentelemetry-api`` is installed (spans are created; recorded if an SDK is set up)."""
    return _get_tracer() is not None


def capture_content() -> bool:
    """Whether user content (the query text) may be put on spans (opt-in, as GenAI conventions say)."""
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() == "true"


class _NoSpan:
    """The span handed out when OpenTelemetry is not installed: every call does nothing."""

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        return None


_NO_SPAN = _NoSpan()


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *, client: bool = False) -> Iterator[Any]:
    """A span around a block (``client=True``: a ``CLIENT`` span, for calls to another process).

    An exception leaving the block is recorded on the span, which gets an error status and an
    ``error.type``; the exception propagates.
    """
    tracer = _get_tracer()
    if tracer is None:
        yield _NO_SPAN
        return
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    with tracer.start_as_current_span(name, kind=kind, attributes=dict(attributes or {})) as current:
        try:
            yield current
        except BaseException as exc:
            if current.is_recording():
                current.set_attribute("error.type", type(exc).__qualname__)
            raise


def selection_attributes(kind: str, k: int, selector: str | None) -> dict[str, Any]:
    """The attributes a selection span starts with."""
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": _DATA_SOURCE.get(kind, kind),
        "gen_ai.request.top_k": k,
        "shortlist.kind": kind,
        "shortlist.selector": selector or "",
    }


_TOKENS: dict[int, tuple[Sequence[Candidate], int]] = {}


def _definition_tokens(candidates: Sequence[Candidate]) -> int:
    """The tokens of ``candidates``' definitions, remembered per catalog tuple (it is priced per turn)."""
    hit = _TOKENS.get(id(candidates))
    if hit is not None and hit[0] is candidates:
        return hit[1]
    total = tool_tokens(candidates)
    if isinstance(candidates, tuple):
        if len(_TOKENS) > 32:
            _TOKENS.clear()
        _TOKENS[id(candidates)] = (candidates, total)
    return total


def record_selection(current: Any, turn: TurnSelection, candidates: Sequence[Candidate]) -> None:
    """Put a turn's decision on its span (nothing when the span is not recording)."""
    if not current.is_recording():
        return
    attributes: dict[str, Any] = {
        "shortlist.selector": turn.selector or "",
        "shortlist.fallback": turn.fallback or "",
        "shortlist.narrowed": turn.narrowed,
        "shortlist.candidates": len(candidates),
        "shortlist.selected": list(turn.ids),
        "shortlist.ranked": list(turn.ranked),
        "shortlist.pinned": list(turn.pinned),
        "shortlist.rejected": list(turn.rejected),
        "shortlist.abstained": turn.abstained,
        "shortlist.selector_ms": round(turn.elapsed_ms, 3),
    }
    if turn.query.kind == "tool":
        offered = tool_tokens(turn.surfaced)
        attributes["shortlist.tokens_offered"] = offered
        attributes["shortlist.tokens_saved"] = max(_definition_tokens(candidates) - offered, 0)
    if capture_content():
        attributes["gen_ai.retrieval.query.text"] = turn.query.text
    current.set_attributes(attributes)
