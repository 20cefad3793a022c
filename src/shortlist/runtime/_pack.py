"""What an agent is (:class:`Pack`) and the tool names its host tools may not take (the runtime's own).
Re-exported by :mod:`shortlist.runtime._conversation`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING

from shortlist.errors import ConfigError
from shortlist.offer._bridge import CALL_TOOL_NAME
from shortlist.offer._search import SEARCH_TOOL_NAME
from shortlist.runtime._bindings import PackBindings
from shortlist.runtime._tools import Tool

if TYPE_CHECKING:
    from shortlist.feedback import FeedbackStore
    from shortlist.memory import MemoryStore
    from shortlist.retrieval._inject import ContextRetriever
    from shortlist.skills import Skill, SkillSource

__all__ = ["RESERVED_TOOL_NAMES", "RESERVED_TOOL_PREFIXES", "Pack", "check_reserved"]

#: Tool-name prefixes the runtime's own tools use; a host tool may not take them.
RESERVED_TOOL_PREFIXES: tuple[str, ...] = ("memory__", "skill__")
#: Names of the runtime's own fixed-surface tools; a host tool may not take them.
RESERVED_TOOL_NAMES: tuple[str, ...] = (SEARCH_TOOL_NAME, CALL_TOOL_NAME)


@dataclass
class Pack:
    """What an agent is: its prompt, tools, skills, MCP servers, corpus and memory.

    Args:
        id: the pack id (sent to selectors as ``pack_id``).
        system_prompt: the template. Under the conversation's default ``grounding_placement``
            (``"history"``) its ``{{grounding}}`` and ``{{memory_context}}`` slots are left
            empty and the turn's context goes into the turn's user message; under
            ``"system"`` they receive the delimited context of the turn (appended at the end
            when absent).
        tools: host tools.
        allowed_tools: the tool names (and ``mcp__server__*`` wildcards) offered; None = all.
        skills: skill sources (directories or inline skills) for ``skill__*`` tools.
        mcp_servers: MCP servers by name: a stdio command line or an ``http(s)://`` URL.
        corpus: a corpus retriever (``retrieve_context(scope, messages)``) for grounding.
        memory: a memory store for ``memory__*`` tools and ambient memories.
        scope: the subject of the memory store, e.g. ``{"user_id": "u1"}``.
        memory_tools: offer the ``memory__*`` tools (False = "retrieval on, tools off").
        feedback: a feedback log; every ``find_tools`` search of the model is recorded there
            (the query, what it found, which of those the model then called), so the
            selector's examples learn the turns the first ranking missed.

    Attributes:
        bindings: the selector bindings its conversations share (built by the first conversation
            that asks for them, reused by the next; see :meth:`close`).
    """

    id: str = "pack"
    system_prompt: str = "You are a helpful assistant."
    tools: Sequence[Tool] = ()
    allowed_tools: Sequence[str] | None = None
    skills: Sequence[SkillSource | str | PathLike[str] | Skill] = ()
    mcp_servers: Mapping[str, str] = field(default_factory=dict)
    corpus: ContextRetriever | None = None
    memory: MemoryStore | None = None
    scope: Mapping[str, str] = field(default_factory=dict)
    memory_tools: bool = True
    agent_id: str = ""
    feedback: FeedbackStore | None = None
    #: the selector bindings its conversations share (:mod:`shortlist.runtime._bindings`)
    bindings: PackBindings = field(default_factory=PackBindings, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        weakref.finalize(self, self.bindings.close)  # a pack dropped closes what its conversations built

    def close(self) -> None:
        """Close the selectors its conversations built (external processes, connections).

        Conversations of one pack share their selectors, indexes and enriched catalogs
        (:mod:`shortlist.runtime._bindings`): a conversation's ``close()`` leaves them for the next
        one. A conversation started after this builds them again.
        """
        self.bindings.close()


def check_reserved(tools: Sequence[Tool]) -> None:
    """Refuse host tools named like the runtime's own tools.

    Raises:
        ConfigError: a host tool takes a reserved name or prefix.
    """
    for t in tools:
        if t.name in RESERVED_TOOL_NAMES or t.name.startswith(RESERVED_TOOL_PREFIXES):
            raise ConfigError(
                f"host tool {t.name!r} uses a name reserved for the runtime's own tools "
                f"({', '.join(p + '*' for p in RESERVED_TOOL_PREFIXES)}, {', '.join(RESERVED_TOOL_NAMES)}); rename it"
            )
