"""One MCP server connection: owned by a background task that holds the SDK's transport and session
(stdio: the process, its stderr kept in a temporary file; HTTP: the streamable session), opened and
closed on request; and which errors mean the connection is gone (the caller reconnects once).
Used by :class:`shortlist.mcp._client.MCPClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import tempfile
from typing import IO, TYPE_CHECKING, Any

from shortlist._types import Candidate
from shortlist.errors import MCPServerError

if TYPE_CHECKING:
    from shortlist.mcp._client import MCPServerSpec

__all__ = ["Connection", "is_connection_error"]

logger = logging.getLogger("shortlist.mcp")

_CONNECTION_CLOSED = -32000


def is_connection_error(exc: BaseException) -> bool:
    import anyio
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, BaseExceptionGroup):
        return any(is_connection_error(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):  # closed stream, or an HTTP session the server no longer knows
        message = exc.message.lower()
        return exc.code == _CONNECTION_CLOSED or "session not found" in message or "session terminated" in message
    transport_errors: tuple[type[BaseException], ...] = ()
    with contextlib.suppress(ImportError):
        import httpx2

        transport_errors = (httpx2.TransportError,)
    return isinstance(
        exc,
        (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError, EOFError, *transport_errors),
    )


class Connection:
    """One server connection, owned by a background task that holds the SDK's context managers."""

    def __init__(self, spec: MCPServerSpec, *, connect_timeout_s: float, call_timeout_s: float) -> None:
        self.spec = spec
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.session: Any = None
        self.tools: list[Candidate] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._errlog: IO[str] | None = None

    def stderr_tail(self, limit: int = 800) -> str:
        """The end of what the stdio process wrote on stderr."""
        if self._errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._errlog.flush()
            self._errlog.seek(0)
            return self._errlog.read()[-limit:].strip()
        return ""

    @property
    def alive(self) -> bool:
        return self.session is not None and self._task is not None and not self._task.done()

    def _transport(self) -> Any:
        if self.spec.command:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=self.spec.command[0],
                args=list(self.spec.command[1:]),
                env=dict(self.spec.env) if self.spec.env is not None else None,
                cwd=self.spec.cwd,
            )
            self._close_errlog()
            self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            return stdio_client(params, errlog=self._errlog)
        from mcp.client.streamable_http import streamable_http_client

        assert self.spec.url is not None
        if self.spec.headers:
            import httpx2

            client = httpx2.AsyncClient(headers=dict(self.spec.headers), timeout=self.call_timeout_s)
            return streamable_http_client(self.spec.url, http_client=client)
        return streamable_http_client(self.spec.url)

    async def _run(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport())
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=self.call_timeout_s)
                )
                await session.initialize()
                self.session = session
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPServerError(repr(exc)))
            elif not isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
                logger.debug("MCP server %s: connection ended: %r", self.spec.name, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None

    async def open(self) -> None:
        """Start the server / open the session and initialise it."""
        await self.close()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        self.tools = None
        self._task = asyncio.create_task(self._run(ready, self._stop), name=f"mcp-{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout=self.connect_timeout_s)
        except asyncio.CancelledError:
            await self.close()
            raise
        except Exception as exc:
            await self.close(keep_errlog=True)
            where = self.spec.url or shlex.join(self.spec.command)
            tail = self.stderr_tail()
            self._close_errlog()
            detail = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            raise MCPServerError(
                f"MCP server {self.spec.name!r} ({where}) did not start: {detail}"
                + (f"; stderr: {tail[-300:]}" if tail else "")
            ) from exc

    def _close_errlog(self) -> None:
        errlog, self._errlog = self._errlog, None
        if errlog is not None:
            errlog.close()

    async def close(self, *, keep_errlog: bool = False) -> None:
        """Close the session, stop the process and delete its stderr file (no error if not open).

        ``keep_errlog``: keep the stderr file for :meth:`stderr_tail` (the caller closes it).
        """
        task, stop = self._task, self._stop
        self._task = self._stop = None
        self.session = None
        try:
            if task is None:
                return
            if stop is not None:
                stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=5.0)
            except BaseException:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        finally:
            if not keep_errlog:
                self._close_errlog()
