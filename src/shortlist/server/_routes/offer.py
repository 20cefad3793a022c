"""``POST /v1/offer`` and ``POST /v1/offer/search``: a conversation's tool offer, without server-side state.

The client carries the conversation's :class:`~shortlist.offer.OfferState` (the
``state`` of the previous answer) and sends it back with the next turn; the answer is a pure
function of the request (:func:`~shortlist.offer.decide_offer`,
:func:`~shortlist.offer.search_tools`), so any replica behind a load balancer
answers the same. A tool's usual companions come from the co-usage of the service's bound
feedback log (``--examples``), read only. Both routes narrow through the service's :class:`~shortlist.Shortlist`
(pins, policy, event hooks, breaker-wrapped external selectors), as ``/v1/select`` does, under its
tool policy (:meth:`~shortlist.Shortlist.for_tools`): a host's ``mcp__`` tools are ranked, not pinned.

A ``state`` that is not an offer state, or that names tools the catalog does not hold (a
state made for another catalog), answers ``400 invalid_state`` and says which field is wrong.
A repeated id in a state is read once, and the counters (``turns``, ``changes``) stop at
:data:`~shortlist.offer.MAX_STATE_COUNT`, so every answer's ``state`` is a valid next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from annotated_types import Ge, Le
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from shortlist._types import Candidate
from shortlist.offer import OfferState, decide_offer, search_tools
from shortlist.offer._bridge import offer_json
from shortlist.offer._policies import (
    DEFAULT_PREFETCH,
    DEFAULT_PREFETCH_COLD,
    DEFAULT_PREFETCH_MAX,
    DEFAULT_PREFETCH_TOKENS,
    default_policy,
)
from shortlist.offer._search import DEFAULT_SEARCH_TOKENS
from shortlist.offer._state import MAX_STATE_COUNT
from shortlist.selection._query import query_text
from shortlist.server._auth import ApiKey, require_key
from shortlist.server._errors import ApiError
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import MAX_TEXT_CHARS, CandidateId, JsonInt, _integral, state_of
from shortlist.server._routes.reduce import ChatMessage
from shortlist.server._routes.select import MAX_CANDIDATES, CandidateIn, SelectResponse, binding, resolve_candidates

__all__ = [
    "FoundTool",
    "OfferRequest",
    "OfferResponse",
    "OfferStateIn",
    "SearchRequest",
    "SearchResponse",
    "router",
]

router = APIRouter(tags=["selection"], dependencies=[Depends(require_key)])

#: The most characters of a query text (a turn's latest message is what is ranked; one message's
#: text has the same cap).
MAX_QUERY_CHARS = MAX_TEXT_CHARS
#: The most messages of a conversation in one request.
MAX_MESSAGES = 10_000
#: The most tools one search returns.
MAX_SEARCH_K = 50

Policy = Literal["per_turn", "stable", "deferred"]


#: A definition size limit in estimated tokens (`prefetch_tokens`, `search_tokens`); null: any size.
_TokenLimit = Annotated[int, Ge(0), Le(100_000_000), BeforeValidator(_integral)] | None


class OfferStateIn(BaseModel):
    """The JSON form of an offer state (what the previous answer's ``state`` holds)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    block: list[CandidateId] = Field(
        default_factory=list, max_length=MAX_CANDIDATES, description="Ids in the tools block."
    )
    loaded: list[CandidateId] = Field(
        default_factory=list, max_length=MAX_CANDIDATES, description="Ids loaded into the history by searches."
    )
    called: list[CandidateId] = Field(
        default_factory=list, max_length=MAX_CANDIDATES, description="Ids the model called."
    )
    # the library's counters stop at MAX_STATE_COUNT, so every answer's state is a valid next request
    turns: JsonInt = Field(default=0, ge=0, le=MAX_STATE_COUNT, description="Turns decided so far.")
    changes: JsonInt = Field(default=0, ge=0, le=MAX_STATE_COUNT, description="Tools-block changes after turn 1.")


_STATE_FIELD: Any = Field(  # validated by the route, so a bad state is a 400 that names the field
    default=None,
    description="The previous answer's `state` (absent or null on the first turn).",
    json_schema_extra={"anyOf": [OfferStateIn.model_json_schema(), {"type": "null"}]},
)


