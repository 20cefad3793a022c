"""The OpenAI Agents SDK: narrow the tools of an agent's model calls with shortlist, stable across a conversation.

The SDK hands each model call the agent's whole tool list: its function tools and the tools of
the MCP servers attached to it (``Agent(mcp_servers=[...])``, listed as function tools). The
hook is on that model input:

* :class:`ShortlistModel` wraps any SDK ``Model`` (``Agent(model=ShortlistModel(inner))``) and
  passes the inner model only the function tools shortlist picks for the conversation (hosted
  tools, handoffs and the output schema are untouched). Under the default ``stable`` policy they
  are decided at the conversation's first user message and only grow by what ``find_tools``
  found, so the provider's prompt cache keeps the history behind them; ``policy="per_turn"``
  re-selects on every user message;
* :class:`ShortlistModelProvider` does the same for every model of a run
  (``Runner.run(agent, input, run_config=RunConfig(model_provider=ShortlistModelProvider()))``),
  so agents named by model string keep working;
* :attr:`ShortlistModel.find_tools` is the ``find_tools`` function tool (the escape hatch): add
  it to the agent's tools; it ranks the tools of the model's last call.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import MissingDependencyError
from shortlist.integrations._core import (
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    SEARCH_TOOL_PARAMETERS,
    ToolNarrower,
    TurnLog,
    found_in,
    tool_candidate,
)

try:
    from agents import FunctionTool
    from agents.models.interface import Model, ModelProvider
    from agents.models.multi_provider import MultiProvider
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from shortlist._install import pip_install

    raise MissingDependencyError(
        f"the OpenAI Agents SDK integration needs openai-agents: {pip_install('openai-agents')}"
    ) from exc

__all__ = ["ShortlistModel", "ShortlistModelProvider"]


def tool_candidates(narrower: ToolNarrower, tools: Sequence[FunctionTool]) -> tuple[Candidate, ...]:
    """The candidates of an agent's function tools (built once per tool list)."""
    key = tuple((t.name, id(t)) for t in tools)
    return narrower.catalog(key, lambda: [tool_candidate(t.name, t.description, t.params_json_schema) for t in tools])


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable):
        return " ".join(str(_get(c, "text")) for c in content if _get(c, "type") in ("input_text", "text"))
    return ""


def _conversation(items: str | Sequence[Any], system: Any = None) -> TurnLog:
    """The conversation of a model input: user messages, the size of the rest, what searches found."""
    conv = TurnLog()
    if isinstance(system, str):
        conv.system(system)
    if isinstance(items, str):
        return conv.user(items)
    calls: set[Any] = set()
    for item in items:
        kind = _get(item, "type")
        if _get(item, "role") == "user" and kind in (None, "message"):
            conv.user(_content_text(_get(item, "content")))
        elif kind == "function_call_output" and _get(item, "call_id") in calls:
            conv.other(len(str(_get(item, "output"))))
            conv.found_tools(found_in(_get(item, "output")))
        else:
            if kind == "function_call" and _get(item, "name") == SEARCH_TOOL_NAME:
                calls.add(_get(item, "call_id"))
            conv.other(len(str(item)))
    return conv


