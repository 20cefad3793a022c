"""``POST /v1/retrieve``: corpus grounding for a conversation, scoped like memories.

The retriever is the library's ``CorpusRetriever`` (``retrieve_context(scope, messages)``) over
the corpus given at start-up (``--corpus``); without one the route answers 404 ``no_corpus``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from shortlist.server._auth import ApiKey, authorize_scope
from shortlist.server._errors import ApiError
from shortlist.server._routes import Scope, state_of
from shortlist.server._routes.reduce import ChatMessage

__all__ = ["RetrieveRequest", "RetrieveResponse", "router"]

router = APIRouter(tags=["retrieval"])


class RetrieveRequest(BaseModel):
    """The conversation to ground and the subject it is for."""

    model_config = ConfigDict(extra="forbid", strict=True)

    scope: Scope
    messages: list[ChatMessage] = Field(min_length=1, description="OpenAI chat messages; the last user turn asks.")


class RetrieveResponse(BaseModel):
    """The grounding documents, best first."""

    documents: list[dict[str, Any]]


@router.post("/v1/retrieve", response_model=RetrieveResponse, summary="Ground a conversation in a corpus")
def retrieve(body: RetrieveRequest, request: Request, key: ApiKey) -> dict[str, Any]:
    """Return the corpus passages relevant to the conversation's latest user turn."""
    authorize_scope(key, body.scope)
    retriever = state_of(request).retriever
    if retriever is None:
        raise ApiError(404, "no_corpus", "no corpus is configured on this server")
    docs = retriever.retrieve_context(body.scope, [m.model_dump(exclude_none=True) for m in body.messages])
    return {"documents": [d.to_dict() for d in docs]}
