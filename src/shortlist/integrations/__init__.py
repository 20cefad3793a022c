"""Framework integrations: LangChain/LangGraph, PydanticAI, the OpenAI Agents SDK and LlamaIndex narrow with shortlist.

Each framework has its own module and optional extra, imported only when used
(``from shortlist.integrations.langchain import ShortlistMiddleware``); this package imports no
framework. :class:`~shortlist.integrations.core.ToolNarrower` is the engine they share.
"""

from __future__ import annotations

from shortlist.integrations.core import Conversation, ToolChoice, ToolNarrower, found_in, tool_candidate

__all__ = ["Conversation", "ToolChoice", "ToolNarrower", "found_in", "tool_candidate"]
