"""Adapters between the formats hosts already have and shortlist's candidates."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.adapters._tools import (
        candidates_from_tools,
        render_tools,
        to_anthropic_tool,
        to_mcp_tool,
        to_openai_responses_tool,
        to_openai_tool,
    )

__all__ = [
    "candidates_from_tools",
    "render_tools",
    "to_anthropic_tool",
    "to_mcp_tool",
    "to_openai_responses_tool",
    "to_openai_tool",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "candidates_from_tools": "shortlist.adapters._tools",
    "render_tools": "shortlist.adapters._tools",
    "to_anthropic_tool": "shortlist.adapters._tools",
    "to_mcp_tool": "shortlist.adapters._tools",
    "to_openai_responses_tool": "shortlist.adapters._tools",
    "to_openai_tool": "shortlist.adapters._tools",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "candidate_from_dict": ("shortlist.adapters._tools", None),
    "load_catalog": ("shortlist.adapters._catalog", "shortlist"),
    "skill_to_candidate": ("shortlist.adapters._tools", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
