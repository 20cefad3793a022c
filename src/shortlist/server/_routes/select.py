"""``POST /v1/select``: narrow inline candidates or a catalog loaded at start-up for one query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from shortlist._types import Candidate
from shortlist.selection._facade import Shortlist
from shortlist.server._auth import ApiKey, require_key
from shortlist.server._errors import ApiError
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import MAX_TEXT_CHARS, JsonInt, state_of
from shortlist.server._state import ServiceState

__all__ = [
    "CandidateIn",
    "SelectRequest",
    "SelectResponse",
    "binding",
    "resolve_candidates",
    "router",
    "to_candidates",
]

#: The most inline candidates in the schema (the server's ``max_candidates`` may be lower: 413).
MAX_CANDIDATES = 5000

router = APIRouter(tags=["selection"], dependencies=[Depends(require_key)])


class CandidateIn(BaseModel):
    """One candidate sent inline."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, pattern=r"\S", description="Stable identifier; what comes back selected.")
    name: str = Field(default="", description="Display name (the id when empty).")
    description: str = Field(default="", description="The text rankers work on.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    parameters: dict[str, Any] | None = None
    examples: list[str] = Field(default_factory=list)


class SelectRequest(BaseModel):
    """A selection request: a query plus inline candidates or the name of a loaded catalog."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={  # exactly one of the two sources
            "oneOf": [
                {"required": ["candidates"], "properties": {"candidates": {"type": "array"}}},
                {"required": ["catalog"], "properties": {"catalog": {"type": "string"}}},
            ]
        },
    )

    query: str = Field(
        max_length=MAX_TEXT_CHARS, description="The latest user turn's text (empty: every eligible item surfaces)."
    )
    kind: str = Field(default="tool", min_length=1, description='"tool" or "skill" (open to more kinds).')
    k: JsonInt = Field(
        default=5, ge=0, le=10_000, description="Most items surfaced besides pins (0: selector default)."
    )
    candidates: list[CandidateIn] | None = Field(
        default=None, max_length=MAX_CANDIDATES, description="Inline candidates."
    )
    catalog: str | None = Field(default=None, description="Name of a catalog loaded at start-up.")
    selector: str | None = Field(default=None, description="A selector name known to the server (default: its own).")


class SelectResponse(BaseModel):
    """What surfaces this turn and why (the CLI's ``select --json`` object)."""

    selected: list[str] = Field(description="Ids that surface this turn, pins included, in order.")
    ranked: list[str] = Field(description="The selector's own answer after validation.")
    scores: list[float] | None = Field(description="One score per ranked id, when the selector gave scores.")
    reason: str
    fallback: str | None = Field(description="Why the turn fell back to all eligible, or null.")
    selector: str | None
    pinned: list[str]
    rejected: list[str]
    abstained: bool
    elapsed_ms: float


def to_candidates(items: list[CandidateIn], limit: int) -> list[Candidate]:
    """Turn inline candidates into library values (413 above ``limit``); a repeated id keeps its first entry.

    Raises:
        ApiError: too many candidates.
    """
    if len(items) > limit:
        raise ApiError(413, "too_many_candidates", f"{len(items)} candidates sent; this server accepts at most {limit}")
    seen: set[str] = set()
    out = []
    for c in items:
        if c.id in seen:  # duplicates collapse, as in the selection core
            continue
        seen.add(c.id)
        out.append(Candidate(c.id, c.name, c.description, c.metadata, c.parameters, tuple(c.examples)))
    return out


def resolve_candidates(
    state: ServiceState, catalog: str | None, candidates: list[CandidateIn] | None
) -> Sequence[Candidate]:
    """The eligible candidates of a request: exactly one of a loaded catalog's name or inline candidates.

    Raises:
        ApiError: both or neither given (422), an unknown catalog (404), too many candidates (413).
    """
    if (candidates is None) == (catalog is None):
        raise ApiError(422, "invalid_request", "give exactly one of 'candidates' (inline) or 'catalog' (a name)")
    if catalog is not None:
        loaded = state.catalogs.get(catalog)
        if loaded is None:
            known = ", ".join(sorted(state.catalogs)) or "none loaded"
            raise ApiError(404, "unknown_catalog", f"no catalog named {catalog!r} (loaded: {known})")
        return loaded
    return to_candidates(candidates or [], state.settings.max_candidates)


def binding(state: ServiceState, selector: str | None) -> Shortlist:
    """The service's :class:`Shortlist`, or a view of it ranking with the named ``selector``.

    Every route that selects goes through this facade, so its pins, policy and event hooks
    apply; external selectors are the registry's (behind their circuit breakers).

    Raises:
        ApiError: 404 for a name the server does not know (``exec:COMMAND`` never is).
    """
    if selector is None:
        return state.shortlist
    if selector not in state.selector_names():
        raise ApiError(404, "unknown_selector", f"no selector named {selector!r}")
    return state.shortlist.derive(selector=selector)


@router.post("/v1/select", response_model=SelectResponse, summary="Select the tools or skills for one turn")
async def select(body: SelectRequest, request: Request, key: ApiKey) -> FastJSONResponse:
    """Narrow the candidates for ``query``; the answer says what surfaces, the scores and any fallback."""
    state = state_of(request)
    candidates = resolve_candidates(state, body.catalog, body.candidates)
    turn = await binding(state, body.selector).aselect(body.query, candidates, kind=body.kind, k=body.k)
    state.metrics.observe_selection(body.kind, turn.selector, turn.fallback)
    state.decisions.record("/v1/select", body.query, candidates, turn, kind=body.kind, key=key)
    return FastJSONResponse(turn.to_dict())  # already the response model's shape; skip re-validation
