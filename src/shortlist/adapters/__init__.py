"""Adapters between the formats hosts already have and shortlist's candidates."""

from __future__ import annotations

from shortlist.adapters.catalog import load_catalog
from shortlist.adapters.tools import (
    candidate_from_dict,
    candidates_from_tools,
    render_tools,
    skill_to_candidate,
    to_anthropic_tool,
    to_mcp_tool,
    to_openai_responses_tool,
    to_openai_tool,
)

__all__ = [
    "candidate_from_dict",
    "candidates_from_tools",
    "load_catalog",
    "render_tools",
    "skill_to_candidate",
    "to_anthropic_tool",
    "to_mcp_tool",
    "to_openai_responses_tool",
    "to_openai_tool",
]
