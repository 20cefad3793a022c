"""LangChain's fake chat model with ``bind_tools``, recording the tools of every call, and a tool-call message.

Imported only after the test module's ``importorskip("langchain")``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class RecordingModel(GenericFakeChatModel):
    """LangChain's fake chat model, with ``bind_tools``; records the tool names of every call."""

    seen: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append([t["function"]["name"] for t in kwargs.get("tools", [])])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def call(name: str, args: dict[str, Any], cid: str) -> AIMessage:
    """An assistant message that calls ``name`` with ``args``."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": cid, "type": "tool_call"}])


class ScriptsByConversation(BaseChatModel):
    """A chat model serving concurrent conversations: each answers from its own script (keyed by its first
    user message), and the first calls of ``together`` conversations return only once all have started."""

    scripts: dict[str, list[AIMessage]]
    together: int = 2
    seen: dict[str, list[list[str]]] = Field(default_factory=dict)
    started: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripts-by-conversation"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async only: the conversations run concurrently")

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        key = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        self.seen.setdefault(key, []).append([t["function"]["name"] for t in kwargs.get("tools", [])])
        if key not in self.started:
            self.started.append(key)
            while len(self.started) < self.together:  # every conversation's first call is in flight
                await asyncio.sleep(0.01)
        return ChatResult(generations=[ChatGeneration(message=self.scripts[key].pop(0))])