def find_tools_tool(narrower: ToolNarrower, model: ShortlistModel) -> FunctionTool:
    """The ``find_tools`` function tool: ranks the tools of ``model``'s last call for the model's query,
    those the call that searched was not offered, nor earlier searches found (:meth:`ToolNarrower.search`;
    the conversation is the one ``model`` noted for this call's id)."""

    # annotated ToolContext: the SDK hands a RunContextWrapper-annotated tool the context without the call's id
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        import json

        try:
            query = str(json.loads(arguments or "{}").get("query", ""))
        except (ValueError, AttributeError):
            query = ""
        conversation = narrower.searched_from(getattr(ctx, "tool_call_id", None))
        return await asyncio.to_thread(narrower.find, model.last_catalog, query, conversation)

    return FunctionTool(
        name=SEARCH_TOOL_NAME,
        description=SEARCH_TOOL_DESCRIPTION,
        params_json_schema={**SEARCH_TOOL_PARAMETERS, "additionalProperties": False},
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


class ShortlistModel(Model):
    """An SDK ``Model`` that gives the model it wraps only the tools shortlist picks for the conversation.

    Args:
        model: the model that answers (any SDK ``Model``: ``OpenAIResponsesModel``, a
            LiteLLM model, a test double).
        narrower: the engine; default a :class:`ToolNarrower` built from ``options``.
        **options: :class:`ToolNarrower` arguments (``selector``, ``policy`` -- ``stable`` by
            default, ``k``, ``on_event``...).
    """

    def __init__(self, model: Model, narrower: ToolNarrower | None = None, **options: Any) -> None:
        self.model = model
        self.narrower = narrower or ToolNarrower(**options)
        self.last_catalog: tuple[Candidate, ...] = ()
        self.find_tools = find_tools_tool(self.narrower, self)

    async def _narrowed(
        self, tools: list[Any], items: str | list[Any], system: Any = None
    ) -> tuple[list[Any], TurnLog | None]:
        """The call's tools, and the conversation they were chosen for (None: nothing narrowed)."""
        functions = [t for t in tools if isinstance(t, FunctionTool) and t.name != SEARCH_TOOL_NAME]
        if not functions:
            return tools, None
        catalog = tool_candidates(self.narrower, functions)
        self.last_catalog = catalog
        conv = _conversation(items, system)
        choice = await self.narrower.achoose(catalog, conv)
        names = set(choice.names)
        keep = [
            t
            for t in tools
            if not isinstance(t, FunctionTool) or t.name in names or (t.name == SEARCH_TOOL_NAME and choice.search_tool)
        ]
        return keep, conv

    def _note(self, output: Any, conv: TurnLog | None) -> None:
        """Note the conversation of the answer's ``find_tools`` calls (what the search leaves out)."""
        if conv is not None and isinstance(output, list):
            calls = [i for i in output if _get(i, "type") == "function_call" and _get(i, "name") == SEARCH_TOOL_NAME]
            self.narrower.note_searches((str(_get(i, "call_id") or "") for i in calls), conv)

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kwargs: Any,
    ) -> Any:
        narrowed, conv = await self._narrowed(list(tools), input, system_instructions)
        response = await self.model.get_response(
            system_instructions, input, model_settings, narrowed, output_schema, handoffs, tracing, **kwargs
        )
        self._note(getattr(response, "output", None), conv)
        return response

    async def stream_response(  # type: ignore[override, unused-ignore]
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        narrowed, conv = await self._narrowed(list(tools), input, system_instructions)
        async for event in self.model.stream_response(
            system_instructions, input, model_settings, narrowed, output_schema, handoffs, tracing, **kwargs
        ):
            if getattr(event, "type", None) == "response.completed":  # the whole answer, its calls included
                self._note(getattr(getattr(event, "response", None), "output", None), conv)
            yield event

    async def close(self) -> None:
        await self.model.close()


class ShortlistModelProvider(ModelProvider):
    """A ``ModelProvider`` whose every model narrows its tools (wraps ``provider``, default the SDK's own).

    The models share one :class:`ToolNarrower`; each agent still needs the ``find_tools`` tool in
    its tools for the escape hatch (:meth:`find_tools_for`).
    """

    def __init__(self, provider: ModelProvider | None = None, narrower: ToolNarrower | None = None, **options: Any):
        self.provider = provider or MultiProvider()
        self.narrower = narrower or ToolNarrower(**options)
        self._models: dict[str | None, ShortlistModel] = {}

    def get_model(self, model_name: str | None) -> Model:
        if model_name not in self._models:
            self._models[model_name] = ShortlistModel(self.provider.get_model(model_name), self.narrower)
        return self._models[model_name]

    def find_tools_for(self, model_name: str | None) -> FunctionTool:
        """The ``find_tools`` tool of the model named ``model_name`` (add it to the agent's tools)."""
        model = self.get_model(model_name)
        assert isinstance(model, ShortlistModel)
        return model.find_tools
