"""MCP tools as candidates: prefixed names, wildcard expansion, and narrowing with MCP unpinned.

Naming: a tool ``get_current_time`` of the server ``time`` is the candidate
``mcp__time__get_current_time`` (id and name), with the tool's ``inputSchema`` as
``parameters`` and ``metadata = {"server", "tool", "namespace": "mcp", "format": "mcp"}``.

**Decision — pinning vs narrowing.** The default :class:`~shortlist.selection.PinPolicy`
pins the whole ``mcp`` namespace (seed 000: "``mcp__`` tools are always preserved"). For a
live MCP tool source that would defeat narrowing, so :func:`mcp_policy` derives a policy
whose namespaces exclude ``mcp``: explicit MCP tools are ordinary candidates, while
``mcp__<server>__*`` wildcard entries stay pinned (``pin_wildcards``) and are expanded to the
server's tools, as a set, after narrowing (:func:`expand_tool_patterns`).

**An upstream tool's name is data, never a pattern.** Only the pack's ``allowed_tools`` entries
may be wildcards. A tool name must be what MCP allows (1-128 of ``[A-Za-z0-9_.-]``,
:func:`valid_tool_name`): any other (``*``, ``get_*``, a newline, 5,000 characters, markup) is
refused with an :class:`MCPToolRefused` event where tools enter (the client's listing) and again
where they are narrowed (:func:`select_mcp_tools`), so it is never listed, pinned or expanded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from shortlist._events import Event, EventHook, emit
from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError
from shortlist.selection._base import Selector
from shortlist.selection._narrowing import (
    NarrowingPolicy,
    TurnSelection,
    expand_tool_patterns,
    is_wildcard,
    live_tool_policy,
    narrow,
)

__all__ = [
    "MCP_PREFIX",
    "MCPToolRefused",
    "MCPToolSelection",
    "expand_tool_patterns",
    "mcp_policy",
    "mcp_tool_candidate",
    "parse_tool_name",
    "prefixed_name",
    "refuse_tool_name",
    "select_mcp_tools",
    "valid_tool_name",
    "validate_server_name",
]

MCP_PREFIX = "mcp__"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_SHOWN_NAME_CHARS = 80


@dataclass(frozen=True, kw_only=True)
class MCPToolRefused(Event):
    """An upstream MCP tool was refused for its name (not 1-128 of ``[A-Za-z0-9_.-]``); it is not listed."""

    name: ClassVar[str] = "mcp.tool_refused"
    area: ClassVar[str] = "mcp"
    level: int = logging.WARNING
    server: str = ""
    tool: str = ""
    reason: str = ""


def valid_tool_name(name: str) -> bool:
    """True for a name MCP allows: 1 to 128 of ``A-Z a-z 0-9 _ . -`` (so never a pattern)."""
    return isinstance(name, str) and _TOOL_NAME.fullmatch(name) is not None


def refuse_tool_name(server: str, name: Any, hooks: Sequence[EventHook] = ()) -> bool:
    """Emit :class:`MCPToolRefused` and return True when ``name`` is not a valid tool name."""
    if isinstance(name, str) and valid_tool_name(name):
        return False
    text = name if isinstance(name, str) else str(name)
    shown = repr(text[:_SHOWN_NAME_CHARS]) + ("…" if len(text) > _SHOWN_NAME_CHARS else "")
    reason = (
        f"{len(text):,} characters (at most 128)"
        if len(text) > 128
        else "empty"
        if not text
        else "characters outside [A-Za-z0-9_.-]"
    )
    emit(MCPToolRefused(server=server, tool=shown, reason=reason), hooks=tuple(hooks))
    return True


def validate_server_name(name: str) -> str:
    """Return ``name`` if it can prefix tool names (letters, digits, ``-``, single ``_``).

    Raises:
        ConfigError: an empty name, other characters, or ``__`` (the separator).
    """
    if not isinstance(name, str) or not _SERVER_NAME.match(name) or name.endswith("_"):
        raise ConfigError(
            f"MCP server name {name!r} must use letters, digits, '-' and single '_' (no '__', it separates names)"
        )
    return name


def prefixed_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``."""
    return f"{MCP_PREFIX}{server}__{tool}"


