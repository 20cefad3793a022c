"""The per-turn runtime: a ``Conversation`` composes every selection on each ``send``.

A turn: (1) narrow the skill index and decide the turn's tool *offer* with the
conversation's :class:`~shortlist.offer.ToolSession` (``per_turn``, ``stable`` or
``deferred``; deferred tools the ranking expects are *prefetched* into the history as a
synthetic ``find_tools`` call and result, with no model call); (2) retrieve grounding and
memories before the request is built, and put what the history does not carry yet into the
turn's user message (or, with ``grounding_placement="system"``, into the system prompt); (3)
when the history passes its budget, reduce it to the low-water mark; (4) build the request in
OpenAI or Anthropic format, with the provider's deferred loading and cache breakpoints
(``runtime/formats.py``), and check it against the previous request (did the cached prefix
survive, and if not, which part broke it and why); (5) call the model and execute its tool
calls (``find_tools`` by the session's search, ranked by the bound selector; ``memory__*`` and
``skill__*`` by the runtime, host tools by their functions, MCP tools by their server),
looping until it answers or the round limit; (6) return the answer and a turn report. A
selector, retriever, reducer or feedback-log failure is an event, never a failed turn.

**Every part of the context under the cache.** Providers cache tools → system → messages by
prefix. By default the tools array and the system prompt are the same on every request, the
turn's grounding, memories and newly surfaced skills enter the history with the turn (and stay,
never injected twice), and the history only grows between reductions, which come in rare large
steps (``runtime/context.py``).

**The default offer policy** is ``deferred`` for every format: the tools block never changes,
so the cached prefix survives every turn, and found tools enter the history after it, each
format its own way (``tool_loading``, ``runtime/formats.py``): Anthropic ``defer_loading`` +
``tool_reference`` (or ``tool_addition``, beta), the Responses API's client ``tool_search``
over namespaces, and for chat completions, which can only call tools listed in the request's
tools array, a fixed ``find_tools`` + ``call_tool`` bridge whose arguments are validated
against the found tool's schema. In the conversation replay (``shortlist.eval.conversations``)
the bridge cost 0.44x / 0.68x what ``stable`` cost (0 / 20k tokens of history), so ``stable``
(the block grows once a search found a tool) is an option, no longer the chat default.

**One event loop per conversation.** :meth:`Conversation.send` and :meth:`Conversation.asend`
run every turn on the conversation's own event loop, in a dedicated thread started by the
first turn and stopped by :meth:`~Conversation.close` / :meth:`~Conversation.aclose`, so MCP
servers start once per conversation and two threads may call ``send()`` on one conversation
(their turns run one after the other).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from shortlist.config import RuntimeConfig
from shortlist.errors import ConfigError
from shortlist.events import Event, EventHook, emit, event_hooks
from shortlist.offer import (
    OFFER_POLICIES,
    PREFETCH_QUERY,
    SEARCH_TOOL_NAME,
    Offer,
    OfferPolicy,
    ToolSession,
    default_policy,
)
from shortlist.offer.bridge import CALL_TOOL_NAME, check_bridge_call, uses_bridge
from shortlist.reduction.stage import DEFAULT_LOCAL_SELECTOR
from shortlist.runtime.context import (
    DEFAULT_LOW_WATER,
    GroundingPlacement,
    HistoryWindow,
    PrefixTracker,
)
from shortlist.runtime.formats import (
    CALL_TOOL,
    FIND_TOOLS,
    FORMATS,
    TOOL_LOADINGS,
    Format,
    ModelTurn,
    SearchResultMode,
    ToolCall,
    ToolDef,
    ToolLoading,
    build_request,
    namespace_name,
    parse_response,
    search_result_content,
)
from shortlist.runtime.grounding import Grounding
from shortlist.runtime.model import CallableModel, ChatModel
from shortlist.runtime.report import ToolCallRecord, TurnReport, TurnResult
from shortlist.runtime.tools import Tool
from shortlist.selection.base import Selector
from shortlist.selection.cousage import CoUsage
from shortlist.selection.facade import DEFAULT, Shortlist
from shortlist.selection.narrowing import is_wildcard
from shortlist.selection.query import last_user_text, message_text
from shortlist.tokens import count_tokens, tool_text
from shortlist.types import Candidate, Query, TurnSelection, candidate_group

if TYPE_CHECKING:
    from shortlist.feedback import FeedbackStore
    from shortlist.memory import MemoryStore
    from shortlist.retrieval.inject import ContextRetriever
    from shortlist.skills import Skill, SkillSource

__all__ = [
    "RESERVED_TOOL_PREFIXES",
    "BridgeCallRefused",
    "Conversation",
    "Pack",
    "RuntimeStepFailed",
    "ToolsPrefetched",
]

_T = TypeVar("_T")

#: Tool-name prefixes the runtime's own tools use; a host tool may not take them.
RESERVED_TOOL_PREFIXES: tuple[str, ...] = ("memory__", "skill__")
#: Names of the runtime's own fixed-surface tools; a host tool may not take them.
RESERVED_TOOL_NAMES: tuple[str, ...] = (SEARCH_TOOL_NAME, CALL_TOOL_NAME)
#: How many of the turn's top-ranked deferred tools a ``deferred`` conversation prefetches.


@dataclass(frozen=True, kw_only=True)
class RuntimeStepFailed(Event):
    """A step of the turn failed and the turn went on without it."""

    name: ClassVar[str] = "runtime.step_failed"
    area: ClassVar[str] = "runtime"
    level: int = 30
    step: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class BridgeCallRefused(Event):
    """A ``call_tool`` call was not run: the tool was not found yet, or its arguments were refused.

    The model got the reason as the call's tool error and the turn went on.
    """

    name: ClassVar[str] = "runtime.bridge_call_refused"
    area: ClassVar[str] = "runtime"
    level: int = logging.WARNING
    tool: str = ""
    reason: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolsPrefetched(Event):
    """Deferred tools were loaded into the history before the model call (no model call spent)."""

    name: ClassVar[str] = "runtime.tools_prefetched"
    area: ClassVar[str] = "runtime"
    level: int = logging.INFO
    tools: tuple[str, ...] = ()


@dataclass
class Pack:
    """What an agent is: its prompt, tools, skills, MCP servers, corpus and memory.

    Args:
        id: the pack id (sent to selectors as ``pack_id``).
        system_prompt: the template. Under the conversation's default ``grounding_placement``
            (``"history"``) its ``{{grounding}}`` and ``{{memory_context}}`` slots are left
            empty and the turn's context goes into the turn's user message; under
            ``"system"`` they receive the delimited context of the turn (appended at the end
            when absent).
        tools: host tools.
        allowed_tools: the tool names (and ``mcp__server__*`` wildcards) offered; None = all.
        skills: skill sources (directories or inline skills) for ``skill__*`` tools.
        mcp_servers: MCP servers by name: a stdio command line or an ``http(s)://`` URL.
        corpus: a corpus retriever (``retrieve_context(scope, messages)``) for grounding.
        memory: a memory store for ``memory__*`` tools and ambient memories.
        scope: the subject of the memory store, e.g. ``{"user_id": "u1"}``.
        memory_tools: offer the ``memory__*`` tools (False = "retrieval on, tools off").
        feedback: a feedback log; every ``find_tools`` search of the model is recorded there
            (the query, what it found, which of those the model then called), so the
            selector's examples learn the turns the first ranking missed.
    """

    id: str = "pack"
    system_prompt: str = "You are a helpful assistant."
    tools: Sequence[Tool] = ()
    allowed_tools: Sequence[str] | None = None
    skills: Sequence[SkillSource | str | PathLike[str] | Skill] = ()
    mcp_servers: Mapping[str, str] = field(default_factory=dict)
    corpus: ContextRetriever | None = None
    memory: MemoryStore | None = None
    scope: Mapping[str, str] = field(default_factory=dict)
    memory_tools: bool = True
    agent_id: str = ""
    feedback: FeedbackStore | None = None


def _check_reserved(tools: Sequence[Tool]) -> None:
    for t in tools:
        if t.name in RESERVED_TOOL_NAMES or t.name.startswith(RESERVED_TOOL_PREFIXES):
            raise ConfigError(
                f"host tool {t.name!r} uses a name reserved for the runtime's own tools "
                f"({', '.join(p + '*' for p in RESERVED_TOOL_PREFIXES)}, {', '.join(RESERVED_TOOL_NAMES)}); rename it"
            )


def _elapsed(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class Conversation:
    """One conversation of a pack with a model.

    Args:
        pack: the agent definition.
        model: a :class:`ChatModel` or a callable ``request -> response``.
        config: a :class:`RuntimeConfig` or the path of a ``runtime.yaml``.
        tool_selector / skills_selector: a Selector, a name, None, or DEFAULT (the config's
            binding, else the built-in default); bound through one
            :class:`~shortlist.selection.facade.Shortlist`.
        selectors: selectors registered in code, by name.
        format: ``"openai"`` (chat completions, any OpenAI-compatible endpoint),
            ``"anthropic"`` (messages) or ``"openai-responses"`` (the Responses API: send it with
            :class:`~shortlist.runtime.model.OpenAIResponsesModel`).
        offer_policy: ``"per_turn"``, ``"stable"``, ``"deferred"`` or None for the format's
            default (:func:`shortlist.offer.default_policy`: ``deferred`` for every format;
            ``deferred`` whenever ``tool_loading`` is ``addition`` or ``bridge``).
        tool_loading: how a tool a search or a prefetch found reaches the model without
            touching the cached prefix (``deferred`` only; None: ``"bridge"`` for chat
            completions, ``"native"`` for the others): ``"native"`` (Anthropic
            ``tool_reference``, Responses ``tool_search_output``, chat completions' tools array,
            which changes the array),
            ``"addition"`` (Anthropic only: a ``tool_addition`` system message, beta
            ``mid-conversation-tool-changes-2026-07-01``, sent as ``anthropic-beta``) or
            ``"bridge"`` (any format: a fixed surface of ``find_tools`` and
            ``call_tool(name, arguments)``, whose arguments are validated against the found
            tool's schema; the tools array never changes).
        prompt_cache_key: ``"openai-responses"`` only: the request's ``prompt_cache_key`` (None:
            one generated for this conversation, the same on every request).
        k: tools (and skills) ranked into the offer per turn besides pins.
        search_k: tools one ``find_tools`` call returns.
        hot: ``deferred`` only: the first turn's top tools kept in the fixed tools block
            (default 0: the block is the pins, the runtime's tools and ``find_tools``).
        prefetch: ``deferred`` only: the most of this turn's top-ranked deferred tools loaded
            into the history before the model call (None: 3 under ``deferred``, else 0).
        co_usage: tools called together; prefetches and searches bring a tool's usual
            companions along. Share one across a pack's conversations; None: a fresh one,
            seeded from ``pack.feedback`` when the pack has a feedback log.
        max_rounds: model calls per turn before giving up.
        max_tokens / max_chars: the history budget (None: no reduction). Nothing is reduced
            while the history fits; once it passes the budget it is reduced to ``low_water`` of it.
        reduction: ``"relevance"`` (default) or ``"newest"``: how the local reducer picks the
            steps it keeps once clearing old tool results and old context was not enough.
        low_water: the share of the budget a reduction brings the history down to (default
            :data:`~shortlist.runtime.context.DEFAULT_LOW_WATER`, 0.5): the room left is what the
            next turns append to a stable cached prefix.
        keep_facts: a reduction keeps what the messages it clears or drops stated (numbers,
            ids, names) on a fact sheet at the start of the history (default True; an offline
            extractive summary, :mod:`shortlist.reduction.facts`).
        grounding_tokens: the token budget of each injected block (memories, passages).
        grounding_placement: where the turn's grounding, ambient memories and skill index go:
            ``"history"`` (default: with the turn, in its user message, once; the system prompt
            and the tools array stay the same on every request) or ``"system"`` (rendered into
            the system prompt every turn, and the skill index into ``skill__activate``'s
            description; each change re-writes the provider's cache from there on).
        on_event: a hook called with every event of this conversation's turns.

    Attributes:
        history: the conversation as said: the user's messages, the model's answers and tool
            calls, the results, the prefetched searches; never reduced, no injected context.
            Assigning it starts the model's view over from it.
        window: the model's view (:class:`~shortlist.runtime.context.HistoryWindow`): the same
            turns with their injected context, reduced when over budget.
        prefix: the cached-prefix check of every request (``prefix.breaks`` counts the requests
            that broke it).

    Raises:
        ConfigError: an unknown format, policy, reducer or placement, a ``low_water`` outside
            (0, 1], a tool name used twice, or a host tool named like a runtime tool
            (``memory__*``, ``skill__*``, ``find_tools``).
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
        offer_policy: OfferPolicy | None = None,
        tool_loading: ToolLoading | None = None,
        prompt_cache_key: str | None = None,
        k: int = 5,
        search_k: int = 5,
        hot: int = 0,
        prefetch: int | None = None,
        co_usage: CoUsage | None = None,
        max_rounds: int = 8,
        max_tokens: int | None = None,
        max_chars: int | None = None,
        reduction: str = DEFAULT_LOCAL_SELECTOR,
        low_water: float = DEFAULT_LOW_WATER,
        keep_facts: bool = True,
        grounding_tokens: int = 1000,
        grounding_placement: GroundingPlacement = "history",
        on_event: EventHook | None = None,
    ) -> None:
        if format not in FORMATS:
            raise ConfigError(f"format must be one of {', '.join(map(repr, FORMATS))}, not {format!r}")
        if max_rounds < 1:
            raise ConfigError("max_rounds must be at least 1")
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
        if prompt_cache_key is not None and (not isinstance(prompt_cache_key, str) or not prompt_cache_key):
            raise ConfigError("prompt_cache_key must be a non-empty string or None")
        _check_reserved(pack.tools)
        self._tools = {t.name: t for t in pack.tools}
        if len(self._tools) != len(pack.tools):
            raise ConfigError(f"pack {pack.id!r} defines a tool name twice")
        # one binding layer: the facade resolves the selector arguments and the config's bindings
        self.shortlist = Shortlist(selector=tool_selector, config=config, selectors=selectors, kind="tool")
        self.config = self.shortlist.config
        self.registry = self.shortlist.registry
        self.policy = self.shortlist.policy
        self.tool_binding = self.shortlist.derive(policy=self.shortlist.tool_policy())
        self.skill_binding = self.shortlist.derive(selector=skills_selector, kind="skill")
        self.session = ToolSession(
            self.tool_binding,
            policy=policy,
            k=k,
            search_k=search_k,
            hot=hot,
            prefetch=prefetch,
            co_usage=co_usage if co_usage is not None else _co_usage_of(pack),
        )
        self.pack = pack
        self.model: ChatModel = model if isinstance(model, ChatModel) else CallableModel(model)
        self.format: Format = format
        self.tool_loading: ToolLoading = loading
        self.prompt_cache_key = prompt_cache_key or (
            f"shortlist-{uuid.uuid4().hex}" if format == "openai-responses" else None
        )
        self._groups: dict[str, str] | None = None
        self.k = k
        self.max_rounds = max_rounds
        self._history: list[dict[str, Any]] = []
        self._hooks: tuple[EventHook, ...] = (on_event,) if on_event else ()
        self._lock = asyncio.Lock()
        self._candidates: tuple[Candidate, ...] | None = None
        self.grounding = Grounding(pack, budget_tokens=grounding_tokens, placement=grounding_placement)
        self.window = HistoryWindow(
            max_tokens=max_tokens, max_chars=max_chars, low_water=low_water, reduction=reduction, keep_facts=keep_facts
        )
        self.prefix = PrefixTracker(format)
        from shortlist.runtime.capabilities import Capabilities

        self.capabilities = Capabilities(pack)
        self._counted = (0, 0)  # (window generation, messages of it already in _window_tokens)
        self._window_tokens = 0
        #: find_tools call ids (real or prefetched) -> the tools their result made callable
        self._searches: dict[str, tuple[str, ...]] = {}
        self._turns = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self._closed = False

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation as said (never reduced, no injected context); see the class docs."""
        return self._history

    @history.setter
    def history(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self._history = [dict(m) for m in messages]
        self.window.replace(self._history)

    @property
    def grounding_placement(self) -> GroundingPlacement:
        """Where the turn's grounding, memories and skill index go (``history`` or ``system``)."""
        return self.grounding.placement

    @property
    def offer_policy(self) -> OfferPolicy:
        """The conversation's offer policy."""
        return self.session.policy

    # -- the conversation's event loop ---------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._closed:
                raise RuntimeError("the conversation is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="shortlist-conversation", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        # run on the conversation's loop, in a copy of the caller's context (scoped event hooks apply)
        try:
            loop = self._ensure_loop()
        except RuntimeError:
            coro.close()  # never started: no "never awaited" warning
            raise
        return contextvars.copy_context().run(asyncio.run_coroutine_threadsafe, coro, loop)

    # -- the turn ------------------------------------------------------------------------------
    def send(self, user_message: str | Mapping[str, Any]) -> TurnResult:
        """Blocking form of :meth:`asend`; safe to call from several threads.

        Raises:
            RuntimeError: when called from a running event loop (use ``await asend`` there), or
                after :meth:`close`.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._submit(self._asend(user_message)).result()
        raise RuntimeError("Conversation.send() called inside an event loop; use 'await conversation.asend(...)'")

    async def asend(self, user_message: str | Mapping[str, Any]) -> TurnResult:
        """Run one turn (on the conversation's own loop): narrow, ground, reduce, call the model and its tools."""
        if asyncio.get_running_loop() is self._loop:
            return await self._asend(user_message)
        return await asyncio.wrap_future(self._submit(self._asend(user_message)))

    async def _asend(self, user_message: str | Mapping[str, Any]) -> TurnResult:
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
        self._history.append(message)
        text = last_user_text(self._history)
        await self.capabilities.astart()
        self._turns += 1

        # 1. narrow skills and decide the tool offer, once per turn
        t = time.perf_counter()
        skill_candidates = self.capabilities.skill_candidates()
        if skill_candidates:
            skill_turn: TurnSelection = await self.skill_binding.aselect(
                Query(text, "skill", self.k, self.pack.id, self.pack.agent_id), skill_candidates
            )
            report.skills = skill_turn.to_dict()
            self.capabilities.begin_skill_turn(skill_turn)
        report.timings_ms["select_skills"] = _elapsed(t)
        t = time.perf_counter()
        prefix = await asyncio.to_thread(self._prefix_tokens)
        offer: Offer = await asyncio.to_thread(
            self.session.offer,
            Query(text, "tool", self.k, self.pack.id, self.pack.agent_id),
            candidates=self._tool_candidates(),
            prefix_tokens=prefix,
        )
        report.offer = offer.to_dict()
        report.tools = offer.selection.to_dict() if offer.selection is not None else None
        report.timings_ms["select_tools"] = _elapsed(t)

        # 2. grounding and memories before the request is built: with the turn, or in the system prompt
        t = time.perf_counter()
        found = await self.grounding.agather(self._history)
        if self.grounding.placement == "history":
            system = self.grounding.system_prompt(found)
            injected = self.grounding.turn_context(
                found, self.window.present(), self.capabilities.skill_index(), report
            )
            self.window.append_user(message, injected)
        else:
            system = self.grounding.system_prompt(found, report)
            self.window.append_user(message)
        report.timings_ms["retrieve"] = _elapsed(t)
        if offer.prefetched:
            self._prefetch(offer)

        # 3. when the history passes its budget, reduce it to the low-water mark
        t = time.perf_counter()
        await self._reduce(report, message_text(message) or text)
        report.timings_ms["reduce"] = _elapsed(t)

        # 4-5. request, model, tools, until an answer
        answer, request, stopped = await self._loop_rounds(system, report)
        await self._learn(report, text)
        report.tool_tokens = self._tool_tokens()
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

    async def _reduce(self, report: TurnReport, goal: str) -> None:
        """Check the model's view against the history budget; reduce it to the low-water mark when over."""
        loaded = set(self.session.state.loaded)
        keep = {cid for cid, found in self._searches.items() if loaded.intersection(found)}
        try:
            outcome = await self.window.reduce(goal=goal, keep_calls=keep)
        except Exception as exc:  # the turn goes on with the unreduced history; reported as an event
            emit(RuntimeStepFailed(step="reduce", error=f"{type(exc).__name__}: {exc}"))
            report.reduction = {"error": str(exc)}
            return
        if outcome is None:
            return
        report.tokens_before, report.tokens_after = outcome.tokens_before, outcome.tokens_after
        report.reduction = outcome.to_dict()

    # -- what the model is offered -------------------------------------------------------------
    def _def(self, name: str) -> ToolDef | None:
        host = self._tools.get(name)
        if host is not None:
            return ToolDef(host.name, host.description, host.parameters)
        return self.capabilities.mcp_tool_def(name)

    def _defs(self, entries: Sequence[str]) -> list[ToolDef]:
        return [d for d in (self._def(n) for n in self.capabilities.expand(entries, self._tools)) if d is not None]

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
        outside = [d for d in self._defs([c.id for c in self._tool_candidates()]) if d.name not in seen]
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

    def _append(self, message: dict[str, Any]) -> None:
        """Append a message of the turn to the conversation and to the model's view."""
        self._history.append(message)
        self.window.append(message)

    def _prefetch(self, offer: Offer) -> None:
        """Load the offer's prefetched tools as a synthetic ``find_tools`` call and result."""
        defs = self._defs(offer.prefetched)
        if not defs:
            return
        call_id = f"prefetch_{self._turns}"
        fn = {"name": SEARCH_TOOL_NAME, "arguments": json.dumps({"query": PREFETCH_QUERY})}
        self._append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}
        )
        content = search_result_content(self.format, defs, mode=self._result_mode(), groups=self._namespaces())
        self._append({"role": "tool", "tool_call_id": call_id, "content": content})
        self._searches[call_id] = tuple(d.name for d in defs)
        emit(ToolsPrefetched(tools=tuple(d.name for d in defs)))

    # -- the model and tool loop ---------------------------------------------------------------
    async def _loop_rounds(self, system: str, report: TurnReport) -> tuple[str, dict[str, Any], str]:
        model_ms = tools_ms = 0.0
        request: dict[str, Any] = {}
        first_request: dict[str, Any] | None = None
        for _ in range(self.max_rounds):
            prompt, deferred, callable_names = self._offered()  # searches and skills add tools
            request = build_request(
                self.format,
                model=self.model.model,
                system=system,
                messages=self.window.messages,
                tools=prompt,
                deferred=deferred,
                loading=self.tool_loading,
                groups=self._namespaces() if self.format == "openai-responses" else None,
                prompt_cache_key=self.prompt_cache_key,
            )
            check = self.prefix.check(request, self._prefix_signals(prompt, system))
            if first_request is None:
                first_request = request
                in_prompt = [d.name for d in prompt]
                report.offered_tools = in_prompt + sorted(callable_names - set(in_prompt))
                report.prefix, report.prefix_cached = check.to_dict(), check.survived
            if not check.survived and check.reason != "first_request":
                report.prefix_breaks.append(check.to_dict())
            t = time.perf_counter()
            body = await self.model.acomplete(request)
            model_ms += _elapsed(t)
            report.rounds += 1
            turn: ModelTurn = parse_response(self.format, body)
            self._append(turn.message)
            if not turn.tool_calls:
                report.timings_ms["model"], report.timings_ms["tools"] = model_ms, tools_ms
                return turn.text, first_request, "answer"
            t = time.perf_counter()
            for call in turn.tool_calls:
                if call.name == SEARCH_TOOL_NAME and SEARCH_TOOL_NAME in callable_names:
                    content: str | list[dict[str, Any]] = await self._search(call, report)
                elif call.name == CALL_TOOL_NAME and CALL_TOOL_NAME in callable_names:
                    content = await self._bridge(call, callable_names, report)
                else:
                    content = await self._execute(call.name, call.arguments, callable_names, report)
                self._append({"role": "tool", "tool_call_id": call.id, "content": content})
            tools_ms += _elapsed(t)
        report.timings_ms["model"], report.timings_ms["tools"] = model_ms, tools_ms
        return "", first_request or request, "max_rounds"

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

    async def _search(self, call: ToolCall, report: TurnReport) -> str | list[dict[str, Any]]:
        """The escape hatch: rank the tools the model cannot call yet for its query."""
        t = time.perf_counter()
        try:
            args = json.loads(call.arguments) if isinstance(call.arguments, str) else dict(call.arguments)
            query = str(args.get("query", "")) if isinstance(args, dict) else ""
        except (json.JSONDecodeError, TypeError, ValueError):
            query = ""
        found = await asyncio.to_thread(self.session.search, query, candidates=self._tool_candidates())
        defs = self._defs([c.id for c in found])
        self._searches[call.id] = tuple(d.name for d in defs)
        report.searches.append({"query": query, "found": [d.name for d in defs]})
        report.tool_calls.append(ToolCallRecord(SEARCH_TOOL_NAME, True, _elapsed(t), "search"))
        return search_result_content(self.format, defs, mode=self._result_mode(), groups=self._namespaces())

    async def _bridge(self, call: ToolCall, offered: set[str], report: TurnReport) -> str:
        """``call_tool(name, arguments)``: run a found tool once its arguments pass its schema.

        A tool not found yet (not callable), a malformed call, or arguments the tool's JSON
        Schema refuses are answered with a tool error naming the problem, and a
        :class:`BridgeCallRefused` event; nothing is run.
        """
        callable_now = offered - {SEARCH_TOOL_NAME, CALL_TOOL_NAME}
        schemas = {n: d.parameters for n in callable_now if (d := self._def(n)) is not None}
        schemas.update(
            (d.name, d.parameters)
            for d in self.capabilities.system_tool_defs(listed_index=self.grounding.placement == "history")
            if d.name in callable_now
        )
        checked = check_bridge_call(call.arguments, schemas)
        if checked.error is not None:
            emit(BridgeCallRefused(tool=checked.name, reason=checked.reason, error=checked.error))
            report.tool_calls.append(
                ToolCallRecord(checked.name or CALL_TOOL_NAME, False, 0.0, "unknown", checked.error)
            )
            return json.dumps({"error": checked.error})
        return await self._execute(checked.name, checked.arguments, offered, report)

    async def _learn(self, report: TurnReport, text: str) -> None:
        """Record the model's calls in the session, and the turn and its searches in the feedback log."""
        called = [c.name for c in report.tool_calls if c.source not in ("search", "unknown")]
        self.session.record_calls(called)
        feedback = self.pack.feedback
        if feedback is None:
            return
        used = set(called)
        host_used = [n for n in dict.fromkeys(called) if not n.startswith(RESERVED_TOOL_PREFIXES)]
        if text.strip() and host_used:  # the turn: its query becomes an example of what it used
            try:
                await asyncio.to_thread(
                    feedback.record,
                    Query(text, "tool", self.k, self.pack.id, self.pack.agent_id),
                    selected=list(self.session.state.available),
                    used=host_used,
                    kind="tool",
                )
            except Exception as exc:  # the feedback log is best effort: an event, never a failed turn
                emit(RuntimeStepFailed(step="feedback", error=f"{type(exc).__name__}: {exc}"))
        for s in report.searches:
            if not s["query"].strip():
                continue
            try:
                await asyncio.to_thread(
                    feedback.record,
                    Query(s["query"], "tool", self.session.search_k, self.pack.id, self.pack.agent_id),
                    selected=s["found"],
                    used=[n for n in s["found"] if n in used],
                    kind="tool",
                )
            except Exception as exc:  # the feedback log is best effort: an event, never a failed turn
                emit(RuntimeStepFailed(step="feedback", error=f"{type(exc).__name__}: {exc}"))

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

    async def _execute(
        self, name: str, arguments: Mapping[str, Any] | str, offered: set[str], report: TurnReport
    ) -> str:
        t = time.perf_counter()
        source = "unknown"
        try:
            if name not in offered:
                hint = f"; search for it with {SEARCH_TOOL_NAME}" if SEARCH_TOOL_NAME in offered else ""
                raise LookupError(f"tool {name!r} is not available this turn{hint}")
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

    # -- closing -------------------------------------------------------------------------------
    async def _aclose(self) -> None:
        self.shortlist.close()
        await self.capabilities.aclose()
        await self.model.aclose()

    def _detach_loop(self) -> tuple[asyncio.AbstractEventLoop | None, threading.Thread | None, bool]:
        with self._loop_lock:
            was_closed, self._closed = self._closed, True
            loop, thread = self._loop, self._thread
            return loop, thread, was_closed

    @staticmethod
    def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread | None) -> None:
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        loop.close()

    def close(self) -> None:
        """Close selectors, MCP connections and the model client, and stop the conversation's loop.

        Raises:
            RuntimeError: when called from a running event loop (use ``await aclose()`` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("Conversation.close() called inside an event loop; use 'await conversation.aclose()'")
        loop, thread, was_closed = self._detach_loop()
        if was_closed:
            return
        if loop is None:
            asyncio.run(self._aclose())
            return
        try:
            asyncio.run_coroutine_threadsafe(self._aclose(), loop).result()
        finally:
            self._stop(loop, thread)

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        loop, thread, was_closed = self._detach_loop()
        if was_closed:
            return
        if loop is None or asyncio.get_running_loop() is loop:
            await self._aclose()
            if loop is not None:
                loop.call_soon(loop.stop)
            return
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._aclose(), loop))
        finally:
            await asyncio.to_thread(self._stop, loop, thread)


def _co_usage_of(pack: Pack) -> CoUsage:
    """A co-usage table for a new conversation: seeded from the pack's feedback log, if any."""
    if pack.feedback is None:
        return CoUsage()
    try:
        return CoUsage.from_feedback(pack.feedback)
    except Exception as exc:  # an unreadable log: learn from this conversation only (an event)
        emit(RuntimeStepFailed(step="feedback", error=f"{type(exc).__name__}: {exc}"))
        return CoUsage()
