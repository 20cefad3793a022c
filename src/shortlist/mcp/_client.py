"""Live MCP servers as a tool source, over stdio or streamable HTTP, with the official ``mcp`` SDK.

:class:`MCPClient` (async) connects to several servers, lists their tools as candidates named
``mcp__<server>__<tool>`` and calls a tool by that name. Each connection is owned by one
background task (the SDK's transports are task-scoped context managers), so any task of the
same event loop may use the client. :class:`~shortlist.mcp._sync.MCPToolSource` is the
blocking wrapper for the CLI.

**Reconnect policy.** A call or listing that fails because the connection is gone (the
process exited, the stream closed, ``CONNECTION_CLOSED``, an HTTP transport error, or an
HTTP session the server no longer knows) restarts the stdio process /
reopens the HTTP session and is retried **once**; a second failure is an
:class:`MCPServerError`. A tool that answers with an error, or a call that times out, is not
retried (the server is alive; a side-effecting call must not run twice). Each reconnect is an
:class:`MCPReconnected` event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from shortlist._events import Event, EventHook, emit
from shortlist._types import Candidate
from shortlist.errors import ConfigError, MCPServerError, MissingDependencyError
from shortlist.mcp._connection import Connection, is_connection_error
from shortlist.mcp._tools import (
    mcp_tool_candidate,
    parse_tool_name,
    prefixed_name,
    refuse_tool_name,
    validate_server_name,
)

__all__ = [
    "MCPCallResult",
    "MCPClient",
    "MCPEnvNotSet",
    "MCPReconnected",
    "MCPServerError",
    "MCPServerSpec",
    "grant_server_env",
    "parse_server_arg",
    "require_mcp",
]

logger = logging.getLogger("shortlist.mcp")


def require_mcp() -> None:
    """Import the ``mcp`` SDK or explain how to install it.

    Raises:
        MissingDependencyError: ``mcp`` is not installed.
    """
    try:
        import mcp.client.stdio

        import mcp  # noqa: F401
    except ImportError as exc:
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"MCP support needs the 'mcp' extra: {pip_install('mcp')} (the official `mcp` SDK)"
        ) from exc


@dataclass(frozen=True, kw_only=True)
class MCPReconnected(Event):
    """A dropped MCP server connection was reopened (the stdio process restarted)."""

    name: ClassVar[str] = "mcp.reconnected"
    area: ClassVar[str] = "mcp"
    level: int = logging.WARNING
    server: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class MCPEnvNotSet(Event):
    """A variable granted to an upstream server by name is not set here: the server starts without it."""

    name: ClassVar[str] = "mcp.env_not_set"
    area: ClassVar[str] = "mcp"
    level: int = logging.WARNING
    server: str = ""
    variable: str = ""


@dataclass(frozen=True, slots=True)
class MCPServerSpec:
    """How to reach one MCP server.

    Args:
        name: the server's name in tool prefixes (``mcp__<name>__<tool>``).
        command: the stdio command line (argv); exclusive with ``url``.
        url: a streamable HTTP endpoint such as ``http://127.0.0.1:8000/mcp``.
        env: extra environment for a stdio process (merged over the SDK's safe default: ``HOME``,
            ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``); see :func:`grant_server_env`.
        cwd: working directory of a stdio process.
        headers: HTTP headers for ``url`` (authentication, ...).

    Raises:
        ConfigError: a bad name, or not exactly one of ``command``/``url``.
    """

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_server_name(self.name)
        object.__setattr__(self, "command", tuple(self.command))
        if bool(self.command) == bool(self.url):
            raise ConfigError(f"MCP server {self.name!r} needs exactly one of a command (stdio) or a url (HTTP)")

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command else "http"


def parse_server_arg(value: str) -> MCPServerSpec:
    """Parse ``NAME=COMMAND`` (split with :func:`shlex.split`) or ``NAME=http(s)://URL``.

    Raises:
        ConfigError: no ``=``, a bad name, or an empty command.
    """
    name, sep, rest = value.partition("=")
    if not sep or not rest.strip():
        raise ConfigError(f"--mcp-server expects NAME=COMMAND, got {value!r}")
    rest = rest.strip()
    if rest.startswith(("http://", "https://")):
        return MCPServerSpec(name=name.strip(), url=rest)
    try:
        argv = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"--mcp-server {name}: cannot split the command: {exc}") from None
    return MCPServerSpec(name=name.strip(), command=tuple(argv))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def grant_server_env(
    specs: Sequence[MCPServerSpec],
    grants: Sequence[str],
    *,
    host: Mapping[str, str] | None = None,
    hooks: Sequence[EventHook] = (),
) -> list[MCPServerSpec]:
    """Give each stdio server the environment variables granted to it, and nothing else of ``host``.

    A stdio server inherits only a safe minimum (the SDK's ``HOME``, ``LOGNAME``, ``PATH``,
    ``SHELL``, ``TERM``, ``USER``, plus :data:`~shortlist.exec._sandbox.BASE_ENV_NAMES`, as an
    external selector does) and what a grant names, resolved the way an external selector's
    ``env`` is (:func:`~shortlist.exec._sandbox.grant_env`): ``SERVER=NAME`` forwards ``host``'s
    ``NAME`` (an :class:`MCPEnvNotSet` event when it is not set), ``SERVER=NAME=value`` sets it.
    Variables a spec already holds are kept (a grant overrides them).

    Args:
        specs: the servers.
        grants: ``SERVER=NAME`` or ``SERVER=NAME=value`` entries (``--mcp-env``).
        host: the environment forwarded names are read from (default ``os.environ``).
        hooks: event hooks for the :class:`MCPEnvNotSet` events.

    Raises:
        ConfigError: a grant for a server that is not in ``specs`` or is not a stdio server, or
            a malformed entry or variable name.
    """
    from shortlist.exec._sandbox import base_env, grant_env

    host = os.environ if host is None else host
    by_server: dict[str, list[str]] = {s.name: [] for s in specs}
    for entry in grants:
        server, sep, grant = entry.partition("=")
        variable = grant.partition("=")[0]
        if not sep or not grant:
            raise ConfigError(f"--mcp-env expects SERVER=NAME or SERVER=NAME=value, got {entry!r}")
        if server not in by_server:
            known = ", ".join(by_server) or "none"
            raise ConfigError(f"--mcp-env {entry!r}: no upstream server named {server!r} (servers: {known})")
        if not _ENV_NAME.fullmatch(variable):
            raise ConfigError(f"--mcp-env {entry!r}: {variable!r} is not an environment variable name")
        by_server[server].append(grant)
    out: list[MCPServerSpec] = []
    for spec in specs:
        entries = by_server[spec.name]
        if not spec.command:
            if entries:
                raise ConfigError(
                    f"--mcp-env: {spec.name!r} is an HTTP server (environment is for stdio servers; use headers)"
                )
            out.append(spec)
            continue
        for grant in entries:
            if "=" not in grant and grant not in host:
                emit(MCPEnvNotSet(server=spec.name, variable=grant), hooks=tuple(hooks))
        env = {**base_env(host), **(spec.env or {}), **grant_env(entries, host)}
        out.append(replace(spec, env=env))
    return out


@dataclass(frozen=True, slots=True)
class MCPCallResult:
    """The answer of one MCP tool call.

    Attributes:
        name: the prefixed tool name called.
        content: the content blocks, as JSON dicts (``{"type": "text", "text": ...}``, ...).
        structured: the structured content, when the server gave one.
        is_error: the tool reported an error (the model should see it as a tool error).
    """

    name: str
    content: tuple[dict[str, Any], ...]
    structured: dict[str, Any] | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"content": list(self.content), "structured": self.structured, "is_error": self.is_error}


class MCPClient:
    """Several MCP servers as one tool source (async).

    Args:
        servers: the servers; names must be unique.
        connect_timeout_s: how long a server may take to start and initialise.
        call_timeout_s: how long a request may take.
        retry_on_disconnect: reconnect and retry once when a server dropped (see the module doc).
        hooks: event hooks for this client's events.

    Use ``async with MCPClient([...]) as client`` or :meth:`start` / :meth:`close`.
    """

    def __init__(
        self,
        servers: Sequence[MCPServerSpec],
        *,
        connect_timeout_s: float = 30.0,
        call_timeout_s: float = 60.0,
        retry_on_disconnect: bool = True,
        hooks: Sequence[EventHook] = (),
    ) -> None:
        require_mcp()
        names = [s.name for s in servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"duplicate MCP server names: {', '.join(dupes)}")
        self._conns = {
            s.name: Connection(s, connect_timeout_s=connect_timeout_s, call_timeout_s=call_timeout_s) for s in servers
        }
        self.retry_on_disconnect = retry_on_disconnect
        self._hooks = tuple(hooks)
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def servers(self) -> tuple[str, ...]:
        """The server names, in the given order."""
        return tuple(self._conns)

    def spec(self, server: str) -> MCPServerSpec:
        """The spec of ``server``."""
        return self._conn(server).spec

    def _conn(self, server: str) -> Connection:
        conn = self._conns.get(server)
        if conn is None:
            raise MCPServerError(f"unknown MCP server {server!r} (known: {', '.join(self._conns) or 'none'})")
        return conn

    def _lock(self, server: str) -> asyncio.Lock:
        lock = self._locks.get(server)
        if lock is None:
            lock = self._locks[server] = asyncio.Lock()
        return lock

    async def start(self) -> None:
        """Connect to every server concurrently.

        Raises:
            MCPServerError: a server did not start (the others are closed again).
        """
        results = await asyncio.gather(*(self._ensure(n) for n in self._conns), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.close()
            raise errors[0]

    async def close(self) -> None:
        """Disconnect from every server and stop their processes."""
        await asyncio.gather(*(c.close() for c in self._conns.values()), return_exceptions=True)

    async def __aenter__(self) -> MCPClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ensure(self, server: str) -> Connection:
        conn = self._conn(server)
        async with self._lock(server):
            if not conn.alive:
                await conn.open()
        return conn

    async def _reconnect(self, server: str, error: BaseException) -> Connection:
        conn = self._conn(server)
        emit(MCPReconnected(server=server, error=f"{type(error).__name__}: {error}"), hooks=self._hooks)
        async with self._lock(server):
            await conn.open()
        return conn

    async def _with_retry(self, server: str, op: Any) -> Any:
        conn = await self._ensure(server)
        try:
            return await op(conn)
        except Exception as exc:
            if not (self.retry_on_disconnect and (is_connection_error(exc) or not conn.alive)):
                raise
            first = exc
        conn = await self._reconnect(server, first)
        try:
            return await op(conn)
        except Exception as exc:
            if is_connection_error(exc) or not conn.alive:
                raise MCPServerError(
                    f"MCP server {server!r} dropped again after a reconnect: {type(exc).__name__}: {exc}"
                ) from exc
            raise

    async def list_server_tools(self, server: str, *, refresh: bool = False) -> list[Candidate]:
        """The tools of one server as candidates (cached until a reconnect or ``refresh``)."""

        async def op(conn: Connection) -> list[Candidate]:
            if conn.tools is not None and not refresh:
                return conn.tools
            import mcp.types as mt

            tools: list[Candidate] = []
            cursor: str | None = None
            while True:
                params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                result = await conn.session.list_tools(params=params)
                for tool in result.tools:
                    if refuse_tool_name(server, tool.name, self._hooks):  # never listed
                        continue
                    item = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
                    tools.append(mcp_tool_candidate(server, item))
                cursor = result.next_cursor
                if not cursor:
                    break
            conn.tools = tools
            return tools

        tools: list[Candidate] = await self._with_retry(server, op)
        return tools

    async def list_candidates(self, *, refresh: bool = False) -> list[Candidate]:
        """Every server's tools as candidates, servers in order (listed concurrently)."""
        lists = await asyncio.gather(*(self.list_server_tools(n, refresh=refresh) for n in self._conns))
        return [c for tools in lists for c in tools]

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> MCPCallResult:
        """Call the tool ``mcp__<server>__<tool>``.

        Raises:
            MCPServerError: not an MCP tool name, an unknown server, or the server is unreachable.
        """
        parsed = parse_tool_name(name)
        if parsed is None:
            raise MCPServerError(f"{name!r} is not an MCP tool name (mcp__<server>__<tool>)")
        server, tool = parsed

        async def op(conn: Connection) -> MCPCallResult:
            result = await conn.session.call_tool(tool, dict(arguments or {}))
            blocks = tuple(b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content)
            structured = result.structured_content
            return MCPCallResult(
                name=prefixed_name(server, tool),
                content=blocks,
                structured=dict(structured) if isinstance(structured, Mapping) else None,
                is_error=bool(result.is_error),
            )

        res: MCPCallResult = await self._with_retry(server, op)
        return res