_ONE_SOURCE: dict[str, Any] = {  # exactly one of the two sources
    "oneOf": [
        {"required": ["candidates"], "properties": {"candidates": {"type": "array"}}},
        {"required": ["catalog"], "properties": {"catalog": {"type": "string"}}},
    ]
}
_ONE_QUERY: dict[str, Any] = {  # exactly one of the two forms of the turn
    "oneOf": [
        {"required": ["messages"], "properties": {"messages": {"type": "array"}}},
        {"required": ["query"], "properties": {"query": {"type": "string"}}},
    ]
}


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_ONE_SOURCE)

    catalog: str | None = Field(default=None, description="Name of a catalog loaded at start-up.")
    candidates: list[CandidateIn] | None = Field(
        default=None, max_length=MAX_CANDIDATES, description="Inline candidates (instead of a catalog)."
    )
    selector: str | None = Field(default=None, description="A selector name known to the server (default: its own).")
    format: Literal["openai", "anthropic", "openai-responses"] = Field(
        default="openai",
        description="The request format the conversation is sent in (its messages here are OpenAI chat): "
        "it decides the default policy.",
    )
    policy: Policy | None = Field(
        default=None,
        description="`per_turn`, `stable` or `deferred`; null: the format's default "
        "(`deferred` for both: `openai` chat completions call loaded tools through the `call_tool` bridge).",
    )


class OfferRequest(_Source):
    """One turn of a conversation: its messages (or the query text), the policy and the previous state."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"allOf": [_ONE_SOURCE, _ONE_QUERY]})

    messages: list[ChatMessage] | None = Field(
        default=None, max_length=MAX_MESSAGES, description="OpenAI chat messages; the latest user message is ranked."
    )
    query: str | None = Field(default=None, max_length=MAX_QUERY_CHARS, description="The turn's text (or messages).")
    k: JsonInt = Field(default=5, ge=0, le=10_000, description="Tools ranked into the block besides pins.")
    # the bounds sit inside, before the validator, so the OpenAPI schema states them on the nullable field
    prefetch: Annotated[int, Ge(0), Le(MAX_SEARCH_K), BeforeValidator(_integral)] | None = Field(
        default=None,
        description=f"`deferred`: top tools loaded now (default {DEFAULT_PREFETCH} under deferred, "
        f"{DEFAULT_PREFETCH + DEFAULT_PREFETCH_COLD} while the conversation has called no tool).",
    )
    prefetch_max: JsonInt = Field(
        default=DEFAULT_PREFETCH_MAX,
        ge=0,
        le=MAX_SEARCH_K,
        description="`deferred`: the most tools prefetched while the ranking's top is flat "
        "(`prefetch` or less: no widening).",
    )
    prefetch_cold: JsonInt = Field(
        default=DEFAULT_PREFETCH_COLD,
        ge=0,
        le=MAX_SEARCH_K,
        description="`deferred`: while `state.called` is empty, the prefetch loads this many more and widens "
        "this much further.",
    )
    prefetch_tokens: _TokenLimit = Field(
        default=DEFAULT_PREFETCH_TOKENS,
        description="`deferred`: past the first `prefetch` tools, a tool is prefetched only when its definition "
        "is at most this many tokens (estimated); null: any size.",
    )
    hot: JsonInt = Field(
        default=0, ge=0, le=MAX_SEARCH_K, description="`deferred`: first-turn top tools kept in the block."
    )
    prefix_tokens: JsonInt = Field(
        default=0, ge=0, le=100_000_000, description="Tokens behind the tools block (`stable`'s change rule)."
    )
    state: Any = _STATE_FIELD


class SearchRequest(_Source):
    """The model's in-turn search for tools it was not offered."""

    query: str = Field(max_length=MAX_QUERY_CHARS, description="What the model is looking for.")
    k: JsonInt = Field(default=5, ge=1, le=MAX_SEARCH_K, description="Most tools returned.")
    state: Any = _STATE_FIELD
    context: str | None = Field(
        default=None,
        max_length=MAX_QUERY_CHARS,
        description="The turn's user message: ranked as a second query, so a short or vague `query` still "
        "finds what the message asks for.",
    )
    search_tokens: _TokenLimit = Field(
        default=DEFAULT_SEARCH_TOKENS,
        description="The results after the first carry only definitions of at most this many tokens (estimated; "
        "the next search pages on to a longer one); null: any size.",
    )


class FixedTool(BaseModel):
    """A tool of shortlist's own that the client offers beside ``block`` (its definition)."""

    name: str
    description: str
    parameters: dict[str, Any]


class OfferResponse(BaseModel):
    """One turn's offer (``Offer.to_dict()``); send ``state`` back with the next turn."""

    policy: str
    bridge: bool = Field(
        description="Chat completions under `deferred`: loaded tools are called through `call_tool` "
        "(`fixed_tools` has its definition), never added to the tools array."
    )
    fixed_tools: list[FixedTool] = Field(
        description="The definitions to offer beside `block`'s tools: `find_tools` when `search_tool`, "
        "`call_tool` when `bridge`."
    )
    block: list[str] = Field(description="Ids in the tools block this turn, pins included, in order.")
    loaded: list[str] = Field(description="Ids already loaded into the history by earlier searches.")
    deferred: list[str] = Field(description="Ids reachable only through the search tool this turn.")
    search_tool: bool
    changed: bool = Field(description="The tools block differs from the previous turn's.")
    reason: str
    selection: SelectResponse | None
    prefetched: list[str] = Field(description="Ids loaded into the history before this turn's call (`deferred`).")
    companions: list[str] = Field(
        description="The ids of `prefetched` loaded because they are usually called with the likely ones, "
        "not for their rank."
    )
    state: OfferStateIn


