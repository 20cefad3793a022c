"""The MCP proxy as a low-level ``mcp`` SDK server: ``tools/list`` answers the session's list,
``tools/call`` runs ``find_tools`` (and notifies a changed list) or forwards a known tool upstream;
a bad call or an upstream failure is the model's tool error. Used by
:meth:`shortlist.mcp._proxy.MCPProxy.build_server`.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from shortlist._types import Candidate
from shortlist.mcp._tools import parse_tool_name
from shortlist.offer._search import SEARCH_TOOL_NAME

if TYPE_CHECKING:
    from shortlist.mcp._proxy import MCPProxy

__all__ = ["build_server"]

logger = logging.getLogger("shortlist.mcp")


def build_server(proxy: MCPProxy, name: str = "shortlist-proxy") -> Any:
    """A low-level ``mcp`` :class:`Server` serving ``proxy``."""
    import mcp.types as mt
    from mcp.server.lowlevel import Server

    def to_tool(c: Candidate) -> Any:
        return mt.Tool(
            name=c.id,
            description=c.description,
            input_schema=dict(c.parameters or {"type": "object", "properties": {}}),
        )

    def error(message: str) -> Any:
        return mt.CallToolResult(content=[mt.TextContent(type="text", text=message)], is_error=True)

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return mt.ListToolsResult(tools=[to_tool(c) for c in await proxy.listed()])

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        args = dict(params.arguments or {})
        if params.name == SEARCH_TOOL_NAME:
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                return error(f"{SEARCH_TOOL_NAME} needs a non-empty 'query' string")
            raw_k = args.get("k")
            if raw_k is not None and (isinstance(raw_k, bool) or not isinstance(raw_k, int)):
                return error(f"{SEARCH_TOOL_NAME}: 'k' must be an integer")
            before = [c.id for c in await proxy.listed()]
            found = await proxy.search(query, raw_k)
            if [c.id for c in await proxy.listed()] != before:  # notify only a list that changed
                try:
                    await ctx.session.send_tool_list_changed()
                except Exception as exc:  # the client may not accept notifications; the answer still stands
                    logger.debug("tools/list_changed not sent: %r", exc)
            return mt.CallToolResult(
                content=[mt.TextContent(type="text", text=json.dumps(found, ensure_ascii=False))],
                structured_content=found,
            )
        if parse_tool_name(params.name) is None:
            return error(f"unknown tool {params.name!r}; use {SEARCH_TOOL_NAME} to find tools")
        known = {c.id for c in await proxy.tools()}
        if params.name not in known:
            return error(f"unknown tool {params.name!r}; use {SEARCH_TOOL_NAME} to find tools")
        await proxy.called(params.name)
        try:
            result = await proxy.client.call(params.name, args)
        except Exception as exc:  # an upstream failure is the model's tool error, not a proxy crash
            return error(f"{params.name} failed: {type(exc).__name__}: {exc}")
        return mt.CallToolResult.model_validate(
            {"content": list(result.content), "structuredContent": result.structured, "isError": result.is_error}
        )

    from shortlist import __version__

    return Server(name, version=__version__, on_list_tools=on_list_tools, on_call_tool=on_call_tool)
