"""Connection limits uvicorn lacks: a header deadline, and caps on connections per worker and per client.

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
- **per-client cap** (``limit_connections_per_client``): a connection from a source address that
  already holds that many is answered ``503`` and closed the same way, so one client (1,000 idle
  sockets that never send a byte) cannot fill the worker's cap and starve every other client.
  Counted per worker and per listener; behind a load balancer every connection comes from the
  balancer, which must then limit per client itself (``deploy/nginx.conf``: ``limit_conn``).
- **health listener** (``health_port``): connections to a second socket, which serves only
  ``/healthz`` and ``/readyz`` (see :class:`~shortlist.server._middleware.ServiceMiddleware`), are
  counted apart: they neither use the main cap nor are refused because it is full, so a probe is
  never starved by the traffic of the service port. Their own cap is
  :data:`HEALTH_LIMIT_CONNECTIONS` per worker (and the per-client cap applies).

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
import weakref
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import get_local_addr, get_remote_addr

from shortlist._events import Event, emit

__all__ = [
    "HEALTH_LIMIT_CONNECTIONS",
    "ConnectionClosed",
    "H11LimitedProtocol",
    "HttpToolsLimitedProtocol",
    "ServiceConfig",
]

logger = logging.getLogger("shortlist.server")

_SUMMARY_EVERY_S = 10.0

#: Open connections per worker on the health listener (probes open one at a time).
HEALTH_LIMIT_CONNECTIONS = 64


@dataclass(frozen=True, kw_only=True)
class ConnectionClosed(Event):
    """The server closed or refused a connection.

    ``reason``: ``header_timeout`` (no complete header within ``timeout_s``; answered 408),
    ``idle`` (kept alive ``timeout_s`` without a new request), ``over_limit`` (more than
    ``limit`` connections open; answered 503) or ``client_over_limit`` (more than ``limit``
    connections open from ``client``'s address; answered 503). ``listener`` is ``service`` or
    ``health`` (the ``--health-port`` socket).
    """

    name: ClassVar[str] = "server.connection_closed"
    area: ClassVar[str] = "server"
    level: int = logging.DEBUG
    reason: str = ""
    client: str = ""
    timeout_s: float = 0.0
    open_connections: int = 0
    limit: int = 0
    listener: str = "service"


class ServiceConfig(uvicorn.Config):
    """A uvicorn ``Config`` with the connection limits of :mod:`shortlist.server._protocol`.

    It travels to worker processes pickled, like uvicorn's, so the limits apply in every worker.

    ``shortlist serve`` sets every limit (its flags hold the defaults).

    Args:
        app: the ASGI app or its import string.
        timeout_header: seconds for a whole request header (0: no deadline).
        limit_connections: open connections per worker (None: no cap).
        limit_connections_per_client: open connections per worker from one source address
            (None: no cap).
        health_port: the port of the health listener, whose connections are counted apart
            (None: no health listener).
        startup_timeout: seconds a worker may take to start (load models, warm selectors) before
            the supervisor replaces it (see :mod:`shortlist.server._supervisor`).
        **kwargs: uvicorn's ``Config`` arguments. ``http`` defaults to this module's protocols.
    """

    def __init__(
        self,
        app: Any,
        *,
        timeout_header: float,
        limit_connections: int | None,
        startup_timeout: float,
        limit_connections_per_client: int | None = None,
        health_port: int | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("http", _auto_protocol())
        super().__init__(app, **kwargs)
        self.timeout_header = float(timeout_header)
        self.limit_connections = limit_connections
        self.limit_connections_per_client = limit_connections_per_client
        self.health_port = health_port
        self.startup_timeout = float(startup_timeout)


def _auto_protocol() -> str:
    # uvicorn's "auto" picks httptools when installed; uvicorn[standard] installs it
    return "shortlist.server._protocol:HttpToolsLimitedProtocol"


class _Summary:
    """Counts closes per reason and logs one WARNING line at most every ``_SUMMARY_EVERY_S``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._since = time.monotonic()
        self._logged: float | None = None  # when the last line was logged (the first close logs at once)

    def add(self, reason: str, timeout_s: float, limit: int) -> None:
        with self._lock:
            self._counts[reason] = self._counts.get(reason, 0) + 1
            now = time.monotonic()
            if self._logged is not None and now - self._logged < _SUMMARY_EVERY_S:
                return  # (a flood of refusals was one line per refusal: the log itself was the load)
            self._logged = now
            counts, self._counts, since, self._since = self._counts, {}, self._since, now
        logger.warning(
            "closed connections in the last %.0f s: %s (header deadline %g s, the last cap hit: %d connections "
            "per worker; counted in shortlist_http_connections_closed_total)",
            now - since,
            ", ".join(f"{n} {r}" for r, n in sorted(counts.items())),
            timeout_s,
            limit,
            extra={"metric": "shortlist_http_connections_closed_total", "closed": counts},
        )


_summary = _Summary()


@dataclass
class _Counts:
    """Open connections of one server (a worker), per listener and per (listener, client address)."""

    listeners: dict[bool, int] = field(default_factory=dict)
    clients: dict[tuple[bool, str], int] = field(default_factory=dict)

    def add(self, health: bool, client: str, step: int) -> None:
        self.listeners[health] = self.listeners.get(health, 0) + step
        key = (health, client)
        n = self.clients.get(key, 0) + step
        if n > 0:
            self.clients[key] = n
        else:
            self.clients.pop(key, None)


# one per uvicorn server (its ServerState, shared by its protocols), gone with it
_counts: weakref.WeakKeyDictionary[Any, _Counts] = weakref.WeakKeyDictionary()


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
    server: tuple[str, int | None] | None
    server_state: Any

    _header_timer: asyncio.TimerHandle | None = None
    _health: bool = False
    _counted: _Counts | None = None
    _refusal = False

    @property
    def _timeout_header(self) -> float:
        return float(getattr(self.config, "timeout_header", 0.0))

    @property
    def _limit(self) -> int | None:
        if self._health:
            return HEALTH_LIMIT_CONNECTIONS
        limit: int | None = getattr(self.config, "limit_connections", None)
        return limit

    @property
    def _client_limit(self) -> int | None:
        limit: int | None = getattr(self.config, "limit_connections_per_client", None)
        return limit

    @property
    def _address(self) -> str:
        return self.client[0] if self.client else ""

    def _closed(self, reason: str, timeout_s: float = 0.0, limit: int | None = None) -> None:
        limit = (self._limit if limit is None else limit) or 0
        emit(
            ConnectionClosed(
                reason=reason,
                client=self._address,
                timeout_s=timeout_s,
                open_connections=len(self.connections),
                limit=limit,
                listener="health" if self._health else "service",
            )
        )
        if reason != "idle":
            _summary.add(reason, self._timeout_header, limit)

    def _uncount(self) -> None:
        if self._counted is not None:
            self._counted.add(self._health, self._address, -1)
            self._counted = None

    def _refused(self, transport: asyncio.Transport) -> bool:
        """Count a new connection; refuse it (503, closed) before uvicorn sets it up when over a cap.

        A refusal costs little (no parser state, no entry in uvicorn's connection set), since a
        client held at its cap may reconnect in a loop.
        """
        self.transport = transport
        self.client = get_remote_addr(transport)
        self.server = get_local_addr(transport)
        self._refusal = self._over_limit()
        return self._refusal

    def _refuse(self, reason: str, limit: int, message: str) -> bool:
        self.transport.write(_response("503 Service Unavailable", "overloaded", message, "retry-after: 1\r\n"))
        self.transport.close()
        self._closed(reason, limit=limit)
        return True

    def _over_limit(self) -> bool:
        """Refuse this new connection (503, closed) when its address or its listener holds its cap.

        A refused connection is never counted, so a burst of refusals cannot crowd out others.
        """
        health_port = getattr(self.config, "health_port", None)
        self._health = health_port is not None and self.server is not None and self.server[1] == health_port
        counts = _counts.get(self.server_state)
        if counts is None:
            counts = _counts[self.server_state] = _Counts()
        per_client = self._client_limit
        if per_client is not None and counts.clients.get((self._health, self._address), 0) >= per_client:
            return self._refuse(
                "client_over_limit",
                per_client,
                f"this worker holds its limit of {per_client} connections from your address; retry",
            )
        limit = self._limit
        if limit is not None and counts.listeners.get(self._health, 0) >= limit:
            return self._refuse("over_limit", limit, f"this worker holds its limit of {limit} connections; retry")
        counts.add(self._health, self._address, 1)  # uncounted when the connection is lost
        self._counted = counts
        return False

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
        if self._refused(transport):
            return
        super().connection_made(transport)
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
        self._uncount()
        if not self._refusal:  # a refused connection never reached uvicorn's protocol
            super().connection_lost(exc)


class HttpToolsLimitedProtocol(_Limits, HttpToolsProtocol):  # type: ignore[misc, unused-ignore]
    """uvicorn's ``httptools`` protocol with a header deadline and a connection cap."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self._refused(transport):
            return
        super().connection_made(transport)
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
        self._uncount()
        if not self._refusal:  # a refused connection never reached uvicorn's protocol
            super().connection_lost(exc)
