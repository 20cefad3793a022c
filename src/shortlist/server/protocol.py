"""Connection limits uvicorn lacks: a deadline for the request header, and a cap on connections per worker.

uvicorn (0.54, both its ``httptools`` and ``h11`` protocols) arms its keep-alive timer only
*after a response* and cancels it on every byte received, so a client that connects and sends
part of a header, or nothing at all, holds its connection (and a file descriptor) forever: 500 of
500 half-header connections were still open after 12 s, bounded only by the fd limit. Its
``limit_concurrency`` is checked only once a header is complete, so such connections are never
refused either, and its refusal is a bare log line.

The protocols here are uvicorn's, with three additions, configured by :class:`ServiceConfig`:

- **header deadline** (``timeout_header``): from the moment a connection opens, or the first byte
  of the next request on a kept-alive connection, the full header must arrive within the deadline.
  It is not restarted by further bytes, so trickling one header line at a time (slowloris) does
  not extend it. On expiry the server answers ``408`` and closes.
- **idle** connections (no request after a response) are closed by uvicorn's own keep-alive timer
  (``timeout_keep_alive``); the close is now counted.
- **connection cap** (``limit_connections``): a connection beyond the cap is answered ``503`` with
  ``Retry-After`` and closed at once, so descriptors stay bounded.

A slow *body* is bounded by the service's request timeout (``--timeout``, 504), which covers the
app reading it. Every close or refusal is a :class:`ConnectionClosed` event (DEBUG, one per
connection, counted in ``shortlist_http_connections_closed_total{reason}``); timeouts of a header
and refusals also log one WARNING summary at most every 10 s per worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from shortlist.events import Event, emit

__all__ = [
    "ConnectionClosed",
    "H11LimitedProtocol",
    "HttpToolsLimitedProtocol",
    "ServiceConfig",
]

logger = logging.getLogger("shortlist.server")

_SUMMARY_EVERY_S = 10.0


@dataclass(frozen=True, kw_only=True)
class ConnectionClosed(Event):
    """The server closed or refused a connection.

    ``reason``: ``header_timeout`` (no complete header within ``timeout_s``; answered 408),
    ``idle`` (kept alive ``timeout_s`` without a new request) or ``over_limit`` (more than
    ``limit`` connections open; answered 503).
    """

    name: ClassVar[str] = "server.connection_closed"
    area: ClassVar[str] = "server"
    level: int = logging.DEBUG
    reason: str = ""
    client: str = ""
    timeout_s: float = 0.0
    open_connections: int = 0
    limit: int = 0


class ServiceConfig(uvicorn.Config):
    """A uvicorn ``Config`` with the connection limits of :mod:`shortlist.server.protocol`.

    It travels to worker processes pickled, like uvicorn's, so the limits apply in every worker.

    ``shortlist serve`` sets every limit (its flags hold the defaults).

    Args:
        app: the ASGI app or its import string.
        timeout_header: seconds for a whole request header (0: no deadline).
        limit_connections: open connections per worker (None: no cap).
        startup_timeout: seconds a worker may take to start (load models, warm selectors) before
            the supervisor replaces it (see :mod:`shortlist.server.supervisor`).
        **kwargs: uvicorn's ``Config`` arguments. ``http`` defaults to this module's protocols.
    """

    def __init__(
        self,
        app: Any,
        *,
        timeout_header: float,
        limit_connections: int | None,
        startup_timeout: float,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("http", _auto_protocol())
        super().__init__(app, **kwargs)
        self.timeout_header = float(timeout_header)
        self.limit_connections = limit_connections
        self.startup_timeout = float(startup_timeout)


def _auto_protocol() -> str:
    # uvicorn's "auto" picks httptools when installed; uvicorn[standard] installs it
    return "shortlist.server.protocol:HttpToolsLimitedProtocol"


class _Summary:
    """Counts closes per reason and logs one WARNING line at most every ``_SUMMARY_EVERY_S``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._since = time.monotonic()

    def add(self, reason: str, timeout_s: float, limit: int) -> None:
        with self._lock:
            self._counts[reason] = self._counts.get(reason, 0) + 1
            now = time.monotonic()
            if now - self._since < _SUMMARY_EVERY_S and sum(self._counts.values()) > 1:
                return
            counts, self._counts, since, self._since = self._counts, {}, self._since, now
        logger.warning(
            "closed connections in the last %.0f s: %s (header deadline %g s, connection cap %d per worker; "
            "counted in shortlist_http_connections_closed_total)",
            now - since,
            ", ".join(f"{n} {r}" for r, n in sorted(counts.items())),
            timeout_s,
            limit,
            extra={"metric": "shortlist_http_connections_closed_total", "closed": counts},
        )


_summary = _Summary()


def _response(status: str, code: str, message: str, extra: str = "") -> bytes:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"{extra}connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Limits:
    """The deadline/cap logic shared by both protocols (a mixin over uvicorn's protocol classes)."""

    config: uvicorn.Config
    connections: set[Any]
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    client: tuple[str, int] | None

    _header_timer: asyncio.TimerHandle | None = None

    @property
    def _timeout_header(self) -> float:
        return float(getattr(self.config, "timeout_header", 0.0))

    @property
    def _limit(self) -> int | None:
        limit: int | None = getattr(self.config, "limit_connections", None)
        return limit

    def _closed(self, reason: str, timeout_s: float = 0.0) -> None:
        limit = self._limit or 0
        emit(
            ConnectionClosed(
                reason=reason,
                client=self.client[0] if self.client else "",
                timeout_s=timeout_s,
                open_connections=len(self.connections),
                limit=limit,
            )
        )
        if reason != "idle":
            _summary.add(reason, self._timeout_header, limit)

    def _over_limit(self) -> bool:
        """Refuse this new connection (503, closed) when the worker holds more than the cap."""
        limit = self._limit
        if limit is None or len(self.connections) <= limit:
            return False
        self.transport.write(
            _response(
                "503 Service Unavailable",
                "overloaded",
                f"this worker holds its limit of {limit} connections; retry",
                "retry-after: 1\r\n",
            )
        )
        self.transport.close()
        self._closed("over_limit")
        return True

    def _arm_header_deadline(self) -> None:
        timeout = self._timeout_header
        if self._header_timer is None and timeout > 0 and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(timeout, self._header_deadline_passed)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_deadline_passed(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        timeout = self._timeout_header
        self.transport.write(
            _response(
                "408 Request Timeout",
                "header_timeout",
                f"the request header was not complete within {timeout:g} s",
            )
        )
        self.transport.close()
        self._closed("header_timeout", timeout)


class H11LimitedProtocol(_Limits, H11Protocol):
    """uvicorn's ``h11`` protocol with a header deadline and a connection cap."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self._over_limit():
            self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the header is complete (or the request failed)
            self._disarm_header_deadline()

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self._closed("idle", float(self.timeout_keep_alive))
        super().timeout_keep_alive_handler()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)


class HttpToolsLimitedProtocol(_Limits, HttpToolsProtocol):  # type: ignore[misc]
    """uvicorn's ``httptools`` protocol with a header deadline and a connection cap."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self._over_limit():
            self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self._arm_header_deadline()  # the first byte of a request (no-op while armed)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._disarm_header_deadline()
        super().on_headers_complete()

    def timeout_keep_alive_handler(self) -> None:
        if not self.transport.is_closing():
            self._closed("idle", float(self.timeout_keep_alive))
        super().timeout_keep_alive_handler()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)
