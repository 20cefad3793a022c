"""MCP as a real tool source: live servers (stdio, streamable HTTP), narrowing, and a narrowing proxy.

Importing this package does not need the ``mcp`` SDK; connecting does (the ``mcp`` extra),
and raises :class:`~shortlist.errors.MissingDependencyError` naming it when it is missing.
"""

from __future__ import annotations

from shortlist.mcp.client import (
    MCPCallResult,
    MCPClient,
    MCPEnvNotSet,
    MCPReconnected,
    MCPServerError,
    MCPServerSpec,
    grant_server_env,
    parse_server_arg,
    require_mcp,
)
from shortlist.mcp.sync import MCPToolSource
from shortlist.mcp.tools import (
    MCP_PREFIX,
    MCPToolRefused,
    MCPToolSelection,
    expand_tool_patterns,
    mcp_policy,
    mcp_tool_candidate,
    parse_tool_name,
    prefixed_name,
    select_mcp_tools,
    valid_tool_name,
    validate_server_name,
)

__all__ = [
    "MCP_PREFIX",
    "MCPCallResult",
    "MCPClient",
    "MCPEnvNotSet",
    "MCPReconnected",
    "MCPServerError",
    "MCPServerSpec",
    "MCPToolRefused",
    "MCPToolSelection",
    "MCPToolSource",
    "expand_tool_patterns",
    "grant_server_env",
    "mcp_policy",
    "mcp_tool_candidate",
    "parse_server_arg",
    "parse_tool_name",
    "prefixed_name",
    "require_mcp",
    "select_mcp_tools",
    "valid_tool_name",
    "validate_server_name",
]
