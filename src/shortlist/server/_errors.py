"""Error responses of the service: one JSON shape, clear messages, never a stack trace.

Every error body is ``{"error": {"code": "...", "message": "..."}}``. Validation errors list
the failing locations but never echo the submitted values (they may hold memory contents).
Anything unexpected is logged with its traceback on the server and answered ``500 internal``. A
failure that may pass on its own (an :class:`~shortlist.errors.OperationalError` with ``retry_after``:
a memory, feedback or index database that is down) is ``503 unavailable`` with ``Retry-After``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from shortlist.errors import (
    RETRY_AFTER_S,
    ContextBudgetError,
    DocumentTooDeep,
    MemoryStoreCorrupt,
    MemoryStoreFull,
    OperationalError,
    ShortlistError,
    UsageError,
)

__all__ = ["ApiError", "error_body", "install_error_handlers", "retry_after_headers"]

logger = logging.getLogger("shortlist.server")


class ApiError(Exception):
    """An error the API answers on purpose.

    Args:
        status: the HTTP status.
        code: a short machine-readable code (``unauthorized``, ``too_large``, …).
        message: what went wrong and, where possible, how to fix it.
        headers: extra response headers (``WWW-Authenticate`` on 401).
        extra: more fields of the ``error`` object (OpenAI's ``type`` and ``param``).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.extra = extra or {}


def retry_after_headers(seconds: float = RETRY_AFTER_S) -> dict[str, str]:
    """The ``Retry-After`` header of a 503 whose cause may pass in about ``seconds`` (whole seconds, at least 1)."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of an error response."""
    err: dict[str, Any] = {"code": code, "message": message}
    err.update(extra)
    return {"error": err}


def _json(status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(code, message, **extra), status_code=status, headers=headers)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return _json(exc.status, exc.code, exc.message, exc.headers, **exc.extra)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 403: "forbidden", 413: "too_large"}.get(
        exc.status_code, "http_error"
    )
    headers = dict(exc.headers) if exc.headers else None
    return _json(exc.status_code, code, str(exc.detail), headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in exc.errors()[:20]
    ]
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    message = f"invalid request: {'.'.join(first['loc'])}: {first['msg']}"
    return _json(422, "invalid_request", message, details=details)


async def _shortlist_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ShortlistError)
    if isinstance(exc, ContextBudgetError):
        return _json(422, "over_budget", str(exc), over_tokens=exc.over_tokens, over_chars=exc.over_chars)
    if isinstance(exc, DocumentTooDeep):
        return _json(422, "too_deep", str(exc))
    if isinstance(exc, UsageError):  # any other mistake of the caller's: config, catalog, memory scope or value
        return _json(400, "bad_request", str(exc))
    if isinstance(exc, OperationalError) and exc.retry_after is not None:  # a database down: it may pass
        return _json(503, "unavailable", str(exc), headers=retry_after_headers(exc.retry_after))
    if isinstance(exc, MemoryStoreFull):  # its disk is full: the operator must act
        logger.error("request failed: %s: %s", type(exc).__name__, exc)
        return _json(507, "insufficient_storage", _STORE_FULL)
    if isinstance(exc, MemoryStoreCorrupt):  # its file is damaged: the operator must act
        logger.error("request failed: %s: %s", type(exc).__name__, exc)
        return _json(500, "store_corrupted", _STORE_CORRUPT)
    logger.warning("request failed: %s: %s", type(exc).__name__, exc)
    return _json(502, "upstream_failed", f"{type(exc).__name__}: {exc}")


# What a client is told of a store failure: its kind, not the server's file paths.
_STORE_FULL = "the memory store is out of space; nothing was written. The server log has the details"
_STORE_CORRUPT = "the memory store is damaged; the server log names the file. Nothing was written"


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _json(500, "internal", "internal server error; the server log has the details")


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the one JSON shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ShortlistError, _shortlist_error)
    app.add_exception_handler(Exception, _unexpected)
