"""Framework integrations: LangChain/LangGraph, PydanticAI, the OpenAI Agents SDK and LlamaIndex narrow with shortlist.

Each framework has its own module and optional extra, imported only when used
(``from shortlist.integrations.langchain import ShortlistMiddleware``); this package imports no
framework. :class:`~shortlist.integrations._core.ToolNarrower` is the engine they share.
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.integrations._core import ToolNarrower

__all__ = [
    "ToolNarrower",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "ToolNarrower": "shortlist.integrations._core",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "Conversation": ("shortlist.integrations._turn", None),
    "ToolChoice": ("shortlist.integrations._core", None),
    "found_in": ("shortlist.integrations._core", None),
    "tool_candidate": ("shortlist.integrations._core", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
