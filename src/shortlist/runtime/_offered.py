"""What the model is offered each round of a turn: the catalog's candidates and definitions, the
prompt's tools and the deferred ones, how a search result carries the tools it found, the token
counts of the tools and of what is behind them, and the signals that explain a prefix break.
A mixin of :class:`shortlist.runtime._conversation.Conversation`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shortlist._tokens import count_tokens, tool_text
from shortlist._types import Candidate, candidate_group
from shortlist.errors import ConfigError
from shortlist.offer import OfferPolicy, ToolSession
from shortlist.offer._bridge import uses_bridge
from shortlist.offer._policies import OFFER_POLICIES, default_policy
from shortlist.runtime._context import (
    HistoryWindow,
)
from shortlist.runtime._formats import (
    CALL_TOOL,
    FIND_TOOLS,
    TOOL_LOADINGS,
    Format,
    SearchResultMode,
    ToolDef,
    ToolLoading,
    namespace_name,
)
from shortlist.runtime._grounding import Grounding
from shortlist.runtime._pack import Pack
from shortlist.runtime._tools import Tool
from shortlist.selection._narrowing import is_wildcard

if TYPE_CHECKING:
    from shortlist.runtime._capabilities import Capabilities

__all__ = ["OfferedTools", "resolve_loading"]


def resolve_loading(
    format: Format, offer_policy: OfferPolicy | None, tool_loading: ToolLoading | None
) -> tuple[OfferPolicy, ToolLoading]:
    """A conversation's offer policy and how found tools are loaded, from its arguments (None: defaults).

    Raises:
        ConfigError: an unknown loading or policy, or a loading the format or the policy cannot use.
    """
    if tool_loading is not None and tool_loading not in TOOL_LOADINGS:
        raise ConfigError(f"tool_loading must be one of {', '.join(TOOL_LOADINGS)} or None, not {tool_loading!r}")
    if tool_loading == "addition" and format != "anthropic":
        raise ConfigError("tool_loading='addition' (Anthropic tool_addition blocks) needs format='anthropic'")
    policy = offer_policy or ("deferred" if tool_loading not in (None, "native") else default_policy(format))
    if policy not in OFFER_POLICIES:
        raise ConfigError(f"offer_policy must be one of {', '.join(OFFER_POLICIES)} or None, not {policy!r}")
    # chat completions cannot defer: a deferred conversation calls found tools through the bridge
    loading: ToolLoading = tool_loading or ("bridge" if uses_bridge(format, policy) else "native")
    if loading != "native" and policy != "deferred":
        raise ConfigError(
            f"tool_loading={loading!r} loads found tools without changing the tools array: it needs "
            f"offer_policy='deferred', not {policy!r}"
        )
    return policy, loading


class OfferedTools:
    """The offer's side of a conversation (its state is the conversation's)."""

    # set by Conversation.__init__
    _tools: dict[str, Tool]
    _history: list[dict[str, Any]]
    _candidates: tuple[Candidate, ...] | None
    _groups: dict[str, str] | None
    _catalog_defs: tuple[tuple[Candidate, ...], list[ToolDef]] | None
    _counted: tuple[int, int]
    _window_tokens: int
    _searches: dict[str, tuple[str, ...]]
    _turns: int
    k: int
    pack: Pack
    format: Format
    tool_loading: ToolLoading
    session: ToolSession
    grounding: Grounding
    window: HistoryWindow
    capabilities: Capabilities

    def _tool_candidates(self) -> tuple[Candidate, ...]:
        # A tuple that stays the same object across turns lets narrowing reuse its pin split.
        if self._candidates is None:
            self._candidates = tuple(self._build_tool_candidates())
        return self._candidates

    def _build_tool_candidates(self) -> list[Candidate]:
        pack_tools = [t.candidate for t in self.pack.tools] + self.capabilities.mcp_candidates()
        allowed = self.pack.allowed_tools
        if allowed is None:
            return pack_tools
        by_id = {c.id: c for c in pack_tools}
        out: list[Candidate] = []
        for name in allowed:
            if is_wildcard(name):
                out.append(Candidate(name, description=f"all tools matching {name}"))
            elif name in by_id:
                out.append(by_id[name])
        return out

    def _def(self, name: str) -> ToolDef | None:
        host = self._tools.get(name)
        if host is not None:
            return ToolDef(host.name, host.description, host.parameters)
        return self.capabilities.mcp_tool_def(name)

    def _defs(self, entries: Sequence[str]) -> list[ToolDef]:
        return [d for d in (self._def(n) for n in self.capabilities.expand(entries, self._tools)) if d is not None]

    def _all_defs(self) -> list[ToolDef]:
        """The definitions of every catalog tool, in catalog order: made once per catalog, read every round."""
        candidates = self._tool_candidates()
        cached = self._catalog_defs
        if cached is None or cached[0] is not candidates:
            cached = (candidates, self._defs([c.id for c in candidates]))
            self._catalog_defs = cached
        return cached[1]

    def _deferring(self) -> bool:
        # the provider defers: found tools are deferred definitions the history loads
        # (Anthropic tool_reference / tool_addition, Responses tool_search_output)
        return (
            self.format in ("anthropic", "openai-responses")
            and self.session.policy == "deferred"
            and self.tool_loading != "bridge"
        )

    def _result_mode(self) -> SearchResultMode:
        """How a ``find_tools`` result (a real search or a prefetch) carries the tools it found."""
        if self._deferring():
            if self.format == "openai-responses":
                return "tools"
            return "additions" if self.tool_loading == "addition" else "references"
        if self.session.policy == "deferred":
            return "definitions"  # a plain find_tools: the definitions travel in the result
        return "names"  # stable / per_turn: the definitions join the next request's tools

    def _namespaces(self) -> dict[str, str]:
        """Tool name -> Responses namespace: one per server or suite (:func:`candidate_group`)."""
        if self._groups is None:
            self._groups = {}
            for c in self._tool_candidates():
                group = candidate_group(c)
                if group is not None:
                    self._groups[c.id] = namespace_name(group)
        return self._groups

    def _offered(self) -> tuple[list[ToolDef], list[ToolDef], set[str]]:
        """This round's ``(tools in the prompt, deferred tools, callable names)``.

        The prompt's tools are, in this order: the tools block (and tools activated skills
        added), the runtime's own tools, ``find_tools`` (when some catalog tool is outside
        the block) and, under the bridge, ``call_tool``; then, for chat completions without
        the bridge, the loaded tools (chat completions cannot defer).
        """
        state = self.session.state
        block = self._defs([*state.block, *self.capabilities.active_skill_tools()])
        seen = {d.name for d in block}
        prompt = list(block)
        for d in self.capabilities.system_tool_defs(listed_index=self.grounding.placement == "history"):
            if d.name not in seen:
                seen.add(d.name)
                prompt.append(d)
        outside = [d for d in self._all_defs() if d.name not in seen]
        if self.session.policy != "per_turn" and outside:
            prompt.append(FIND_TOOLS)
            seen.add(FIND_TOOLS.name)
            if self.tool_loading == "bridge":
                prompt.append(CALL_TOOL)
                seen.add(CALL_TOOL.name)
        loaded = {d.name for d in self._defs(state.loaded)} - seen
        deferred: list[ToolDef] = []
        if self._deferring():
            deferred = outside  # every other catalog tool, in catalog order: a stable tools array
        elif self.tool_loading != "bridge":
            prompt.extend(d for d in outside if d.name in loaded)
        return prompt, deferred, seen | loaded

    def _prefix_signals(self, prompt: Sequence[ToolDef], system: str) -> dict[str, dict[str, Any]]:
        """What the runtime changes on purpose, per part of the cached prefix (the reasons of a break)."""
        state = self.session.state
        in_prompt = {d.name for d in prompt}
        placement = self.grounding.placement
        return {
            "tools": {
                "offer_changed": state.block,
                "tool_loaded": tuple(n for n in state.loaded if n in in_prompt),
                "skill_tools": self.capabilities.active_skill_tools(),
                "skill_index": tuple(s.name for s in self.capabilities.skill_index()) if placement == "system" else (),
            },
            "system": {
                "system_prompt": str(self.pack.system_prompt),
                "grounding": system if placement == "system" else "",
            },
            "history": {"reduction": self.window.reductions, "history_replaced": self.window.replacements},
        }

    def _count(self, text: str) -> int:
        return count_tokens(text)

    def _prefix_tokens(self) -> int:
        """Tokens behind the tools block: the system prompt and the model's view of the history.

        Each message is counted once; a reduction or a replaced history is counted again.
        """
        generation, counted = self._counted
        messages = self.window.messages
        if generation != self.window.generation or counted > len(messages):
            counted, self._window_tokens = 0, 0
        for message in messages[counted:]:
            self._window_tokens += self._count(json.dumps(message, ensure_ascii=False, default=str))
        self._counted = (self.window.generation, len(messages))
        return self._count(str(self.pack.system_prompt)) + self._window_tokens

    def _tool_tokens(self) -> int:
        """Tokens of the definitions the model saw at the end of the turn (block + loaded)."""
        prompt, _, callable_names = self._offered()
        names = {d.name for d in prompt}
        defs = [*prompt, *(d for d in self._defs(sorted(callable_names - names)) if d is not None)]
        return sum(count_tokens(tool_text(d.name, d.description, d.parameters)) for d in defs)
