"""Per-worker listening sockets, so the kernel spreads connections evenly across workers.

uvicorn's ``--workers`` shares one listening socket among the worker processes: whichever worker
calls ``accept()`` first takes the connection. A burst of long-lived keep-alive connections (a
load balancer's pool, a load generator) can then land mostly on one worker (32/0 and 27/5 splits
of 32 connections were seen), leaving the other core idle. On Linux, ``SO_REUSEPORT`` gives each
worker its own listening socket on the same address and the kernel hashes each new connection to
one of them.

The parent process binds a :class:`ReusePortSocket` (never listening: it only reserves the
address and fixes the port when 0 was asked). uvicorn passes it to each worker by pickling it
(the ``spawn`` start method); unpickled in the worker, it becomes that worker's own socket on the
same address, which the worker's server starts listening on when the app is ready, so a worker
still loading gets no connections. A restarted worker gets a new one the same way. Until the
first worker is ready, connections are refused rather than queued. One caveat of
``SO_REUSEPORT``: connections still queued, not yet accepted, on a worker that dies are reset.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

__all__ = ["ReusePortSocket", "bind_exclusive", "reuseport_supported"]


def reuseport_supported() -> bool:
    """True where ``SO_REUSEPORT`` balances connections across listening sockets (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def bind_exclusive(host: str, port: int, *, keep: bool = True) -> socket.socket:
    """Bind ``host:port`` without ``SO_REUSEPORT`` (as uvicorn binds one socket), not listening yet.

    It fails while any other socket holds the address, even one bound with ``SO_REUSEPORT`` by
    another server (which a :class:`ReusePortSocket` would silently share the port with). With
    ``keep=False`` the socket is closed again (a check before binding a :class:`ReusePortSocket`).

    Raises:
        OSError: the address cannot be bound (in use, not local, …).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    if not keep:
        sock.close()
    return sock


def _bind_reuseport(sock: socket.socket, host: str, port: int) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))


def _worker_socket(family: int, host: str, port: int) -> socket.socket:
    """A worker's own socket on the reserved address (what a pickled reservation becomes).

    Bound but not listening: the worker's server listens on it once the app has started (warm
    selectors, loaded models), so the kernel never hands a connection to a worker still starting.
    """
    sock = socket.socket(family, socket.SOCK_STREAM)
    _bind_reuseport(sock, host, port)
    sock.set_inheritable(True)
    return sock


class ReusePortSocket(socket.socket):
    """The parent's reservation of ``host:port``: bound with ``SO_REUSEPORT``, never listening.

    Pickling it (to start a worker) yields a new listening socket on the same address instead of
    a duplicate of this one.

    Args:
        host: the address to bind.
        port: the port (0: a free one, fixed here for every worker).
        backlog: the workers' listen backlog.

    Raises:
        OSError: the address cannot be bound (in use, not local, …).
    """

    def __init__(self, host: str, port: int, backlog: int = 2048) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__(family, socket.SOCK_STREAM)
        try:
            _bind_reuseport(self, host, port)
        except OSError:
            self.close()
            raise
        self.backlog = backlog

    def __reduce__(self) -> tuple[Any, ...]:
        host, port = self.getsockname()[:2]
        return (_worker_socket, (self.family, host, port))
