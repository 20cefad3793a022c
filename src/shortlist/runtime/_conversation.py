"""The per-turn runtime: a ``Conversation`` composes every selection on each ``send``.

A turn: (1) narrow the skill index and decide the turn's tool *offer* with the
conversation's :class:`~shortlist.offer.ToolSession` (``per_turn``, ``stable`` or
``deferred``; deferred tools the ranking expects are *prefetched* into the history as a
synthetic ``find_tools`` call and result, with no model call); (2) retrieve grounding and
memories before the request is built, and put what the history does not carry yet into the
turn's user message (or, with ``grounding_placement="system"``, into the system prompt); (3)
when the history passes its budget, reduce it to the low-water mark; (4) build the request in
OpenAI or Anthropic format, with the provider's deferred loading and cache breakpoints
(``runtime/_formats.py``), and check it against the previous request (did the cached prefix
survive, and if not, which part broke it and why); (5) call the model and execute its tool
calls (``find_tools`` by the session's search, ranked by the bound selector; ``memory__*`` and
``skill__*`` by the runtime, host tools by their functions, MCP tools by their server),
looping until it answers or the round limit; (6) return the answer and a turn report. A
selector, retriever, reducer or feedback-log failure is an event, never a failed turn.

**Every part of the context under the cache.** Providers cache tools → system → messages by
prefix. By default the tools array and the system prompt are the same on every request, the
turn's grounding, memories and newly surfaced skills enter the history with the turn (and stay,
never injected twice), and the history only grows between reductions, which come in rare large
steps (``runtime/_context.py``).

**The default offer policy** is ``deferred`` for every format: the tools block never changes,
so the cached prefix survives every turn, and found tools enter the history after it, each
format its own way (``tool_loading``, ``runtime/_formats.py``): Anthropic ``defer_loading`` +
``tool_reference`` (or ``tool_addition``, beta), the Responses API's client ``tool_search``
over namespaces, and for chat completions, which can only call tools listed in the request's
tools array, a fixed ``find_tools`` + ``call_tool`` bridge whose arguments are validated
against the found tool's schema. In the conversation replay (``shortlist.eval._conversations``)
the bridge cost 0.44x / 0.68x what ``stable`` cost (0 / 20k tokens of history), so ``stable``
(the block grows once a search found a tool) is an option, no longer the chat default.

**One event loop per conversation** (``_loop``): MCP servers start once per conversation and two
threads may call ``send()`` on one conversation (their turns run one after the other). Beside this
module: the offer (``_offered``), the tool calls (``_tool_calls``), the pack (``_pack``), the events.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from shortlist._config import RuntimeConfig
from shortlist._events import Event, EventHook, emit, event_hooks
from shortlist._types import Query, TurnSelection
from shortlist.errors import ConfigError
from shortlist.offer import OfferPolicy, ToolSession
from shortlist.offer._bridge import CALL_TOOL_NAME
from shortlist.offer._policies import DEFAULT_PREFETCH_COLD, DEFAULT_PREFETCH_MAX, DEFAULT_PREFETCH_TOKENS
from shortlist.offer._search import DEFAULT_SEARCH_TOKENS, SEARCH_TOOL_NAME
from shortlist.offer._state import Offer
from shortlist.reduction._stage import DEFAULT_LOCAL_SELECTOR
from shortlist.runtime._context import (
    DEFAULT_LOW_WATER,
    GroundingPlacement,
    HistoryWindow,
    PrefixTracker,
)
from shortlist.runtime._formats import (
    FORMATS,
    Format,
    ModelTurn,
    ToolLoading,
    build_request,
    parse_response,
)
from shortlist.runtime._grounding import Grounding
from shortlist.runtime._loop import ConversationLoop
from shortlist.runtime._model import CallableModel, ChatModel
from shortlist.runtime._offered import resolve_loading
from shortlist.runtime._pack import RESERVED_TOOL_PREFIXES, Pack, check_reserved
from shortlist.runtime._report import TurnReport, TurnResult
from shortlist.runtime._tool_calls import ToolCalls, elapsed
from shortlist.runtime._turn_events import BridgeCallRefused, RuntimeStepFailed, ToolsPrefetched
from shortlist.selection._base import Selector
from shortlist.selection._cousage import CoUsage
from shortlist.selection._facade import DEFAULT
from shortlist.selection._query import last_user_text, message_text

__all__ = [
    "RESERVED_TOOL_PREFIXES",
    "BridgeCallRefused",
    "Conversation",
    "Pack",
    "RuntimeStepFailed",
    "ToolsPrefetched",
]

_T = TypeVar("_T")


class Conversation(ToolCalls, ConversationLoop):
    """One conversation of a pack with a model.

    Args:
        pack: the agent definition.
        model: a :class:`ChatModel` or a callable ``request -> response``.
        config: a :class:`RuntimeConfig` or the path of a ``runtime.yaml``.
        tool_selector / skills_selector: a Selector, a name, None, or DEFAULT (the config's
            binding, else the built-in default); bound through one
            :class:`~shortlist.selection._facade.Shortlist`, shared by the pack's conversations
            that ask for the same selectors (:mod:`shortlist.runtime._bindings`): the second
            conversation's first turn finds the catalog's indexes built. ``pack.close()`` closes
            them; a conversation's ``close()`` leaves them to the others.
        selectors: selectors registered in code, by name.
        format: ``"openai"`` (chat completions, any OpenAI-compatible endpoint),
            ``"anthropic"`` (messages) or ``"openai-responses"`` (the Responses API: send it with
            :class:`~shortlist.runtime._model.OpenAIResponsesModel`).
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
            into the history before the model call (None: 2 under ``deferred``, else 0).
        prefetch_max: ``deferred`` only: the most tools prefetched while the top of the ranking is
            flat (default 4; ``prefetch`` or less: never more than ``prefetch``). A conversation
            report's ``loads`` says what the widened slots were worth for a catalog.
        prefetch_cold: ``deferred`` only: while the conversation has called no tool yet, the
            prefetch loads this many more and widens this much further (default 2: the top 4, up
            to 6, then the top 2, up to 4).
        prefetch_tokens: ``deferred`` only: past the first ``prefetch`` tools, a tool is prefetched
            only when its definition is at most this many tokens (default 250; None: any size);
            a longer one is left to a search.
        search_tokens: a ``find_tools`` call's results after the first carry only definitions of at
            most this many tokens (default 300; None: any size); the next search pages on to a longer one.
        co_usage: tools called together; prefetches and searches bring a tool's usual
            companions along. Share one across a pack's conversations; None: this conversation's
            own table, layered on the co-usage of the log the conversation ranks with
            (``pack.feedback``, unless the config names ``selection.examples``; its logged
            messages are also the tools' usage examples), and none without a log.
        max_rounds: model calls per turn before giving up.
        max_tokens / max_chars: the history budget (None: no reduction). Nothing is reduced
            while the history fits; once it passes the budget it is reduced to ``low_water`` of it.
        reduction: ``"relevance"`` (default) or ``"newest"``: how the local reducer picks the
            steps it keeps once clearing old tool results and old context was not enough.
        low_water: the share of the budget a reduction brings the history down to (default
            :data:`~shortlist.runtime._context.DEFAULT_LOW_WATER`, 0.5): the room left is what the
            next turns append to a stable cached prefix.
        keep_facts: a reduction keeps what the messages it clears or drops stated (numbers,
            ids, names) on a fact sheet at the start of the history (default True; an offline
            extractive summary, :mod:`shortlist.reduction._facts`).
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
        window: the model's view (:class:`~shortlist.runtime._context.HistoryWindow`): the same
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
        prefetch_max: int = DEFAULT_PREFETCH_MAX,
        prefetch_cold: int = DEFAULT_PREFETCH_COLD,
        prefetch_tokens: int | None = DEFAULT_PREFETCH_TOKENS,
        search_tokens: int | None = DEFAULT_SEARCH_TOKENS,
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
        policy, loading = resolve_loading(format, offer_policy, tool_loading)
        if prompt_cache_key is not None and (not isinstance(prompt_cache_key, str) or not prompt_cache_key):
            raise ConfigError("prompt_cache_key must be a non-empty string or None")
        check_reserved(pack.tools)
        self._tools = {t.name: t for t in pack.tools}
        if len(self._tools) != len(pack.tools):
            raise ConfigError(f"pack {pack.id!r} defines a tool name twice")
        # one binding layer, shared by the pack's conversations: the facade resolves the selector
        # arguments and the config's bindings once, and its indexes serve every conversation
        bound = pack.bindings.get(
            tool_selector=tool_selector,
            skills_selector=skills_selector,
            selectors=selectors,
            config=config,
            feedback=pack.feedback,
        )
        self.shortlist = bound.shortlist
        self.config = self.shortlist.config
        self.registry = self.shortlist.registry
        self.policy = self.shortlist.policy
        self.tool_binding = bound.tools  # live mcp__ tools ranked like any tool
        self.skill_binding = bound.skills
        self.session = ToolSession(
            self.tool_binding,
            policy=policy,
            k=k,
            search_k=search_k,
            hot=hot,
            prefetch=prefetch,
            prefetch_max=prefetch_max,
            prefetch_cold=prefetch_cold,
            prefetch_tokens=prefetch_tokens,
            search_tokens=search_tokens,
            co_usage=co_usage if co_usage is not None else "log",
        )
        self.pack = pack
        self.model: ChatModel = model if isinstance(model, ChatModel) else CallableModel(model)
        self.format = format
        self.tool_loading = loading
        self.prompt_cache_key = prompt_cache_key or (
            f"shortlist-{uuid.uuid4().hex}" if format == "openai-responses" else None
        )
        self._groups = None
        self._catalog_defs = None
        self.k = k
        self.max_rounds = max_rounds
        self._history = []
        self._hooks: tuple[EventHook, ...] = (on_event,) if on_event else ()
        self._lock = asyncio.Lock()
        self._candidates = None
        self.grounding = Grounding(pack, budget_tokens=grounding_tokens, placement=grounding_placement)
        self.window = HistoryWindow(
            max_tokens=max_tokens, max_chars=max_chars, low_water=low_water, reduction=reduction, keep_facts=keep_facts
        )
        self.prefix = PrefixTracker(format)
        from shortlist.runtime._capabilities import Capabilities

        self.capabilities = Capabilities(pack)
        self._counted = (0, 0)  # (window generation, messages of it already in _window_tokens)
        self._window_tokens = 0
        #: find_tools call ids (real or prefetched) -> the tools their result made callable
        self._searches = {}
        self._turns = 0
        self._loop = None
        self._thread = None
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
        report.timings_ms["select_skills"] = elapsed(t)
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
        report.timings_ms["select_tools"] = elapsed(t)

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
        report.timings_ms["retrieve"] = elapsed(t)
        if offer.prefetched:
            self._prefetch(offer)

        # 3. when the history passes its budget, reduce it to the low-water mark
        t = time.perf_counter()
        await self._reduce(report, message_text(message) or text)
        report.timings_ms["reduce"] = elapsed(t)

        # 4-5. request, model, tools, until an answer
        answer, request, stopped = await self._loop_rounds(system, report)
        await self._learn(report, text)
        report.tool_tokens = self._tool_tokens()
        report.timings_ms["total"] = elapsed(t_total)
        overhead = (
            report.timings_ms["total"] - report.timings_ms.get("model", 0.0) - report.timings_ms.get("tools", 0.0)
        )
        report.timings_ms["overhead"] = round(overhead, 3)
        return TurnResult(answer=answer, report=report, request=request, stopped=stopped)

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
            model_ms += elapsed(t)
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
            tools_ms += elapsed(t)
        report.timings_ms["model"], report.timings_ms["tools"] = model_ms, tools_ms
        return "", first_request or request, "max_rounds"

    # -- closing -------------------------------------------------------------------------------
    async def _aclose(self) -> None:  # the selectors are the pack's (Pack.close), shared with its other conversations
        await self.capabilities.aclose()
        await self.model.aclose()
