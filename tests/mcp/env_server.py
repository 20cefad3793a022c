"""An MCP server over stdio that reports the environment it was started with (a stand-in for a
server that needs a token, such as GitHub's)."""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("env")


def env_names() -> str:
    """The names of the environment variables this server process sees, as a JSON list."""
    return json.dumps(sorted(os.environ))


def env_value(name: str) -> str:
    """The value of one environment variable of this server process ('' when unset)."""
    return os.environ.get(name, "")


server.add_tool(env_names, name="env_names", description="list the environment variable names")
server.add_tool(env_value, name="env_value", description="read one environment variable")

if __name__ == "__main__":
    server.run("stdio")
