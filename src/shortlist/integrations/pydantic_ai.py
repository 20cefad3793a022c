"""PydanticAI: narrow an agent's function tools with shortlist, kept stable across a conversation.

:class:`ShortlistTools` is a PydanticAI *capability* (``Agent(..., capabilities=[ShortlistTools()])``):

* its ``prepare_tools`` hook keeps, of the step's function tool definitions, the ones shortlist
  picks for the conversation (plus pins and the tools earlier searches found); PydanticAI then
  sends only those to the model and refuses calls to the others. Under the default ``stable``
  policy they are decided at the conversation's first user prompt and only grow (the provider's
  prompt cache keeps the history behind them); ``policy="per_turn"`` re-selects on every prompt;
* its toolset adds the ``find_tools`` tool (the escape hatch), offered when some tool is left out.

For an agent built without capabilities, :func:`prepare_tools` is the same hook as a plain
``ToolsPrepareFunc`` (``capabilities=[PrepareTools(prepare_tools(narrower))]`` or a toolset's
``.prepared(...)``); add :func:`find_tools_tool` to the agent's tools for the escape hatch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import MissingDependencyError
from shortlist.integrations._core import (
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    ToolNarrower,
    TurnLog,
    found_in,
    tool_candidate,
)
from shortlist.selection._facade import DEFAULT

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from shortlist._install import pip_install

    raise MissingDependencyError(
        f"the PydanticAI integration needs pydantic-ai-slim: {pip_install('pydantic-ai')}"
    ) from exc

__all__ = ["ShortlistTools", "find_tools_tool", "prepare_tools"]


def tool_candidates(narrower: ToolNarrower, tool_defs: Sequence[ToolDefinition]) -> tuple[Candidate, ...]:
    """The candidates of a step's function tool definitions (built once per tool list)."""
    key = tuple((d.name, d.description, id(d.parameters_json_schema)) for d in tool_defs)
    return narrower.catalog(
        key, lambda: [tool_candidate(d.name, d.description, d.parameters_json_schema) for d in tool_defs]
    )


def _prompt_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(c for c in content if isinstance(c, str)) if isinstance(content, Sequence) else ""


def _conversation(ctx: RunContext[Any]) -> TurnLog:
    """The conversation of the run so far: user prompts, the size of the rest, what searches found."""
    conv = TurnLog()
    instructions = False  # every request repeats them: they are one system prompt
    for message in ctx.messages:
        if isinstance(message, ModelRequest):
            if message.instructions and not instructions:
                conv.system(message.instructions)
                instructions = True
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    conv.user(_prompt_text(part.content))
                elif isinstance(part, ToolReturnPart) and part.tool_name == SEARCH_TOOL_NAME:
                    conv.other(len(str(part.content)))
                    conv.found_tools(found_in(part.content))
                else:
                    conv.other(len(str(getattr(part, "content", ""))))
        else:
            conv.other(sum(len(str(getattr(p, "content", "") or getattr(p, "args", "") or "")) for p in message.parts))
    if not conv.turns and ctx.prompt is not None:
        conv.user(_prompt_text(ctx.prompt))
    return conv


async def _narrow(
    narrower: ToolNarrower, ctx: RunContext[Any], tool_defs: list[ToolDefinition], keep: Callable[[str], bool]
) -> list[ToolDefinition]:
    own = [d for d in tool_defs if d.name == SEARCH_TOOL_NAME]
    rest = [d for d in tool_defs if d.name != SEARCH_TOOL_NAME]
    pool = [d for d in rest if keep(d.name)]
    if not pool:
        return rest
    catalog = tool_candidates(narrower, pool)
    choice = await narrower.achoose(catalog, _conversation(ctx))
    names = set(choice.names)
    out = [d for d in rest if d.name in names or not keep(d.name)]
    return out + own if choice.search_tool else out


def prepare_tools(
    narrower: ToolNarrower | None = None, **options: Any
) -> Callable[[RunContext[Any], list[ToolDefinition]], Awaitable[list[ToolDefinition]]]:
    """A PydanticAI ``prepare_tools`` function that narrows each step's tool definitions.

    ``options`` build the :class:`ToolNarrower` when none is given (``selector``, ``k``...).
    """
    engine = narrower or ToolNarrower(**options)

    async def prepare(ctx: RunContext[Any], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        return await _narrow(engine, ctx, tool_defs, lambda _: True)

    return prepare


def find_tools_tool(narrower: ToolNarrower, catalog: Callable[[], tuple[Candidate, ...]]) -> Tool[Any]:
    """The ``find_tools`` tool: ranks ``catalog()`` (the step's tools) for the model's query, leaving out
    the tools the step was offered and earlier searches found (:meth:`ToolNarrower.search`)."""

    async def find_tools(ctx: RunContext[Any], query: str) -> str:
        return await asyncio.to_thread(narrower.find, catalog(), query, _conversation(ctx))

    return Tool(find_tools, name=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION, takes_ctx=True)


@dataclass
class ShortlistTools(AbstractCapability[Any]):
    """A PydanticAI capability: each step offers the model only the tools shortlist picks.

    Args:
        narrower: the engine (selector, ``k``, ``search_k``, ``on_event``); default
            ``ToolNarrower(selector=..., k=...)``.
        selector: the selector when no ``narrower`` is given (name, instance, None, or ``DEFAULT``:
            the config's binding, else the built-in default).
        k: the most tools ranked in per turn besides pins, when no ``narrower`` is given.
        policy: ``stable`` (default) or ``per_turn``, when no ``narrower`` is given (see
            :class:`ToolNarrower`).
        only: narrow only these tool names (None: every function tool); the others always pass.
    """

    narrower: ToolNarrower | None = None
    selector: Any = DEFAULT
    k: int = 5
    only: frozenset[str] | None = None
    policy: str = "stable"
    _engine: ToolNarrower = field(init=False, repr=False)
    _last: tuple[Candidate, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        self._engine = self.narrower or ToolNarrower(selector=self.selector, k=self.k, policy=self.policy)

    @property
    def engine(self) -> ToolNarrower:
        """The :class:`ToolNarrower` deciding each step."""
        return self._engine

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a selector object: not spec-serialisable

    def get_toolset(self) -> Any:
        if not self._engine.search_tool:
            return None
        return FunctionToolset([find_tools_tool(self._engine, lambda: self._last)])

    async def prepare_tools(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        """Keep the step's narrowed tool definitions (and ``find_tools`` when some tool is left out)."""
        only = self.only
        keep: Callable[[str], bool] = (lambda _: True) if only is None else only.__contains__
        self._last = tool_candidates(
            self._engine, [d for d in tool_defs if d.name != SEARCH_TOOL_NAME and keep(d.name)]
        )
        return await _narrow(self._engine, ctx, tool_defs, keep)
