"""The runtime's own tools: ``memory__*``, ``skill__*`` and live MCP servers' tools.

The conversation asks this object which system tools to offer this turn, which names a
wildcard expands to, and to execute the calls it does not route to host functions. All
state here (active skills, MCP connections) belongs to one conversation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from shortlist._types import Candidate, TurnSelection
from shortlist.runtime._formats import ToolDef
from shortlist.selection._narrowing import expand_tool_patterns

if TYPE_CHECKING:
    from shortlist.mcp import MCPClient
    from shortlist.memory import MemoryTools
    from shortlist.runtime._conversation import Pack
    from shortlist.skills import SkillsCapability

__all__ = ["Capabilities"]


def _tool_def(c: Candidate) -> ToolDef:
    return ToolDef(c.id, c.description, dict(c.parameters or {"type": "object", "properties": {}}))


class Capabilities:
    """Memory tools, skills and MCP tool sources of one conversation."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.memory_tools: MemoryTools | None = None
        if pack.memory is not None:
            from shortlist.memory import MemoryTools

            self.memory_tools = MemoryTools(pack.memory, pack.scope, enabled=pack.memory_tools)
        self.skills: SkillsCapability | None = None
        self.mcp: MCPClient | None = None
        #: times the MCP servers were started (once per conversation)
        self.mcp_starts = 0
        self._mcp_tools: dict[str, Candidate] = {}
        # the names :meth:`expand` matches against, for the host tools and MCP tools they were made of
        self._names: tuple[object, object, frozenset[str]] | None = None
        self._skill_candidates: tuple[Candidate, ...] | None = None
        self._started = False
        self._start_lock = asyncio.Lock()

    async def astart(self) -> None:
        """Connect the MCP servers and load the skills, once, on the first turn."""
        async with self._start_lock:
            if self._started:
                return
            if self.pack.mcp_servers:
                from shortlist.mcp import MCPClient
                from shortlist.mcp._client import parse_server_arg

                specs = [parse_server_arg(f"{name}={target}") for name, target in self.pack.mcp_servers.items()]
                self.mcp = MCPClient(specs)
                await self.mcp.start()
                self.mcp_starts += 1
                self._mcp_tools = {c.id: c for c in await self.mcp.list_candidates()}
            if self.pack.skills:
                from shortlist.skills import SkillsCapability, load_skill_set

                ceiling = (
                    [t.name for t in self.pack.tools] + list(self._mcp_tools) + list(self.pack.allowed_tools or ())
                )
                self.skills = SkillsCapability(load_skill_set(self.pack.skills), pack_tools=ceiling)
            self._started = True

    def skill_candidates(self) -> tuple[Candidate, ...]:
        """The skills eligible this turn (empty when the pack has none); the same tuple every turn."""
        if self._skill_candidates is None and self.skills is not None:
            self._skill_candidates = tuple(self.skills.candidates())
        return self._skill_candidates or ()

    def begin_skill_turn(self, turn: TurnSelection | None) -> None:
        """Make ``turn`` this turn's skill index (None: the full index)."""
        if self.skills is not None:
            self.skills.begin_turn(turn)

    def mcp_candidates(self) -> list[Candidate]:
        """The tools of the pack's live MCP servers, named ``mcp__<server>__<tool>``."""
        return list(self._mcp_tools.values())

    def expand(self, entries: Iterable[str], host_tools: Iterable[str]) -> list[str]:
        """The concrete tool names ``entries`` stand for (wildcards expanded, unknown names dropped).

        One rule for the runtime, the MCP proxy and the service:
        :func:`~shortlist.selection._narrowing.expand_tool_patterns`.
        """
        names = self._names
        if names is None or names[0] is not host_tools or names[1] is not self._mcp_tools:
            # made once per tool set, not per call: a round expands the block, the loaded tools and
            # the whole catalog, and a catalog of 10,000 names costs a millisecond to copy
            names = (host_tools, self._mcp_tools, frozenset([*host_tools, *self._mcp_tools]))
            self._names = names
        return expand_tool_patterns(entries, names[2])

    def mcp_tool_def(self, name: str) -> ToolDef | None:
        """The definition of an MCP tool by prefixed name, or None."""
        c = self._mcp_tools.get(name)
        return _tool_def(c) if c is not None else None

    def active_skill_tools(self) -> tuple[str, ...]:
        """Tools that the active skills added (offered on top of the narrowed ones)."""
        return tuple(self.skills.active_tools) if self.skills is not None else ()

    def system_tool_defs(self, *, listed_index: bool = False) -> list[ToolDef]:
        """The runtime's own tools for this turn: memory tools and skill tools.

        Args:
            listed_index: the skill index is listed in the conversation (:meth:`skill_index`),
                so ``skill__activate`` carries one fixed description instead of this turn's
                index, and the tools array does not change when the index does.
        """
        defs: list[ToolDef] = []
        if self.memory_tools is not None:
            defs.extend(ToolDef(d.name, d.description, d.parameters) for d in self.memory_tools.definitions())
        if self.skills is not None:
            from shortlist.skills._index import SKILL_ACTIVATE_LISTED
            from shortlist.skills._tools import SKILL_ACTIVATE

            for c in self.skills.tools():
                d = _tool_def(c)
                if listed_index and d.name == SKILL_ACTIVATE:
                    d = ToolDef(d.name, SKILL_ACTIVATE_LISTED, d.parameters)
                defs.append(d)
        return defs

    def skill_index(self) -> list[Candidate]:
        """This turn's skill index (the narrowed skills, by name; empty without skills)."""
        return self.skills.index() if self.skills is not None else []

    async def execute(self, name: str, arguments: Mapping[str, Any] | str) -> tuple[str, str]:
        """Execute a runtime tool; return ``(source, result text)``.

        Raises:
            LookupError: no capability handles ``name``.
            Exception: the tool's own failure (reported to the model as a tool error).
        """
        if self.memory_tools is not None and self.memory_tools.handles(name):
            result = await asyncio.to_thread(self.memory_tools.execute, name, arguments)
            return "memory", json.dumps(result, ensure_ascii=False, default=str)
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        if self.skills is not None and name.startswith("skill__"):
            out = await asyncio.to_thread(self.skills.execute, name, args)
            return "skill", json.dumps(out, ensure_ascii=False, default=str)
        if self.mcp is not None and name in self._mcp_tools:
            res = await self.mcp.call(name, args)
            if res.is_error:
                raise RuntimeError(res.text or "the MCP tool reported an error")
            return "mcp", res.text if res.text else json.dumps(res.to_dict(), ensure_ascii=False, default=str)
        raise LookupError(f"no tool named {name!r}")

    async def aclose(self) -> None:
        """Close MCP connections."""
        if self.mcp is not None:
            await self.mcp.close()
