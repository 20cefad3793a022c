"""The per-turn runtime: a Conversation composing selection, grounding, reduction and tools."""

from __future__ import annotations

from shortlist.runtime.conversation import Conversation, Pack, ToolsPrefetched
from shortlist.runtime.model import (
    AnthropicMessagesModel,
    CallableModel,
    ChatModel,
    ModelError,
    OpenAIChatModel,
    OpenAIResponsesModel,
)
from shortlist.runtime.report import ToolCallRecord, TurnReport, TurnResult
from shortlist.runtime.tools import Tool, tool

__all__ = [
    "AnthropicMessagesModel",
    "CallableModel",
    "ChatModel",
    "Conversation",
    "ModelError",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "Pack",
    "Tool",
    "ToolCallRecord",
    "ToolsPrefetched",
    "TurnReport",
    "TurnResult",
    "tool",
]
