"""The per-turn runtime: a Conversation composing selection, grounding, reduction and tools."""

from __future__ import annotations

from shortlist.runtime.conversation import Conversation, Pack, ToolsPrefetched
from shortlist.runtime.model import CallableModel, ChatModel, ModelError, OpenAIChatModel
from shortlist.runtime.report import ToolCallRecord, TurnReport, TurnResult
from shortlist.runtime.tools import Tool, tool

__all__ = [
    "CallableModel",
    "ChatModel",
    "Conversation",
    "ModelError",
    "OpenAIChatModel",
    "Pack",
    "Tool",
    "ToolCallRecord",
    "ToolsPrefetched",
    "TurnReport",
    "TurnResult",
    "tool",
]
