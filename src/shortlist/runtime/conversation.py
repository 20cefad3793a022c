"""The per-turn runtime: a ``Conversation`` composes every selection on each ``send``.

A turn: (1) narrow the skill index and the tools with the bound selectors, once, with
this turn's query; (2) retrieve grounding and memories *before* rendering the system
prompt; (3) reduce the history to its budget; (4) build the request in OpenAI or
Anthropic format; (5) call the model and execute its tool calls (``memory__*`` and
``skill__*`` by the runtime, host tools by their functions, MCP tools by their server),
looping until it answers or the round limit; (6) return the answer and a turn report.
A selector, retriever or reducer failure is an event, never a failed turn.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shortlist.config import RuntimeConfig, load_runtime_config
from shortlist.errors import ConfigError
from shortlist.events import Event, EventHook, emit, event_hooks
from shortlist.runtime.formats import Format, ModelTurn, ToolDef, build_request, parse_response
from shortlist.runtime.grounding import Grounding
from shortlist.runtime.model import CallableModel, ChatModel
from shortlist.runtime.report import ToolCallRecord, TurnReport, TurnResult
from shortlist.runtime.tools import Tool
from shortlist.selection.base import Selector
from shortlist.selection.facade import DEFAULT, policy_from_config
from shortlist.selection.narrowing import NarrowingPolicy, PinPolicy, TurnSelection, anarrow, is_wildcard
from shortlist.selection.query import last_user_text
from shortlist.selection.registry import DEFAULT_SELECTOR, SelectorRegistry
from shortlist.types import Candidate, Query

__all__ = ["Conversation", "Pack", "RuntimeStepFailed"]


@dataclass(frozen=True, kw_only=True)
class RuntimeStepFailed(Event):
    """A step of the turn failed and the turn went on without it."""

    name: str = "runtime.step_failed"
    area: str = "runtime"
    level: int = 30
    step: str = ""
    error: str = ""


@dataclass
class Pack:
    """What an agent is: its prompt, tools, skills, MCP servers, corpus and memory.

    Args:
        id: the pack id (sent to selectors as ``pack_id``).
        system_prompt: the template; ``{{grounding}}`` and ``{{memory_context}}`` are replaced
            by the delimited context of the turn (appended at the end when absent).
        tools: host tools.
        allowed_tools: the tool names (and ``mcp__server__*`` wildcards) offered; None = all.
        skills: skill sources (directories or inline skills) for ``skill__*`` tools.
        mcp_servers: MCP servers by name: a stdio command line or an ``http(s)://`` URL.
        corpus: a corpus retriever (``retrieve_context(scope, messages)``) for grounding.
        memory: a memory store for ``memory__*`` tools and ambient memories.
        scope: the subject of the memory store, e.g. ``{"user_id": "u1"}``.
        memory_tools: offer the ``memory__*`` tools (False = "retrieval on, tools off").
    """

    id: str = "pack"
    system_prompt: str = "You are a helpful assistant."
    tools: Sequence[Tool] = ()
    allowed_tools: Sequence[str] | None = None
    skills: Sequence[Any] = ()
    mcp_servers: Mapping[str, str] = field(default_factory=dict)
    corpus: Any = None
    memory: Any = None
    scope: Mapping[str, str] = field(default_factory=dict)
    memory_tools: bool = True
    agent_id: str = ""


def _elapsed(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class Conversation:
    """One conversation of a pack with a model.

    Args:
        pack: the agent definition.
        model: a :class:`ChatModel` or a callable ``request -> response``.
        config: a :class:`RuntimeConfig` or the path of a ``runtime.yaml``.
        tool_selector / skills_selector: a Selector, a name, None, or DEFAULT (the config's
            binding, else the built-in default).
        selectors: selectors registered in code, by name.
        format: ``"openai"`` (chat completions) or ``"anthropic"`` (messages).
        k: tools (and skills) surfaced per turn besides pins.
        max_rounds: model calls per turn before giving up.
        max_tokens / max_chars: the history budget (None: no reduction).
        reduction: ``"relevance"`` (default) or ``"newest"``: the local reducer.
        on_event: a hook called with every event of this conversation's turns.
    """

    def __init__(
        self,
        pack: Pack,
        *,
        model: ChatModel | Callable[..., Any],
        config: RuntimeConfig | str | Path | None = None,
        tool_selector: Selector | str | None = DEFAULT,
        skills_selector: Selector | str | None = DEFAULT,
        selectors: Mapping[str, Selector] | None = None,
        format: Format = "openai",
        k: int = 5,
        max_rounds: int = 8,
        max_tokens: int | None = None,
        max_chars: int | None = None,
        reduction: str = "relevance",
        grounding_tokens: int = 1000,
        on_event: EventHook | None = None,
    ) -> None:
        if format not in ("openai", "anthropic"):
            raise ConfigError(f"format must be 'openai' or 'anthropic', not {format!r}")
        if max_rounds < 1:
            raise ConfigError("max_rounds must be at least 1")
        source = None
        if isinstance(config, (str, Path)):
            source = str(config)
            config = load_runtime_config(config)
        self.config = config or RuntimeConfig()
        self.pack = pack
        self.model: ChatModel = model if isinstance(model, ChatModel) else CallableModel(model)
        self.registry = SelectorRegistry(self.config, selectors=selectors, source=source)
        self.policy = policy_from_config(self.config)
        self.format: Format = format
        self.k = k
        self.max_rounds = max_rounds
        self.history: list[dict[str, Any]] = []
        self._hooks: tuple[EventHook, ...] = (on_event,) if on_event else ()
        self._lock = asyncio.Lock()
        self._tool_selector_arg = tool_selector
        self._skills_selector_arg = skills_selector
        self._tools = {t.name: t for t in pack.tools}
        self._candidates: tuple[Candidate, ...] | None = None
        if len(self._tools) != len(pack.tools):
            raise ConfigError(f"pack {pack.id!r} defines a tool name twice")
        self.grounding = Grounding(pack, budget_tokens=grounding_tokens)
        self._reducer = _make_reducer(max_tokens, max_chars, reduction)
        from shortlist.runtime.capabilities import Capabilities

        self.capabilities = Capabilities(pack)

    # -- selectors -------------------------------------------------------------------------
    def _selector(self, arg: Selector | str | None, kind: str) -> Selector | None:
        if arg is None or isinstance(arg, Selector):
            return arg
        if isinstance(arg, str):
            return self.registry.get(arg)
        bound = self.registry.skills_selector() if kind == "skill" else self.registry.tool_selector()
        return bound or self.registry.get(DEFAULT_SELECTOR)

    def _tool_policy(self) -> NarrowingPolicy:
        # Tools of live MCP servers are narrowed like any tool; only wildcard entries pin them.
        pins = self.policy.pins
        namespaces = tuple(n for n in pins.namespaces if n != "mcp")
        return NarrowingPolicy(
            pins=PinPolicy(namespaces=namespaces, always_include=pins.always_include, pin_wildcards=True),
            order=self.policy.order,
            on_abstain=self.policy.on_abstain,
            timeout_s=self.policy.timeout_s,
        )

    # -- the turn ----------------------------------------------------------------------------
    def send(self, user_message: str | Mapping[str, Any]) -> TurnResult:
        """Blocking form of :meth:`asend`.

        Raises:
            RuntimeError: when called from a running event loop (use ``await asend`` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.asend(user_message))
        raise RuntimeError("Conversation.send() called inside an event loop; use 'await conversation.asend(...)'")

    async def asend(self, user_message: str | Mapping[str, Any]) -> TurnResult:
        """Run one turn: narrow, ground, reduce, call the model and its tools; return the answer."""
        async with self._lock:
            events: list[Event] = []
            with event_hooks(events.append, *self._hooks):
                result = await self._turn(user_message)
            result.report.events = [e.to_dict() for e in events]
            return result

    async def _turn(self, user_message: str | Mapping[str, Any]) -> TurnResult:
        t_total = time.perf_counter()
        report = TurnReport()
        message = {"role": "user", "content": user_message} if isinstance(user_message, str) else dict(user_message)
        self.history.append(message)
        text = last_user_text(self.history)
        await self.capabilities.astart()

        # 1. narrow skills and tools, once per turn
        t = time.perf_counter()
        skill_turn: TurnSelection | None = None
        skill_candidates = self.capabilities.skill_candidates()
        if skill_candidates:
            skill_turn = await anarrow(
                self._selector(self._skills_selector_arg, "skill"),
                Query(text, "skill", self.k, self.pack.id, self.pack.agent_id),
                skill_candidates,
                self.policy,
            )
            report.skills = skill_turn.to_dict()
            self.capabilities.begin_skill_turn(skill_turn)
        report.timings_ms["select_skills"] = _elapsed(t)
        t = time.perf_counter()
        tool_turn = await anarrow(
            self._selector(self._tool_selector_arg, "tool"),
            Query(text, "tool", self.k, self.pack.id, self.pack.agent_id),
            self._tool_candidates(),
            self._tool_policy(),
        )
        report.tools = tool_turn.to_dict()
        report.timings_ms["select_tools"] = _elapsed(t)

        # 2. grounding and memories before the system prompt is rendered
        t = time.perf_counter()
        system = await self.grounding.arender(self.history, report)
        report.timings_ms["retrieve"] = _elapsed(t)

        # 3. reduce the history to its budget
        t = time.perf_counter()
        history = await self._reduce(report)
        report.timings_ms["reduce"] = _elapsed(t)

        # 4-5. request, model, tools, until an answer
        answer, request, stopped = await self._loop(system, history, tool_turn, report)
        report.timings_ms["total"] = _elapsed(t_total)
        overhead = (
            report.timings_ms["total"] - report.timings_ms.get("model", 0.0) - report.timings_ms.get("tools", 0.0)
        )
        report.timings_ms["overhead"] = round(overhead, 3)
        return TurnResult(answer=answer, report=report, request=request, stopped=stopped)

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

    async def _reduce(self, report: TurnReport) -> list[dict[str, Any]]:
        if self._reducer is None:
            return list(self.history)
        from shortlist.reduction import openai_from_fragments, openai_to_fragments

        try:
            result = await self._reducer.reduce(openai_to_fragments(self.history))
        except Exception as exc:  # the turn goes on with the full history; reported as an event
            emit(RuntimeStepFailed(step="reduce", error=f"{type(exc).__name__}: {exc}"))
            report.reduction = {"error": str(exc)}
            return list(self.history)
        report.tokens_before, report.tokens_after = result.tokens_before, result.tokens_after
        report.reduction = {
            "skipped": result.skipped,
            "chars_before": result.chars_before,
            "chars_after": result.chars_after,
            "over_budget": result.over_budget,
        }
        return openai_from_fragments(result.fragments)

    def _offered(self, tool_turn: TurnSelection) -> list[ToolDef]:
        defs: list[ToolDef] = []
        seen: set[str] = set()
        names = [c.id for c in tool_turn.surfaced] + list(self.capabilities.active_skill_tools())
        for entry in names:
            for name in self.capabilities.expand(entry, self._tools):
                if name in seen:
                    continue
                seen.add(name)
                host = self._tools.get(name)
                if host is not None:
                    defs.append(ToolDef(host.name, host.description, host.parameters))
                else:
                    mcp = self.capabilities.mcp_tool_def(name)
                    if mcp is not None:
                        defs.append(mcp)
        for d in self.capabilities.system_tool_defs():
            if d.name not in seen:
                seen.add(d.name)
                defs.append(d)
        return defs

    async def _loop(
        self,
        system: str,
        history: list[dict[str, Any]],
        tool_turn: TurnSelection,
        report: TurnReport,
    ) -> tuple[str, dict[str, Any], str]:
        model_ms = tools_ms = 0.0
        request: dict[str, Any] = {}
        working = list(history)
        first_request: dict[str, Any] | None = None
        for _ in range(self.max_rounds):
            offered = self._offered(tool_turn)  # activated skills add tools between rounds
            if not report.offered_tools:
                report.offered_tools = [d.name for d in offered]
            request = build_request(self.format, model=self.model.model, system=system, messages=working, tools=offered)
            first_request = first_request or request
            t = time.perf_counter()
            body = await self.model.acomplete(request)
            model_ms += _elapsed(t)
            report.rounds += 1
            turn: ModelTurn = parse_response(self.format, body)
            working.append(turn.message)
            self.history.append(turn.message)
            if not turn.tool_calls:
                report.timings_ms["model"], report.timings_ms["tools"] = model_ms, tools_ms
                return turn.text, first_request, "answer"
            offered_names = {d.name for d in offered}
            t = time.perf_counter()
            for call in turn.tool_calls:
                content = await self._execute(call.name, call.arguments, offered_names, report)
                result_msg = {"role": "tool", "tool_call_id": call.id, "content": content}
                working.append(result_msg)
                self.history.append(result_msg)
            tools_ms += _elapsed(t)
        report.timings_ms["model"], report.timings_ms["tools"] = model_ms, tools_ms
        return "", first_request or request, "max_rounds"

    async def _execute(
        self, name: str, arguments: Mapping[str, Any] | str, offered: set[str], report: TurnReport
    ) -> str:
        t = time.perf_counter()
        source = "unknown"
        try:
            if name not in offered:
                raise LookupError(f"tool {name!r} is not available this turn")
            if name in self._tools:
                source = "host"
                out = await self._tools[name].acall(arguments)
            else:
                source, out = await self.capabilities.execute(name, arguments)
        except Exception as exc:  # returned to the model as a tool error; the turn goes on
            report.tool_calls.append(ToolCallRecord(name, False, _elapsed(t), source, f"{type(exc).__name__}: {exc}"))
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        report.tool_calls.append(ToolCallRecord(name, True, _elapsed(t), source))
        return out

    async def aclose(self) -> None:
        """Close selectors, MCP connections and the model client."""
        self.registry.close()
        await self.capabilities.aclose()
        await self.model.aclose()


def _make_reducer(max_tokens: int | None, max_chars: int | None, kind: str) -> Any:
    if max_tokens is None and max_chars is None:
        return None
    from shortlist.reduction import ReductionStage

    if kind not in ("relevance", "newest"):
        raise ConfigError(f"reduction must be 'relevance' or 'newest', not {kind!r}")
    return ReductionStage.local("history", max_tokens=max_tokens, max_chars=max_chars, selector=kind)
