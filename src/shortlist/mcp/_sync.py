"""A blocking wrapper of :class:`~shortlist.mcp._client.MCPClient` for the CLI and sync hosts.

The async client runs on a private event loop in a daemon thread; every method submits a
coroutine to it and waits. One :class:`MCPToolSource` may be used from several threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from shortlist._events import EventHook
from shortlist._types import Candidate
from shortlist.mcp._client import MCPCallResult, MCPClient, MCPServerSpec, require_mcp

__all__ = ["MCPToolSource"]

T = TypeVar("T")


class MCPToolSource:
    """Live MCP servers as a blocking tool source.

    Args:
        servers: the servers to connect to.
        connect_timeout_s: how long a server may take to start.
        call_timeout_s: how long one request may take.
        hooks: event hooks for the client's events.

    Use as a context manager (connects on enter, stops the servers on exit) or call
    :meth:`start` / :meth:`close`.
    """

    def __init__(
        self,
        servers: Sequence[MCPServerSpec],
        *,
        connect_timeout_s: float = 30.0,
        call_timeout_s: float = 60.0,
        hooks: Sequence[EventHook] = (),
    ) -> None:
        require_mcp()
        self._servers = tuple(servers)
        self._options: dict[str, Any] = {
            "connect_timeout_s": connect_timeout_s,
            "call_timeout_s": call_timeout_s,
            "hooks": tuple(hooks),
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: MCPClient | None = None
        self._timeout = connect_timeout_s + call_timeout_s + 10

    @property
    def client(self) -> MCPClient:
        """The async client (use it only from this source's loop)."""
        if self._client is None:
            raise RuntimeError("MCPToolSource is not started")
        return self._client

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("MCPToolSource is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=self._timeout)

    def start(self) -> None:
        """Start the loop thread and connect to every server.

        Raises:
            MCPServerError: a server did not start.
        """
        if self._loop is not None:
            return
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="shortlist-mcp", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread

        async def make() -> MCPClient:
            client = MCPClient(self._servers, **self._options)
            await client.start()
            return client

        try:
            self._client = self._run(make())
        except BaseException:
            self._stop_loop()
            raise

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        if not loop.is_running():
            loop.close()

    def close(self) -> None:
        """Disconnect, stop the server processes and the loop thread."""
        if self._loop is not None and self._client is not None:
            try:
                self._run(self._client.close())
            finally:
                self._client = None
        self._stop_loop()

    def __enter__(self) -> MCPToolSource:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_candidates(self, *, refresh: bool = False) -> list[Candidate]:
        """Every server's tools as ``mcp__<server>__<tool>`` candidates."""
        return self._run(self.client.list_candidates(refresh=refresh))

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> MCPCallResult:
        """Call a tool by its prefixed name (reconnecting once if its server dropped)."""
        return self._run(self.client.call(name, arguments))
