"""The per-turn runtime: a Conversation composing selection, grounding, reduction and tools."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.runtime._conversation import Conversation, Pack
    from shortlist.runtime._model import (
        AnthropicMessagesModel,
        CallableModel,
        ChatModel,
        OpenAIChatModel,
        OpenAIResponsesModel,
    )
    from shortlist.runtime._report import TurnReport
    from shortlist.runtime._tools import Tool, tool

__all__ = [
    "AnthropicMessagesModel",
    "CallableModel",
    "ChatModel",
    "Conversation",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "Pack",
    "Tool",
    "TurnReport",
    "tool",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "CallableModel": "shortlist.runtime._model",
    "AnthropicMessagesModel": "shortlist.runtime._model",
    "ChatModel": "shortlist.runtime._model",
    "Conversation": "shortlist.runtime._conversation",
    "OpenAIChatModel": "shortlist.runtime._model",
    "OpenAIResponsesModel": "shortlist.runtime._model",
    "Pack": "shortlist.runtime._conversation",
    "Tool": "shortlist.runtime._tools",
    "TurnReport": "shortlist.runtime._report",
    "tool": "shortlist.runtime._tools",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "TurnResult": ("shortlist.runtime._report", None),
    "ModelError": ("shortlist.runtime._model", None),
    "ToolCallRecord": ("shortlist.runtime._report", None),
    "ToolsPrefetched": ("shortlist.runtime._conversation", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
