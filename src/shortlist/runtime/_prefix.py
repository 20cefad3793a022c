"""The cached-prefix check: each request of a conversation compared with the previous one.

Providers cache a request by prefix, tools → system → messages. :class:`PrefixTracker` tells,
for every request, whether the previous request's parts are a prefix of it and, when not, which
part broke it (``tools``, ``system``, ``history``) and why (the first of the runtime's signals
for that part that changed), emitting :class:`PrefixBroken`. Re-exported by
:mod:`shortlist.runtime._context`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from shortlist._events import Event, emit

if TYPE_CHECKING:
    from shortlist.runtime._formats import Format

__all__ = ["PrefixBroken", "PrefixCheck", "PrefixPart", "PrefixTracker"]

PrefixPart = Literal["tools", "system", "history"]


@dataclass(frozen=True, kw_only=True)
class PrefixBroken(Event):
    """A request did not extend the previous one: the provider re-writes its cache from ``part`` on."""

    name: ClassVar[str] = "runtime.prefix_broken"
    area: ClassVar[str] = "runtime"
    level: int = logging.INFO
    request: int = 0
    part: str = ""
    reason: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PrefixCheck:
    """How one request compares with the previous request of the conversation.

    Attributes:
        request: the request's number in the conversation (1 = the first).
        survived: every part of the previous request is a prefix of this one (tools and system
            byte-identical, the previous messages extended), so the provider reads its cache.
        part: the first part that differs (``tools``, ``system`` or ``history``), None when the
            prefix survived or on the first request.
        reason: why that part changed (``first_request``, ``offer_changed``, ``tool_loaded``,
            ``skill_tools``, ``skill_index``, ``grounding``, ``system_prompt``, ``reduction``,
            ``history_replaced``, or ``<part>_changed`` when the runtime knows no cause);
            ``""`` when the prefix survived.
        cache_miss_reason: the break in the provider's words (Anthropic's cache diagnostics:
            ``tools_changed``, ``system_changed``, ``messages_changed``), ``""`` when the prefix
            survived or on the first request.
        detail: what changed, for a person: the tools added, removed or redefined (or their
            order), the character at which the system prompt first differs, the first history
            message that differs or how much shorter the history got; ``""`` without a break.
    """

    request: int
    survived: bool
    part: PrefixPart | None = None
    reason: str = ""
    cache_miss_reason: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _strip_cache_control(message: Any) -> Any:
    # Anthropic's breakpoint moves to the newest block each request; it is not part of the prefix
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, Mapping) else b for b in content]
    return {**message, "content": blocks}


def _digest(message: Any) -> bytes:
    return hashlib.blake2b(_canonical(_strip_cache_control(message)).encode(), digest_size=16).digest()


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, Mapping):
        return "?"
    function = tool.get("function")
    if isinstance(function, Mapping) and "name" in function:  # OpenAI chat completions
        return str(function["name"])
    return str(tool.get("name", "?"))


def _tools_detail(before: Sequence[tuple[str, str]], now: Sequence[tuple[str, str]]) -> str:
    """Which tools were added, removed or redefined between two tools arrays (else: the order)."""
    old, new = dict(before), dict(now)
    added = [n for n in new if n not in old]
    removed = [n for n in old if n not in new]
    redefined = [n for n in new if n in old and new[n] != old[n]]
    parts = [
        f"{label}: {', '.join(names)}"
        for label, names in (("added", added), ("removed", removed), ("redefined", redefined))
        if names
    ]
    return "; ".join(parts) or "tool order changed"


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


_MISS_REASONS: dict[str, str] = {"tools": "tools_changed", "system": "system_changed", "history": "messages_changed"}


class PrefixTracker:
    """Compares each request of a conversation with the previous one, part by part.

    The runtime passes, with each request, *signals* per part: named values it changes when it
    changes that part on purpose (the offer's block, the loaded tools, the grounding rendered
    into the system prompt, the number of reductions, ...). When a part differs, the reason is
    the first signal of that part whose value changed since the previous request.

    Args:
        fmt: the request format (where the system prompt is: Anthropic's ``system``, OpenAI's
            first message, the Responses API's first ``input`` item).
    """

    def __init__(self, fmt: Format) -> None:
        self.fmt: Format = fmt
        #: requests checked so far
        self.requests = 0
        #: requests whose cached prefix broke (the first request is not counted)
        self.breaks = 0
        self._tools: str | list[tuple[str, str]] | None = None
        self._tool_list: list[tuple[str, str]] = []
        self._tool_objs: list[Any] = []  # the previous request's tools, as sent
        self._system = ""
        self._messages: list[bytes] = []
        self._signals: dict[str, dict[str, Any]] = {}

    def _parts(self, request: Mapping[str, Any]) -> tuple[str, list[bytes]]:
        messages = list(request.get("messages") or request.get("input") or [])
        if self.fmt == "anthropic":
            system: Any = request.get("system")
        else:
            has_system = bool(messages) and isinstance(messages[0], Mapping) and messages[0].get("role") == "system"
            system = messages[0] if has_system else None
            messages = messages[1:] if has_system else messages
        return _canonical(system), [_digest(m) for m in messages]

    def _tool_texts(self, tools: list[Any]) -> list[tuple[str, str]]:
        """Each tool's name and canonical text; a tool equal (``==``) to the one at its place in the
        previous request keeps that one's text. A deferred catalog of 10,000 tools is sent with every
        request, and writing each again cost a request 200 ms; comparing them costs a few. (Equal as
        Python values: a definition whose only change is between ``1``, ``1.0`` and ``true`` keeps its text.)"""
        before, texts = self._tool_objs, self._tool_list
        out: list[tuple[str, str]] = []
        for i, tool in enumerate(tools):
            if i < len(before) and (tool is before[i] or tool == before[i]):
                out.append(texts[i])
            else:
                out.append((_tool_name(tool), _canonical(tool)))
        return out

    def _detail(self, part: PrefixPart, tool_list: list[tuple[str, str]], system: str, messages: list[bytes]) -> str:
        if part == "tools":
            return _tools_detail(self._tool_list, tool_list)
        if part == "system":
            return f"system prompt differs from character {_first_difference(self._system, system)}"
        same = next(
            (i for i, (a, b) in enumerate(zip(self._messages, messages, strict=False)) if a != b),
            min(len(self._messages), len(messages)),
        )
        if same == len(messages):
            return f"history shortened from {len(self._messages)} to {len(messages)} messages"
        return f"message {same + 1} of {len(self._messages)} changed ({same} kept as they were)"

    def check(self, request: Mapping[str, Any], signals: Mapping[str, Mapping[str, Any]]) -> PrefixCheck:
        """Compare ``request`` with the previous one and remember it; emit :class:`PrefixBroken` on a break.

        Args:
            request: the request body about to be sent.
            signals: per part (``tools``, ``system``, ``history``), named values the runtime
                changes when it changes that part.
        """
        system, messages = self._parts(request)
        raw_tools = request.get("tools")
        tools: str | list[tuple[str, str]]
        if isinstance(raw_tools, list):
            tool_list = tools = self._tool_texts(raw_tools)
        else:
            tool_list, tools = [], _canonical(raw_tools)
        self.requests += 1
        part: PrefixPart | None = None
        if self._tools is None:
            check = PrefixCheck(self.requests, False, None, "first_request")
        else:
            if tools != self._tools:
                part = "tools"
            elif system != self._system:
                part = "system"
            elif messages[: len(self._messages)] != self._messages or len(messages) < len(self._messages):
                part = "history"
            if part is None:
                check = PrefixCheck(self.requests, True)
            else:
                before, now = self._signals.get(part, {}), signals.get(part, {})
                reason = next((k for k, v in now.items() if before.get(k, v) != v), f"{part}_changed")
                detail = self._detail(part, tool_list, system, messages)
                check = PrefixCheck(self.requests, False, part, reason, _MISS_REASONS[part], detail)
                self.breaks += 1
                emit(PrefixBroken(request=self.requests, part=part, reason=reason, detail=detail))
        self._tools, self._tool_list, self._system, self._messages = tools, tool_list, system, messages
        self._tool_objs = list(raw_tools) if isinstance(raw_tools, list) else []
        self._signals = {p: dict(v) for p, v in signals.items()}
        return check