class FoundTool(BaseModel):
    """A tool a search found, with its definition."""

    id: str
    name: str
    description: str
    parameters: dict[str, Any] | None


class SearchResponse(BaseModel):
    """The tools found (now available to the model) and the state to send next."""

    tools: list[FoundTool]
    fallback: str | None = Field(description="Why the bound selector was not used (a lexical ranking was), or null.")
    state: OfferStateIn


def _offer_state(raw: Any, eligible: Sequence[Candidate]) -> OfferState:
    """Validate the client's state (its shape, strictly).

    Tools the catalog no longer holds are not an error: the library drops them with an
    ``OfferStateRepaired`` event, so a catalog that changed between turns never breaks a
    conversation.

    Raises:
        ApiError: 400 ``invalid_state``.
    """
    if raw is None:
        return OfferState()
    if not isinstance(raw, dict):
        raise ApiError(400, "invalid_state", "state must be the JSON object of the previous answer's 'state', or null")
    try:
        parsed = OfferStateIn.model_validate(raw)
    except ValidationError as exc:  # name the fields, never echo the values
        where = "; ".join(f"state.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise ApiError(400, "invalid_state", f"not an offer state ({where})") from None
    return OfferState(  # a repeated id is read once (a state never holds one)
        block=tuple(dict.fromkeys(parsed.block)),
        loaded=tuple(dict.fromkeys(parsed.loaded)),
        called=tuple(dict.fromkeys(parsed.called)),
        turns=parsed.turns,
        changes=parsed.changes,
    )


@router.post("/v1/offer", response_model=OfferResponse, summary="Decide a conversation's tool offer for one turn")
async def offer(body: OfferRequest, request: Request, key: ApiKey) -> FastJSONResponse:
    """Decide this turn's tools block (and what stays deferred) from the previous turn's ``state``.

    The prefetch brings a likely tool's usual companions from the co-usage of the service's
    feedback log (``--examples``), when one is bound.
    """
    service = state_of(request)
    if (body.messages is None) == (body.query is None):
        raise ApiError(422, "invalid_request", "give exactly one of 'messages' or 'query'")
    candidates = resolve_candidates(service, body.catalog, body.candidates)
    sl = binding(service, body.selector)
    state = _offer_state(body.state, candidates)
    query: str | list[dict[str, Any]] = (
        body.query if body.query is not None else [m.model_dump(exclude_none=True) for m in body.messages or []]
    )
    policy = body.policy or default_policy(body.format)
    decided = await asyncio.to_thread(  # the selection thread pool; context-scoped hooks come along
        lambda: decide_offer(
            sl,
            state,
            query,
            policy=policy,
            candidates=candidates,
            k=body.k,
            prefix_tokens=body.prefix_tokens,
            prefetch=(DEFAULT_PREFETCH if policy == "deferred" else 0) if body.prefetch is None else body.prefetch,
            prefetch_max=body.prefetch_max,
            prefetch_cold=body.prefetch_cold,
            prefetch_tokens=body.prefetch_tokens,
            hot=body.hot,
            # the bound feedback log's co-usage, read only (replicas on one log answer alike); read in
            # the thread: a changed log is a database read
            co_usage=sl.co_usage(),
        )
    )
    if decided.selection is not None:
        service.metrics.observe_selection("tool", decided.selection.selector, decided.selection.fallback)
        service.decisions.record(
            "/v1/offer", query_text(query), candidates, decided.selection, offered=decided.block, key=key
        )
    return FastJSONResponse(offer_json(decided, body.format))


@router.post(
    "/v1/offer/search", response_model=SearchResponse, summary="Search the tools a conversation was not offered"
)
async def search(body: SearchRequest, request: Request) -> FastJSONResponse:
    """The in-turn escape hatch: rank the tools the model cannot call yet; they become available."""
    service = state_of(request)
    candidates = resolve_candidates(service, body.catalog, body.candidates)
    sl = binding(service, body.selector)
    state = _offer_state(body.state, candidates)
    result = await asyncio.to_thread(
        lambda: search_tools(
            sl,
            state,
            body.query,
            policy=body.policy or default_policy(body.format),
            candidates=candidates,
            k=body.k,
            context=body.context,
            search_tokens=body.search_tokens,
            co_usage=sl.co_usage(),
        )
    )
    tools = [
        {"id": c.id, "name": c.name, "description": c.description, "parameters": c.parameters} for c in result.found
    ]
    return FastJSONResponse({"tools": tools, "fallback": result.fallback, "state": result.state.to_dict()})
