"""A tiny MCP server on streamable HTTP (the SDK's ``MCPServer``), for the HTTP transport tests.

Usage: python http_server.py PORT
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def add_note(text: str) -> str:
    """Store a short note and return its number."""
    return f"note 1: {text}"


@server.tool()
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
