"""One pure-ASGI middleware for every request: body-size limit, deadline, metrics and the access log.

On the health listener (``serve --health-port``) it answers only :data:`HEALTH_PATHS`; any
other path there is 404 ``not_found``, so the probe port never serves the API.

Pure ASGI (not ``BaseHTTPMiddleware``) because it runs on every request of a service whose
target is hundreds of selections per second per core. The access log is one structured record
per request (method, route template, status, duration, client, key label) on the
``shortlist.server.access`` logger: no header values, no bodies, no memory contents.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shortlist.server._errors import error_body
from shortlist.server._metrics import ServiceMetrics

__all__ = ["HEALTH_PATHS", "ServiceMiddleware"]

#: What the health listener serves.
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})

access_log = logging.getLogger("shortlist.server.access")


def _too_large(limit: int) -> HTTPException:
    # an HTTPException, so FastAPI re-raises it from body parsing and the app's handler answers 413
    return HTTPException(413, f"request body exceeds the limit of {limit} bytes")


class ServiceMiddleware:
    """Enforce ``max_body_bytes`` (413) and ``timeout_s`` (504); record metrics and one access-log line.

    Args:
        app: the wrapped ASGI app.
        max_body_bytes: the largest request body accepted.
        timeout_s: a request not answered within this many seconds gets 504.
        health_port: the health listener's port, which serves only :data:`HEALTH_PATHS` (None: none).
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, timeout_s: float, health_port: int | None = None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.timeout_s = timeout_s
        self.health_port = health_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        server = scope.get("server")
        on_health = self.health_port is not None and server is not None and server[1] == self.health_port
        if on_health and scope.get("path") not in HEALTH_PATHS:
            message = f"port {self.health_port} is the health listener: it serves only /healthz and /readyz"
            await _send_json(send, 404, error_body("not_found", message))
            return
        start = time.perf_counter()
        status = 500
        started = False
        limit = self.max_body_bytes

        async def send_wrapper(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status = int(message["status"])
                started = True
            await send(message)

        received = 0

        async def receive_wrapper() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _too_large(limit)
            return message

        try:
            length = _content_length(scope)
            if length is not None and length > limit:
                raise _too_large(limit)
            async with asyncio.timeout(self.timeout_s):
                await self.app(scope, receive_wrapper, send_wrapper)
        except HTTPException as exc:
            if not started:
                await _send_json(send_wrapper, exc.status_code, error_body("too_large", str(exc.detail)))
        except TimeoutError:
            if not started:
                await _send_json(
                    send_wrapper, 504, error_body("timeout", f"request not answered within {self.timeout_s:g} s")
                )
        except Exception:  # answered here so the client gets a clean 500, never a reset connection or a trace
            logging.getLogger("shortlist.server").error(
                "unhandled error on %s %s", scope.get("method"), _route_of(scope), exc_info=True
            )
            if not started:
                await _send_json(
                    send_wrapper, 500, error_body("internal", "internal server error; the server log has the details")
                )
        finally:
            elapsed = time.perf_counter() - start
            route = _route_of(scope)
            method = str(scope.get("method", ""))
            metrics = _metrics_of(scope)
            if metrics is not None:
                metrics.observe_request(route, method, status, elapsed)
            client = scope.get("client")
            state: dict[str, Any] = scope.get("state") or {}
            access_log.info(
                "%s %s %d %.1fms",
                method,
                route,
                status,
                elapsed * 1000,
                extra={
                    "http": {
                        "method": method,
                        "route": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                        "client": client[0] if client else None,
                        "key": state.get("key_label"),
                    }
                },
            )


def _metrics_of(scope: Scope) -> ServiceMetrics | None:
    service = getattr(getattr(scope.get("app"), "state", None), "service", None)
    return getattr(service, "metrics", None)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})
