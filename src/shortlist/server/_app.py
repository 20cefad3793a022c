"""``create_app(settings)``: the FastAPI application of ``shortlist serve``.

The lifespan builds the :class:`~shortlist.server._state.ServiceState` (runtime config,
catalogs, memory store, metrics hook) at start-up and closes it at shutdown, after uvicorn
has let in-flight requests finish: selectors and external selector workers are stopped there.

``app_from_env`` is the factory uvicorn imports in each worker process (``--workers N``); it
reads the settings the parent put in ``SHORTLIST_SERVER_SETTINGS``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from shortlist.server._errors import install_error_handlers
from shortlist.server._middleware import ServiceMiddleware
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import compat_cohere as compat_cohere
from shortlist.server._routes import compat_tei as compat_tei
from shortlist.server._routes import decisions as decision_routes
from shortlist.server._routes import feedback as feedback
from shortlist.server._routes import health as health
from shortlist.server._routes import interop as interop
from shortlist.server._routes import memory as memory
from shortlist.server._routes import offer as offer
from shortlist.server._routes import reduce as reduce
from shortlist.server._routes import retrieve as retrieve
from shortlist.server._routes import select as select
from shortlist.server._routes import selectors as selectors
from shortlist.server._settings import ServerSettings
from shortlist.server._state import ServiceState

__all__ = ["app_from_env", "create_app"]

logger = logging.getLogger("shortlist.server")

_DESCRIPTION = (
    "Decide what enters an LLM agent's context each turn: tool and skill selection, corpus retrieval, "
    "memory and context reduction. Send `Authorization: Bearer KEY` when the server has API keys."
)


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in (
        (400, "A value the library refuses (e.g. an invalid memory scope)"),
        (401, "Missing or invalid API key"),
        (403, "Not allowed (non-loopback client without configured keys, or a memory scope outside the key)"),
        (404, "Unknown catalog, selector or corpus, or no feedback log bound"),
        (413, "Body, candidate or text count over the server's limit"),
        (422, "Invalid request"),
        (503, "A shared store (memory database, feedback log, PostgreSQL corpus index) is down; retry later"),
        (507, "The memory store is out of space (full disk); nothing was written"),
        (504, "Not answered within the request timeout"),
    )
}


def create_app(settings: ServerSettings | None = None, *, service: ServiceState | None = None) -> FastAPI:
    """Build the service app.

    Args:
        settings: the service settings (default: from the environment).
        service: a state already built (and started) for ``settings``, which the app then owns
            (``shortlist serve`` with one worker starts it before uvicorn, so a start-up error is
            its one-line error); None: the lifespan builds and starts one.

    Raises:
        ConfigError: at start-up, a bad runtime config, catalog or memory store URL.
    """
    settings = settings or ServerSettings.from_env()
    from shortlist import __version__

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = service if service is not None else ServiceState(settings)
        app.state.service = state
        executor = ThreadPoolExecutor(max_workers=settings.selection_threads, thread_name_prefix="shortlist-select")
        asyncio.get_running_loop().set_default_executor(executor)
        try:
            if not state.ready:
                state.start()
            # Catalogs, indexes and models loaded at start-up live as long as the process:
            # moving them out of the collector's reach keeps full collections (tens of ms
            # on a large heap) out of request latency.
            gc.collect()
            gc.freeze()
            logger.info("shortlist service ready (catalogs: %s)", {k: len(v) for k, v in state.catalogs.items()})
            yield
        finally:
            logger.info("shortlist service shutting down")
            state.close()
            executor.shutdown(wait=False, cancel_futures=True)

    # Swagger UI and ReDoc load their scripts from a CDN (blank offline) and FastAPI serves them
    # without any key: with keys they are off, and clients read /openapi.json (see docs/deploy.md).
    docs = not settings.api_keys
    app = FastAPI(
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        responses=_ERROR_RESPONSES,
        title="shortlist",
        version=__version__,
        description=_DESCRIPTION,
        lifespan=lifespan,
        default_response_class=FastJSONResponse,
    )
    app.state.settings = settings
    install_error_handlers(app)
    for module in (
        select,
        offer,
        feedback,
        selectors,
        retrieve,
        reduce,
        memory,
        interop,
        compat_cohere,
        compat_tei,
        health,
    ):
        app.include_router(module.router)
    app.include_router(decision_routes.router)  # GET /decisions, /v1/decisions: what the routes above decided
    app.add_middleware(
        ServiceMiddleware,
        max_body_bytes=settings.max_body_bytes,
        timeout_s=settings.request_timeout_s,
        health_port=settings.health_port,
    )
    return app


def app_from_env() -> FastAPI:
    """The app of one worker process, from the settings in ``SHORTLIST_SERVER_SETTINGS``."""
    return create_app(ServerSettings.from_env())
