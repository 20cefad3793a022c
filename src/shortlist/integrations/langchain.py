"""LangChain and LangGraph: narrow an agent's tools with shortlist, kept stable across a conversation.

Three ways in, one engine (:class:`~shortlist.integrations._core.ToolNarrower`):

* :class:`ShortlistMiddleware`: LangChain v1 agent middleware (``create_agent(...,
  middleware=[ShortlistMiddleware()])``). Its ``wrap_model_call`` rewrites the request's tools
  to the narrowed ones before the model is called, and it registers the ``find_tools`` tool
  (the escape hatch) with the agent. Provider tool dicts in the request are always kept.
* :func:`narrowed_tools`: for a hand-written LangGraph model node, the tools to
  ``bind_tools`` for the state's messages (the ``find_tools`` tool included when needed).
* :func:`retrieve_tools_functions`: a ``retrieve_tools`` pair for ``langgraph-bigtool``'s
  ``create_agent(..., retrieve_tools_function=..., retrieve_tools_coroutine=...)``: the registry
  is ranked by shortlist instead of a ``BaseStore`` semantic search.

The tools follow the narrower's ``policy``: ``stable`` (default) decides them at the
conversation's first user message and only adds the tools ``find_tools`` found, so the provider's
prompt cache keeps the history behind them; ``per_turn`` re-selects on every user message.

Tools loaded from MCP servers (``langchain-mcp-adapters``) are ``BaseTool`` objects like any
other and are narrowed the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import MissingDependencyError
from shortlist.integrations._core import (
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    ToolChoice,
    ToolNarrower,
    TurnLog,
    found_in,
    tool_candidate,
)

try:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt import ToolRuntime
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from shortlist._install import pip_install

    raise MissingDependencyError(f"the LangChain integration needs langchain-core: {pip_install('langchain')}") from exc

__all__ = ["ShortlistMiddleware", "find_tools_tool", "narrowed_tools", "retrieve_tools_functions"]


def _candidate(tool: BaseTool) -> Candidate:
    spec = convert_to_openai_tool(tool)["function"]
    return tool_candidate(tool.name, spec.get("description") or tool.description, spec.get("parameters"))


def tool_candidates(narrower: ToolNarrower, tools: Sequence[BaseTool]) -> tuple[Candidate, ...]:
    """The candidates of ``tools`` (built once per tool list and remembered by ``narrower``)."""
    key = tuple((t.name, id(t)) for t in tools)
    return narrower.catalog(key, lambda: [_candidate(t) for t in tools])


def _text(message: BaseMessage) -> str:
    return str(message.text)  # a property in langchain-core 1.x (a callable str for old callers)


def _conversation(messages: Sequence[Any], system: Any = None) -> TurnLog:
    """The conversation ``messages`` hold: user messages, the size of the rest, what searches found."""
    conv = TurnLog()
    if isinstance(system, BaseMessage):
        conv.system(_text(system))
    calls: set[str] = set()
    for message in messages:
        if isinstance(message, HumanMessage):
            conv.user(_text(message))
        elif isinstance(message, Mapping):
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, str):
                conv.user(content)
            else:
                conv.other(len(str(content or "")))
        elif isinstance(message, ToolMessage) and (message.name == SEARCH_TOOL_NAME or message.tool_call_id in calls):
            conv.other(len(str(message.content)))
            conv.found_tools(found_in(message.content))
        elif isinstance(message, BaseMessage):
            if isinstance(message, AIMessage):
                calls.update(c["id"] or "" for c in message.tool_calls if c["name"] == SEARCH_TOOL_NAME)
                conv.other(len(str(message.tool_calls)))
            conv.other(len(str(message.content)))
    return conv


def find_tools_tool(narrower: ToolNarrower, tools: Callable[[], Sequence[BaseTool]] | Sequence[BaseTool]) -> BaseTool:
    """The ``find_tools`` tool: ranks ``tools`` (or what the callable returns) for the model's query.

    It ranks only what the model call that searched cannot use yet (:meth:`ToolNarrower.search`):
    that call's conversation is the one :class:`ShortlistMiddleware` noted for this tool call's
    id, else the one the graph's state holds (the ``messages`` LangGraph's ``ToolNode`` passes
    as the tool's runtime).
    """

    def catalog() -> tuple[Candidate, ...]:
        return tool_candidates(narrower, tools() if callable(tools) else tools)

    def find_tools(query: str, runtime: ToolRuntime) -> str:
        return narrower.find(catalog(), query, _searched_from(narrower, runtime))

    return StructuredTool.from_function(
        func=find_tools, name=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION, parse_docstring=False
    )


def _searched_from(narrower: ToolNarrower, runtime: Any) -> TurnLog | None:
    """The conversation a ``find_tools`` call was made from: noted by the middleware, else the state's."""
    noted = narrower.searched_from(getattr(runtime, "tool_call_id", None))
    if noted is not None:
        return noted
    state = getattr(runtime, "state", None)
    messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", state)
    return _conversation(messages) if isinstance(messages, Sequence) and messages else None


def _search_ids(response: Any) -> list[str]:
    """The ids of the ``find_tools`` calls in a model call's answer (a ``ModelResponse`` or a message)."""
    messages = getattr(response, "result", None)
    if not isinstance(messages, Sequence):
        messages = [response]
    return [
        str(c.get("id") or "")
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["name"] == SEARCH_TOOL_NAME
    ]


def _keep(tools: Sequence[BaseTool], choice: ToolChoice) -> list[BaseTool]:
    names = set(choice.names)
    return [t for t in tools if t.name in names]


