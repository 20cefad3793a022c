"""MCP as a real tool source: live servers (stdio, streamable HTTP), narrowing, and a narrowing proxy.

Importing this package does not need the ``mcp`` SDK; connecting does (the ``mcp`` extra),
and raises :class:`~shortlist.errors.MissingDependencyError` naming it when it is missing.
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.mcp._client import MCPClient, MCPServerSpec
    from shortlist.mcp._sync import MCPToolSource
    from shortlist.mcp._tools import select_mcp_tools

__all__ = [
    "MCPClient",
    "MCPServerSpec",
    "MCPToolSource",
    "select_mcp_tools",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "MCPClient": "shortlist.mcp._client",
    "MCPServerSpec": "shortlist.mcp._client",
    "MCPToolSource": "shortlist.mcp._sync",
    "select_mcp_tools": "shortlist.mcp._tools",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "MCPCallResult": ("shortlist.mcp._client", None),
    "MCPEnvNotSet": ("shortlist.mcp._client", None),
    "MCPReconnected": ("shortlist.mcp._client", None),
    "MCPServerError": ("shortlist.mcp._client", None),
    "MCPToolRefused": ("shortlist.mcp._tools", None),
    "MCPToolSelection": ("shortlist.mcp._tools", None),
    "MCP_PREFIX": ("shortlist.mcp._tools", None),
    "expand_tool_patterns": ("shortlist.mcp._tools", None),
    "grant_server_env": ("shortlist.mcp._client", None),
    "mcp_policy": ("shortlist.mcp._tools", None),
    "mcp_tool_candidate": ("shortlist.mcp._tools", None),
    "parse_server_arg": ("shortlist.mcp._client", None),
    "parse_tool_name": ("shortlist.mcp._tools", None),
    "prefixed_name": ("shortlist.mcp._tools", None),
    "require_mcp": ("shortlist.mcp._client", None),
    "valid_tool_name": ("shortlist.mcp._tools", None),
    "validate_server_name": ("shortlist.mcp._tools", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
