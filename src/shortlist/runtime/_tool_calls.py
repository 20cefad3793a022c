"""The model's tool calls in a turn: ``find_tools`` by the session's search, the ``call_tool`` bridge,
host, MCP and runtime tools, the prefetched searches, and what the turn teaches (the session's
co-usage, the pack's feedback log). A mixin of :class:`shortlist.runtime._conversation.Conversation`;
a failing step is an event, never a failed turn.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from shortlist._events import emit
from shortlist._types import Query
from shortlist.offer._bridge import CALL_TOOL_NAME, check_bridge_call
from shortlist.offer._policies import PREFETCH_QUERY
from shortlist.offer._search import SEARCH_TOOL_NAME
from shortlist.offer._state import Offer
from shortlist.runtime._formats import (
    ToolCall,
    search_result_content,
)
from shortlist.runtime._offered import OfferedTools
from shortlist.runtime._pack import RESERVED_TOOL_PREFIXES
from shortlist.runtime._report import ToolCallRecord, TurnReport
from shortlist.runtime._turn_events import BridgeCallRefused, RuntimeStepFailed, ToolsPrefetched

__all__ = ["ToolCalls", "elapsed"]


def elapsed(start: float) -> float:
    """Milliseconds since ``start`` (a ``time.perf_counter()``), to the microsecond."""
    return round((time.perf_counter() - start) * 1000, 3)


class ToolCalls(OfferedTools):
    """The tool calls' side of a conversation (its state is the conversation's)."""

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
        companions = {d.name for d in self._defs(offer.companions)}
        emit(
            ToolsPrefetched(
                tools=tuple(d.name for d in defs), companions=tuple(d.name for d in defs if d.name in companions)
            )
        )

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
        report.tool_calls.append(ToolCallRecord(SEARCH_TOOL_NAME, True, elapsed(t), "search"))
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
            report.tool_calls.append(ToolCallRecord(name, False, elapsed(t), source, f"{type(exc).__name__}: {exc}"))
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        report.tool_calls.append(ToolCallRecord(name, True, elapsed(t), source))
        return out

    async def _learn(self, report: TurnReport, text: str) -> None:
        """Record the model's calls in the session, and the turn and its searches in the feedback log."""
        called = [c.name for c in report.tool_calls if c.source not in ("search", "unknown")]
        self.session.record_calls(called)
        feedback = self.pack.feedback
        if feedback is None:
            return
        used = set(called)
        host_used = [n for n in dict.fromkeys(called) if not n.startswith(RESERVED_TOOL_PREFIXES)]
        wrote = False
        if text.strip() and host_used:  # the turn: its query becomes an example of what it used
            try:
                wrote = bool(
                    await asyncio.to_thread(
                        feedback.record,
                        Query(text, "tool", self.k, self.pack.id, self.pack.agent_id),
                        selected=list(self.session.state.available),
                        used=host_used,
                        kind="tool",
                    )
                )
            except Exception as exc:  # the feedback log is best effort: an event, never a failed turn
                emit(RuntimeStepFailed(step="feedback", error=f"{type(exc).__name__}: {exc}"))
        for s in report.searches:
            if not s["query"].strip():
                continue
            found_used = [n for n in s["found"] if n in used]
            try:
                turn = await asyncio.to_thread(
                    feedback.record,
                    Query(s["query"], "tool", self.session.search_k, self.pack.id, self.pack.agent_id),
                    selected=s["found"],
                    used=found_used,
                    kind="tool",
                )
                wrote = wrote or bool(turn and found_used)  # a search the model used teaches its query
            except Exception as exc:  # the feedback log is best effort: an event, never a failed turn
                emit(RuntimeStepFailed(step="feedback", error=f"{type(exc).__name__}: {exc}"))
        if wrote:  # new examples: the next turn's ranking should find them indexed, not build the index itself
            await asyncio.to_thread(self.session.shortlist.refresh_examples, self._tool_candidates(), kind="tool")
