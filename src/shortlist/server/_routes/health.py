"""``GET /healthz`` (the process answers), ``GET /readyz`` (started and warmed, not shutting down), ``GET /metrics``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from shortlist.server._auth import require_key
from shortlist.server._metrics import CONTENT_TYPE_LATEST
from shortlist.server._routes import state_of

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    """Always ``{"status": "ok"}`` while the process serves requests."""
    return {"status": "ok"}


@router.get(
    "/readyz", summary="Readiness", responses={503: {"description": "Starting, warm-up failed or shutting down"}}
)
async def readyz(request: Request) -> Any:
    """``ready`` once catalogs are loaded and the bound selectors built and warmed; 503 before that, at
    shutdown, and while a selector's warm-up has failed (``warm_up_failed``, with ``warm_up_errors``).

    ``selectors`` names the selector of each kind (``tool``, ``skill``) that is built and warmed;
    ``instance`` names this server (one ``shortlist serve``, every worker alike), so a readiness
    check can tell it from another server on the same address. A failed warm-up is retried in the
    background, at most every 30 s, when this route is asked.
    """
    state = state_of(request)
    errors = dict(state.warm_up_errors)
    if errors:
        state.retry_warm_up()
    status = "not_ready" if not state.ready else "warm_up_failed" if errors else "ready"
    body: dict[str, Any] = {
        "status": status,
        "instance": state.instance,
        "catalogs": {k: len(v) for k, v in state.catalogs.items()},
        "selectors": dict(state.bound_selectors),
    }
    if errors:
        body["warm_up_errors"] = errors
    return JSONResponse(body, status_code=200 if status == "ready" else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    dependencies=[Depends(require_key)],
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def metrics(request: Request) -> Response:
    """Request counts and latencies per route, selections, fallbacks by reason, external-selector timeouts."""
    return Response(state_of(request).metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
