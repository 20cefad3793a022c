"""``GET /decisions`` (a read-only HTML page) and ``GET /v1/decisions`` (its JSON): recent decisions, breakers.

Both need what every ``/v1`` route needs: with API keys configured, a valid key; without, a
loopback client. The page also takes the key as the password of HTTP Basic authentication
(any user name), so a browser can open it: a 401 on the page asks for it with
``WWW-Authenticate: Basic``. The ring is this worker's (see :mod:`shortlist.server._decisions`);
a key limited to memory scopes sees only the decisions made with its scopes, an unscoped key all.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials

from shortlist.server._auth import require_key
from shortlist.server._decisions import CSP, breaker_states, render_page
from shortlist.server._errors import ApiError
from shortlist.server._routes import state_of
from shortlist.server._settings import KeyPolicy
from shortlist.server._state import ServiceState

__all__ = ["router"]

router = APIRouter(tags=["operations"])


async def _page_key(request: Request) -> KeyPolicy:
    """``require_key``, also accepting the key as an HTTP Basic password; a 401 invites Basic."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    credentials: HTTPAuthorizationCredentials | None = None
    if scheme.lower() == "basic" and value:
        try:
            _, _, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            password = ""
        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=password)
    elif scheme.lower() == "bearer" and value:
        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=value.strip())
    try:
        return await require_key(request, credentials)
    except ApiError as exc:
        if exc.status == 401:
            exc.headers = {"WWW-Authenticate": 'Basic realm="shortlist", charset="UTF-8"'}
        raise


def _selectors(state: ServiceState) -> list[Any]:
    registry = state.shortlist.registry
    built = getattr(registry, "_built", {})  # the selectors built so far; none is built to look
    code = getattr(registry, "_code", {})
    return [*built.values(), *code.values()]


@router.get("/v1/decisions", summary="Recent decisions and circuit breakers (JSON)")
async def decisions_json(request: Request, key: Annotated[KeyPolicy, Depends(require_key)]) -> dict[str, Any]:
    """The last decisions of this worker the key may see, newest first, and every circuit breaker's state."""
    state = state_of(request)
    log = state.decisions
    return {
        "decisions": [d.to_json() for d in log.recent(key)],
        "total": log.visible_total(key),
        "capacity": log.capacity,
        "breakers": breaker_states(_selectors(state)),
    }


@router.get(
    "/decisions",
    summary="Recent decisions and circuit breakers (a read-only page)",
    # errors stay JSON like every route's; only the page itself is HTML
    responses={200: {"description": "The page", "content": {"text/html": {"schema": {"type": "string"}}}}},
)
async def decisions_page(
    request: Request,
    key: Annotated[KeyPolicy, Depends(_page_key)],
    refresh: Annotated[int | None, Query(ge=2, le=3600, description="Reload every N seconds")] = None,
) -> HTMLResponse:
    """An HTML page of :func:`decisions_json` (inline CSS/JS, no external request)."""
    state = state_of(request)
    log = state.decisions
    page = render_page(
        log.recent(key),
        breaker_states(_selectors(state)),
        total=log.visible_total(key),
        capacity=log.capacity,
        refresh=refresh,
    )
    headers = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    return HTMLResponse(page, headers=headers)
