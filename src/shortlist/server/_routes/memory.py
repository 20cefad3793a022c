"""Memory endpoints: ``remember``, ``recall``, ``list`` and ``forget`` for one scope.

The scope travels in the body and is checked against the caller's key **before** the store is
touched (403 and nothing read). Handlers are plain functions: FastAPI runs them in its thread
pool, where the stores' blocking drivers (SQLite, psycopg) belong.

Handlers return their JSON already shaped as the declared response models (every key, in the
models' order) and rendered, instead of letting FastAPI validate and re-encode each memory
through the model: that validation cost more CPU than the database round trip (a ``list`` of 20
memories: about 0.25 ms of 0.65 ms per request). The models still document the routes in the
OpenAPI schema, and the tests check the bodies against them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from shortlist.errors import MemoryValueError, UsageError
from shortlist.memory._record import Memory
from shortlist.server._auth import ApiKey, authorize_scope
from shortlist.server._errors import ApiError
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import JsonDateTime, JsonInt, Scope, state_of
from shortlist.server._settings import KeyPolicy

__all__ = ["router"]

router = APIRouter(prefix="/v1/memory", tags=["memory"])


class _ScopeKeyed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    scope: Scope


class RememberRequest(_ScopeKeyed):
    """A memory to store (an existing ``id`` in the scope is replaced)."""

    type: str = Field(default="general", min_length=1, max_length=100)
    content: str = Field(max_length=100_000)
    id: str = Field(default="", max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    session_id: str = Field(default="", max_length=200)
    expires_at: JsonDateTime | None = None


class RecallRequest(_ScopeKeyed):
    """Recall memories of a scope matching any content term of ``query``."""

    query: str = Field(default="", max_length=10_000)
    types: list[str] | None = None
    limit: JsonInt = Field(default=10, ge=0, le=1000)
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)


class ListRequest(_ScopeKeyed):
    """List memories of a scope in insertion order."""

    types: list[str] | None = None
    limit: JsonInt = Field(default=50, ge=0, le=1000)
    offset: JsonInt = Field(default=0, ge=0, le=10_000_000)


class ForgetRequest(_ScopeKeyed):
    """Forget one memory (``id``) or every memory of the scope (``all: true``)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "oneOf": [
                {"required": ["id"], "properties": {"id": {"type": "string"}, "all": {"const": False}}},
                {
                    "required": ["all"],
                    "properties": {"all": {"const": True}, "id": {"type": "null"}},
                },
            ]
        },
    )

    id: str | None = Field(default=None, min_length=1)
    all: bool = False


class MemoryOut(BaseModel):
    """A stored memory."""

    id: str
    type: str
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    confidence: float
    scope: dict[str, str]
    session_id: str | None = None
    turn_range: list[int]
    created_at: str | None
    accessed_at: str | None
    expires_at: str | None = None


class MemoriesOut(BaseModel):
    """Memories, best (recall) or oldest (list) first."""

    memories: list[MemoryOut]


class ForgetOut(BaseModel):
    """How many memories were deleted."""

    deleted: int


# MemoryOut's keys in order; the optional ones Memory.to_dict() leaves out get the model's default
_OUT_FIELDS = tuple(MemoryOut.model_fields)
_OUT_DEFAULTS: dict[str, Any] = {"metadata": {}}


def _memory_out(memory: Memory) -> dict[str, Any]:
    """``memory`` as :class:`MemoryOut` renders it (every key; ``null`` for no session or expiry)."""
    data = memory.to_dict()
    return {k: data.get(k, _OUT_DEFAULTS.get(k)) for k in _OUT_FIELDS}


def _memories_out(memories: list[Memory]) -> Response:
    return FastJSONResponse({"memories": [_memory_out(m) for m in memories]})


def _checked(request: Request, key: KeyPolicy, scope: dict[str, str]) -> Any:
    authorize_scope(key, scope)
    return state_of(request).memory


@router.post("/remember", response_model=MemoryOut, summary="Store a memory")
def remember(body: RememberRequest, request: Request, key: ApiKey) -> Response:
    """Store one memory in ``scope`` and return the stored copy (id and timestamps filled in)."""
    store = _checked(request, key, body.scope)
    memory = Memory(
        type=body.type,
        content=body.content,
        scope=body.scope,
        id=body.id,
        metadata=body.metadata,
        confidence=body.confidence,
        session_id=body.session_id,
        expires_at=body.expires_at,
    )
    try:
        stored: Memory = store.save(memory)
    except ValueError as exc:  # a value this store cannot hold (e.g. NUL in PostgreSQL)
        if isinstance(exc, UsageError) and not isinstance(exc, MemoryValueError):
            raise  # a scope the caller got wrong: the error handlers answer it (400)
        raise ApiError(422, "invalid_request", str(exc)) from None
    return FastJSONResponse(_memory_out(stored))


@router.post("/recall", response_model=MemoriesOut, summary="Recall memories matching a query")
def recall(body: RecallRequest, request: Request, key: ApiKey) -> Response:
    """Recall memories of ``scope`` matching any content term of ``query``, best first."""
    store = _checked(request, key, body.scope)
    found = store.retrieve(
        body.scope, body.query, types=body.types, limit=body.limit, min_confidence=body.min_confidence
    )
    return _memories_out(found)


@router.post("/list", response_model=MemoriesOut, summary="List the memories of a scope")
def list_memories(body: ListRequest, request: Request, key: ApiKey) -> Response:
    """List memories of ``scope`` in insertion order."""
    store = _checked(request, key, body.scope)
    found = store.list(body.scope, types=body.types, limit=body.limit, offset=body.offset)
    return _memories_out(found)


@router.post("/forget", response_model=ForgetOut, summary="Forget one memory or all of a scope")
def forget(body: ForgetRequest, request: Request, key: ApiKey) -> dict[str, int]:
    """Delete the memory ``id`` of ``scope``, or every memory of it with ``all: true``."""
    if (body.id is None) == (not body.all):
        raise ApiError(422, "invalid_request", "give exactly one of 'id' or 'all: true'")
    store = _checked(request, key, body.scope)
    if body.all:
        return {"deleted": int(store.delete_all(body.scope))}
    return {"deleted": int(bool(store.delete(body.scope, body.id)))}