def narrowed_tools(
    narrower: ToolNarrower,
    tools: Sequence[BaseTool],
    messages: Sequence[Any],
    *,
    search_tool: BaseTool | None = None,
) -> list[BaseTool]:
    """The tools to bind for one model call of a LangGraph node: ``model.bind_tools(narrowed_tools(...))``.

    Args:
        narrower: the engine (selector, ``k``, events).
        tools: every tool the node could offer.
        messages: the state's messages (under ``stable`` the tools are decided at the first
            user message and kept; under ``per_turn`` the latest user message is the query;
            earlier ``find_tools`` results add the tools they found).
        search_tool: the ``find_tools`` tool to add when a tool is left out (build it once with
            :func:`find_tools_tool` and give the same object to the node's ``ToolNode``).
    """
    catalog = tool_candidates(narrower, tools)
    choice = narrower.choose(catalog, _conversation(messages))
    out = _keep(tools, choice)
    if choice.search_tool and search_tool is not None:
        out.append(search_tool)
    return out


class _Middleware:
    """Placeholder base replaced below by LangChain's ``AgentMiddleware`` when ``langchain`` is installed."""


try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse

    _Base: type = AgentMiddleware
except ImportError:  # pragma: no cover - langgraph-only installs use narrowed_tools
    _Base = _Middleware


class ShortlistMiddleware(_Base):  # type: ignore[misc]
    """LangChain v1 agent middleware: the model sees only the tools shortlist picks for the conversation.

    Args:
        narrower: the engine; default a :class:`ToolNarrower` built from ``options``.
        **options: :class:`ToolNarrower` arguments (``selector``, ``policy`` -- ``stable`` by
            default, ``k``, ``search_k``, ``on_event``...).

    The ``find_tools`` tool it registers ranks the tools of the agent's last model request that the
    request was not offered (nor earlier searches found).
    """

    def __init__(self, narrower: ToolNarrower | None = None, **options: Any) -> None:
        if _Base is _Middleware:  # pragma: no cover
            from shortlist._install import pip_install

            raise MissingDependencyError(f"ShortlistMiddleware needs langchain>=1: {pip_install('langchain')}")
        super().__init__()
        self.narrower = narrower or ToolNarrower(**options)
        self._last: list[BaseTool] = []
        self.tools = [find_tools_tool(self.narrower, lambda: self._last)] if self.narrower.search_tool else []

    @property
    def name(self) -> str:
        return "ShortlistMiddleware"

    def _split(self, request: ModelRequest) -> tuple[list[BaseTool], list[Any], tuple[Candidate, ...]]:
        own = {id(t) for t in self.tools}
        tools = [t for t in request.tools if isinstance(t, BaseTool) and id(t) not in own]
        others = [t for t in request.tools if not isinstance(t, BaseTool)]  # provider tools: kept
        self._last = tools
        return tools, others, tool_candidates(self.narrower, tools)

    def _rewrite(self, request: ModelRequest, tools: list[BaseTool], others: list[Any], choice: ToolChoice) -> Any:
        kept: list[Any] = _keep(tools, choice)
        if choice.search_tool:
            kept.extend(self.tools)
        return request.override(tools=[*kept, *others])

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        """Narrow ``request.tools`` for the conversation (its policy), then call the model."""
        tools, others, catalog = self._split(request)
        if not tools:
            return handler(request)
        conv = _conversation(request.messages, request.system_message)
        choice = self.narrower.choose(catalog, conv)
        response = handler(self._rewrite(request, tools, others, choice))
        self.narrower.note_searches(_search_ids(response), conv)  # what find_tools leaves out
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        """Async twin of :meth:`wrap_model_call`."""
        tools, others, catalog = self._split(request)
        if not tools:
            return await handler(request)
        conv = _conversation(request.messages, request.system_message)
        choice = await self.narrower.achoose(catalog, conv)
        response = await handler(self._rewrite(request, tools, others, choice))
        self.narrower.note_searches(_search_ids(response), conv)
        return response


def retrieve_tools_functions(
    tool_registry: Mapping[str, BaseTool | Callable[..., Any]],
    narrower: ToolNarrower | None = None,
    **options: Any,
) -> tuple[Callable[[str], list[str]], Callable[[str], Awaitable[list[str]]]]:
    """A ``(retrieve_tools, aretrieve_tools)`` pair for ``langgraph_bigtool.create_agent``.

    Each ranks ``tool_registry`` (ids to tools, as bigtool takes it) with shortlist for the
    model's query and returns tool ids, as bigtool's default ``BaseStore`` search does; a
    failing selector falls back to a lexical ranking (``selection.tool_searched`` says so).
    No store needs to be built or embedded.
    """
    narrower = narrower or ToolNarrower(**options)
    by_name: dict[str, str] = {}
    items: list[Candidate] = []
    for tool_id, tool in tool_registry.items():
        base = tool if isinstance(tool, BaseTool) else StructuredTool.from_function(tool)
        spec = convert_to_openai_tool(base)["function"]
        items.append(tool_candidate(tool_id, spec.get("description") or base.description, spec.get("parameters")))
        by_name[tool_id] = tool_id
    catalog = narrower.catalog(("bigtool", *by_name), lambda: items)

    def _ids(found: Iterable[Candidate]) -> list[str]:
        return [by_name[c.id] for c in found if c.id in by_name]

    def retrieve_tools(query: str) -> list[str]:
        """Retrieve tools to use, given a search query describing the action needed."""
        return _ids(narrower.search(catalog, query))

    async def aretrieve_tools(query: str) -> list[str]:
        """Retrieve tools to use, given a search query describing the action needed."""
        return _ids(await asyncio.to_thread(narrower.search, catalog, query))

    return retrieve_tools, aretrieve_tools
