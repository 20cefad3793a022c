"""``POST /v1/feedback``: record what the model called on a turn into the service's feedback log.

The log the service is bound to (``--examples FEEDBACK_DB``: a file, or a PostgreSQL URL that every
replica shares) gives the rankings their usage examples (the turn's message becomes an example of
each tool it used) and the offers their co-usage companions (the tools used on one turn). The
runtime records its own turns; this route lets a client in any language do the same, through the
library's :meth:`~shortlist.feedback.FeedbackStore.record`. The replica that records a turn indexes
its examples for each named catalog at once, on a thread (:meth:`~shortlist.Shortlist.refresh_examples`),
so its next ranking request finds them indexed; every other replica on the log reads a new turn at its
next request that ranks (the log is read again when it changes). Without a bound log the
route answers 404 ``no_feedback_log``, and 503 ``unavailable`` when the log cannot be written (its
database is down); a turn sent again with the same ``external_id`` is recorded once, so a retry is
safe. A log that cannot be read costs the ranking routes their examples and companions, never the
answer (a ``selection.feedback_unavailable`` event).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from shortlist.server._auth import require_key
from shortlist.server._errors import ApiError, retry_after_headers
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import MAX_TEXT_CHARS, CandidateId, state_of
from shortlist.server._routes.select import MAX_CANDIDATES

__all__ = ["FeedbackRequest", "FeedbackResponse", "router"]

router = APIRouter(tags=["selection"], dependencies=[Depends(require_key)])
logger = logging.getLogger("shortlist.server")


class FeedbackRequest(BaseModel):
    """One turn's outcome: what the user asked, what the turn offered and what the model called."""

    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS, description="The turn's user message (what the offer ranked)."
    )
    used: list[CandidateId] = Field(
        default_factory=list,
        max_length=MAX_CANDIDATES,
        description="Ids the model called on the turn: each gains the message as a usage example, "
        "and they count as used together.",
    )
    selected: list[CandidateId] = Field(
        default_factory=list, max_length=MAX_CANDIDATES, description="Ids the turn offered or loaded."
    )
    kind: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] = Field(
        default="tool", description="What was selected: `tool` (default), `skill`, ..."
    )
    external_id: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = Field(
        default=None, description="The turn's own id: a turn sent again with it is recorded once (a safe retry)."
    )


class FeedbackResponse(BaseModel):
    """Whether the turn was recorded, and its row in the log."""

    recorded: bool = Field(description="False when a turn with this `external_id` was already recorded.")
    turn: int | None = Field(description="The turn's id in the log (null when not recorded).")


@router.post("/v1/feedback", response_model=FeedbackResponse, summary="Record what the model called on a turn")
async def feedback(body: FeedbackRequest, request: Request) -> FastJSONResponse:
    """Record one turn into the service's feedback log: its usage examples and co-usage."""
    log = state_of(request).shortlist.examples
    if log is None:
        raise ApiError(
            404, "no_feedback_log", "no feedback log is bound to this server (start it with --examples FEEDBACK_DB)"
        )
    try:
        turn: int = await asyncio.to_thread(  # a database write: off the event loop
            log.record, body.query, body.selected, body.used, kind=body.kind, external_id=body.external_id
        )
    except Exception as exc:  # the body was valid: the log failed (its database is down, locked, full)
        logger.warning("feedback not recorded: %s: %s", type(exc).__name__, exc)
        raise ApiError(
            503, "unavailable", "the feedback log cannot be written now; retry", headers=retry_after_headers()
        ) from None
    if turn:  # this replica indexes the new examples now, not at its next ranking request (the others then)
        state = state_of(request)
        for catalog in state.catalogs.values():
            await asyncio.to_thread(state.shortlist.refresh_examples, catalog, kind=body.kind)
    out: dict[str, Any] = {"recorded": bool(turn), "turn": turn or None}
    return FastJSONResponse(out)
