"""LlamaIndex: a tool retriever ranked by shortlist, usable wherever ``ObjectIndex.as_retriever()`` is.

:class:`ShortlistToolRetriever` is an ``ObjectRetriever`` over a list of LlamaIndex tools: give it
to an agent (``FunctionAgent(tool_retriever=..., llm=...)``, ``ReActAgent``, ``AgentWorkflow``)
or a ``ToolRetrieverRouterQueryEngine`` instead of an ``ObjectIndex`` over the same tools. No
vector index is built and no embedding model is needed (unless the selector is one).

* ``retrieve(query)`` returns the tools shortlist picks for ``query`` (pins included); a failing
  selector returns every tool (a ``selection.fallback`` event);
* a query that is exactly a tool's name returns that tool (LlamaIndex agents look the called tool
  up through the retriever);
* the ``find_tools`` tool (the escape hatch) is returned with the narrowed tools when some tool is
  left out; the tools it finds are returned by every later ``retrieve`` of this retriever (one
  retriever per conversation; :meth:`ShortlistToolRetriever.reset` forgets them);
* under the default ``stable`` policy the tools are decided at the conversation's first query and
  kept for its later ones (growing only by what ``find_tools`` found), so the provider's prompt
  cache keeps the history behind them: the retriever remembers the queries it was asked (it sees
  no other message, so the prefix estimate is their size and the ``system_prompt`` it is given);
  ``policy="per_turn"`` re-selects on every query.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import MissingDependencyError
from shortlist.integrations._core import (
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    ToolNarrower,
    TurnLog,
    tool_candidate,
)

try:
    from llama_index.core.objects.base import ObjectRetriever
    from llama_index.core.schema import QueryBundle
    from llama_index.core.tools import BaseTool, FunctionTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    from shortlist._install import pip_install

    raise MissingDependencyError(
        f"the LlamaIndex integration needs llama-index-core: {pip_install('llamaindex')}"
    ) from exc

__all__ = ["ShortlistToolRetriever"]


def _candidate(tool: BaseTool) -> Candidate:
    meta = tool.metadata
    return tool_candidate(meta.get_name(), meta.description, meta.get_parameters_dict())


class ShortlistToolRetriever(ObjectRetriever[BaseTool]):
    """An ``ObjectRetriever`` of tools whose ranking is shortlist's narrowing.

    Args:
        tools: every tool the agent may use.
        narrower: the engine (selector, ``k``, ``search_k``, ``on_event``); share one between
            the retrievers of many conversations (the catalog is converted once).
        system_prompt: the agent's system prompt, counted in the estimate of the prefix behind
            the tools (``stable``'s widening and change rules; the retriever sees no message).
        **options: :class:`ToolNarrower` arguments when no ``narrower`` is given (``selector``,
            ``policy`` -- ``stable`` by default, ``k``...).
    """

    def __init__(
        self,
        tools: Sequence[BaseTool],
        narrower: ToolNarrower | None = None,
        *,
        system_prompt: str = "",
        **options: Any,
    ) -> None:
        # no vector retriever or node mapping behind it: retrieve/aretrieve are overridden
        self._retriever = None  # type: ignore[assignment]
        self._object_node_mapping = None  # type: ignore[assignment]
        self._node_postprocessors = []
        self.narrower = narrower or ToolNarrower(**options)
        self.tools = list(tools)
        self._by_name = {t.metadata.get_name(): t for t in self.tools}
        key = ("llamaindex", *((name, id(t)) for name, t in self._by_name.items()))
        self.catalog = self.narrower.catalog(key, lambda: [_candidate(t) for t in self.tools])
        self._found: list[str] = []
        self._queries: list[str] = []
        self.system_prompt = system_prompt
        self._lock = threading.Lock()
        self.find_tools = FunctionTool.from_defaults(
            fn=self._find, async_fn=self._afind, name=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION
        )

    @property
    def found(self) -> tuple[str, ...]:
        """The tool names ``find_tools`` made available so far."""
        with self._lock:
            return tuple(self._found)

    def reset(self) -> None:
        """Forget what ``find_tools`` found and the queries asked (a new conversation)."""
        with self._lock:
            self._found.clear()
            self._queries.clear()

    def _conversation(self, text: str) -> TurnLog:
        """The conversation so far: the queries this retriever was asked (a repeat is the same turn)."""
        with self._lock:
            if not self._queries or self._queries[-1] != text:
                self._queries.append(text)
            return self._log()

    def _log(self) -> TurnLog:
        conv = TurnLog().system(self.system_prompt)
        for query in self._queries:
            conv.user(query)
        return conv.found_tools(self._found)

    def _find(self, query: str) -> str:
        """Search the tool catalog for tools that are not loaded yet."""
        with self._lock:  # the conversation the tools were last retrieved for: its tools are left out
            conv = self._log() if self._queries else None
        found = self.narrower.search(self.catalog, query, conv)
        with self._lock:
            self._found.extend(c.id for c in found if c.id not in self._found)
        return self.narrower.search_result(found)

    async def _afind(self, query: str) -> str:
        """Search the tool catalog for tools that are not loaded yet."""
        return await asyncio.to_thread(self._find, query)

    @staticmethod
    def _text(query: str | QueryBundle) -> str:
        return query if isinstance(query, str) else query.query_str

    def _named(self, text: str) -> list[BaseTool] | None:
        if text == SEARCH_TOOL_NAME:
            return [self.find_tools]
        tool = self._by_name.get(text)
        return [tool] if tool is not None else None

    def _tools(self, names: Sequence[str], search: bool) -> list[BaseTool]:
        out = [self._by_name[n] for n in names]
        return [*out, self.find_tools] if search else out

    def retrieve(self, str_or_query_bundle: str | QueryBundle) -> list[BaseTool]:  # type: ignore[override, unused-ignore]
        """The tools to offer for a user message (or the one tool a name names)."""
        text = self._text(str_or_query_bundle)
        named = self._named(text)
        if named is not None:
            return named
        choice = self.narrower.choose(self.catalog, self._conversation(text))
        return self._tools(choice.names, choice.search_tool)

    async def aretrieve(self, str_or_query_bundle: str | QueryBundle) -> list[BaseTool]:  # type: ignore[override, unused-ignore]
        """Async twin of :meth:`retrieve`."""
        text = self._text(str_or_query_bundle)
        named = self._named(text)
        if named is not None:
            return named
        choice = await self.narrower.achoose(self.catalog, self._conversation(text))
        return self._tools(choice.names, choice.search_tool)