def parse_tool_name(name: str) -> tuple[str, str] | None:
    """Split ``mcp__<server>__<tool>`` into ``(server, tool)``; None for another name."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = name[len(MCP_PREFIX) :].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


def mcp_tool_candidate(server: str, tool: Mapping[str, Any]) -> Candidate:
    """The candidate of one MCP tool (a ``tools/list`` item: ``name``, ``description``, ``inputSchema``)."""
    name = str(tool["name"])
    schema = tool.get("inputSchema") or tool.get("input_schema")
    meta: dict[str, Any] = {"server": server, "tool": name, "namespace": "mcp", "format": "mcp"}
    if tool.get("title"):
        meta["title"] = tool["title"]
    return Candidate(
        id=prefixed_name(server, name),
        description=str(tool.get("description") or ""),
        parameters=dict(schema) if isinstance(schema, Mapping) else {"type": "object", "properties": {}},
        metadata=meta,
    )


#: The policy for live MCP tools: ``mcp`` unpinned, wildcards pinned (one rule, in narrowing).
mcp_policy = live_tool_policy


@dataclass(frozen=True, slots=True)
class MCPToolSelection:
    """One turn's MCP tools: the narrowing itself and the concrete tools it offers.

    Attributes:
        turn: the narrowing (wildcard entries appear in it as pinned pseudo-candidates).
        tools: the concrete tools offered this turn, wildcards expanded, in turn order.
    """

    turn: TurnSelection
    tools: tuple[Candidate, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        """The offered tool ids."""
        return tuple(c.id for c in self.tools)


def select_mcp_tools(
    selector: Selector | None,
    query: Query,
    tools: Sequence[Candidate],
    allowed_tools: Sequence[str] | None = None,
    policy: NarrowingPolicy | None = None,
    *,
    hooks: Sequence[EventHook] = (),
) -> MCPToolSelection:
    """Narrow live MCP tools for a turn, honouring ``allowed_tools`` and its wildcards.

    Args:
        selector: the bound selector (None: everything allowed surfaces).
        query: the turn's query (``kind="tool"``).
        tools: every tool the servers list (candidates from :func:`mcp_tool_candidate`).
        allowed_tools: the pack's entries; None allows every listed tool (a tool whose name is not
            a valid MCP name is refused with an event, never taken as a pattern). Explicit names are
            ranked like any tool; ``mcp__srv__*`` entries survive narrowing and expand to that
            server's tools. Names that resolve to no listed tool are skipped.
        policy: the base policy; ``mcp`` is removed from its pinned namespaces (:func:`mcp_policy`).
        hooks: extra event hooks.
    """
    by_id: dict[str, Candidate] = {}
    for c in tools:
        parsed = parse_tool_name(c.id)
        server, name = parsed if parsed is not None else (str(c.metadata.get("server", "")), c.id)
        if not refuse_tool_name(server, c.metadata.get("tool", name), hooks):
            by_id.setdefault(c.id, c)
    if allowed_tools is None:  # the listed tools themselves: names, never patterns
        turn = narrow(selector, query, list(by_id.values()), mcp_policy(policy), hooks=hooks)
        return MCPToolSelection(turn=turn, tools=tuple(by_id[i] for i in turn.ids if i in by_id))
    eligible: list[Candidate] = []
    for entry in dict.fromkeys(allowed_tools):
        if is_wildcard(entry):
            eligible.append(
                Candidate(id=entry, description=f"every tool matching {entry}", metadata={"wildcard": True})
            )
        elif entry in by_id:
            eligible.append(by_id[entry])
    turn = narrow(selector, query, eligible, mcp_policy(policy), hooks=hooks)
    expanded = expand_tool_patterns(turn.ids, by_id.keys())
    return MCPToolSelection(turn=turn, tools=tuple(by_id[i] for i in expanded))
