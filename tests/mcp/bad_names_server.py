"""An MCP server over stdio whose tool names are hostile: patterns, a newline, 5,000 characters, markup."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("up")

NAMES = ["*", "get_*", "ok_tool", "bad\nname", "x" * 5000, "<b>hi</b>", "dotted.name-1"]


def echo(text: str) -> str:
    """Echo the text."""
    return text


for name in NAMES:
    server.add_tool(echo, name=name, description=f"tool {name[:20]}")

if __name__ == "__main__":
    server.run("stdio")
