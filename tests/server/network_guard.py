"""Refuse every connection and name lookup beyond loopback, so a client library cannot reach the network.

``install()`` patches ``socket.getaddrinfo`` and ``socket.socket.connect``/``connect_ex`` (what
httpx, requests, aiohttp and asyncio end in) and returns a function that undoes it. A refused
attempt raises ``OSError("network guard: ...")`` and is recorded in ``ATTEMPTS``, so a test can
assert that nothing tried.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["ATTEMPTS", "install"]

#: Every refused host or address, in order.
ATTEMPTS: list[str] = []


def _loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if host is None or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def install() -> Callable[[], None]:
    """Patch the socket module; return the function that restores it."""
    getaddrinfo, connect, connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex

    def refuse(what: Any) -> OSError:
        ATTEMPTS.append(str(what))
        return OSError(f"network guard: {what!r} is not loopback")

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _loopback(host):
            raise refuse(host)
        return getaddrinfo(host, *args, **kwargs)

    def _check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            raise refuse(address)

    def guarded_connect(self: socket.socket, address: Any) -> None:
        _check(self, address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        _check(self, address)
        return connect_ex(self, address)

    socket.getaddrinfo = guarded_getaddrinfo
    socket.socket.connect = guarded_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign,assignment]

    def restore() -> None:
        socket.getaddrinfo = getaddrinfo
        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]

    return restore
