"""The framework-free part of every integration: which of a framework's tools one model call is offered.

A framework hands its adapter the agent's tools and the conversation on each model call; the
adapter turns the tools into candidates once (:meth:`ToolNarrower.catalog`), asks
:meth:`ToolNarrower.choose` which names to offer, and gives the framework back only those.

* The query is the latest user message. The selection is computed once per user message (the
  tool rounds of one turn reuse it, so a turn's tools do not change between its model calls and
  a failing selector emits one ``selection.fallback`` per turn, not one per round).
* Every narrowing guarantee is the core's (:func:`~shortlist.selection.narrow`): a selector that
  raises, times out or answers nothing leaves the call with **all** the tools, as an event.
* The escape hatch is a ``find_tools`` tool (:data:`SEARCH_TOOL_NAME`) the adapter adds to the
  agent: it ranks the whole catalog for the model's own description
  (:func:`~shortlist.selection.session.search_tools`; a failing selector falls back to a lexical
  ranking) and answers a JSON list of tools. The adapters read the names back from the
  conversation's tool results (:func:`found_in`), so the found tools are offered on every later
  call of the conversation with no state kept between calls (one adapter serves concurrent runs).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shortlist.errors import ConfigError
from shortlist.events import EventHook
from shortlist.selection.base import Selector
from shortlist.selection.facade import DEFAULT, Shortlist
from shortlist.selection.narrowing import TurnSelection
from shortlist.selection.session import (
    SEARCH_TOOL_DESCRIPTION,
    SEARCH_TOOL_NAME,
    SEARCH_TOOL_PARAMETERS,
    OfferState,
    definition_tokens,
    search_tools,
)
from shortlist.types import Candidate, Query

__all__ = [
    "SEARCH_TOOL_DESCRIPTION",
    "SEARCH_TOOL_NAME",
    "SEARCH_TOOL_PARAMETERS",
    "ToolChoice",
    "ToolNarrower",
    "found_in",
    "tool_candidate",
]


def tool_candidate(name: str, description: str | None, parameters: Mapping[str, Any] | None = None) -> Candidate:
    """The candidate a selector sees for one framework tool (``id == name``)."""
    return Candidate(name, name, description or "", parameters=dict(parameters) if parameters else None)


def found_in(content: Any) -> tuple[str, ...]:
    """The tool names a ``find_tools`` result (as :meth:`ToolNarrower.search_result` wrote it) names.

    Anything else (an error message, a user's own JSON) names nothing.
    """
    if isinstance(content, (bytes, bytearray)):
        content = content.decode("utf-8", "replace")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            return ()
    found = content.get("found") if isinstance(content, Mapping) else None
    if not isinstance(found, list):
        return ()
    return tuple(item["name"] for item in found if isinstance(item, Mapping) and isinstance(item.get("name"), str))


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tools one model call is offered.

    Attributes:
        names: the tool names to give the framework, in the framework's own order (narrowed
            ones, pins and the tools found by earlier searches).
        selection: the turn's :class:`~shortlist.selection.TurnSelection` (``fallback`` says
            why every tool is offered).
        found: the names earlier ``find_tools`` results made available.
        search_tool: whether the ``find_tools`` tool is offered too (some tool is left out).
    """

    names: tuple[str, ...]
    selection: TurnSelection
    found: tuple[str, ...] = ()
    search_tool: bool = False

    @property
    def fallback(self) -> str | None:
        """None when narrowed, else why every tool is offered (see ``FALLBACK_REASONS``)."""
        return self.selection.fallback


class ToolNarrower:
    """Narrow a framework's tools per model call (the engine behind every integration).

    Args:
        shortlist: the binding to narrow with (selector, config, pins); default: a
            :class:`~shortlist.Shortlist` with ``selector``. Tools of MCP servers are narrowed
            like any tool (:meth:`Shortlist.tool_policy`).
        selector: the selector when no ``shortlist`` is given (a name, an instance, ``None``
            for no narrowing, or ``DEFAULT``: the config's binding, else the built-in default).
        k: the most tools ranked in per turn besides pins (and found tools).
        search_tool: offer ``find_tools`` when some tool is left out of the call.
        search_k: the most tools one ``find_tools`` call returns.
        on_event: a hook called with every event of this narrower's decisions.
        cache_size: turns remembered (a turn is a catalog and a user message); a tool round of
            a remembered turn reuses its selection.
    """

    def __init__(
        self,
        shortlist: Shortlist | None = None,
        *,
        selector: Selector | str | None = DEFAULT,
        k: int = 5,
        search_tool: bool = True,
        search_k: int = 5,
        on_event: EventHook | None = None,
        cache_size: int = 256,
    ) -> None:
        if k < 0:
            raise ConfigError("k must be non-negative (0: the selector's default)")
        if search_k < 1:
            raise ConfigError("search_k must be at least 1")
        if cache_size < 0:
            raise ConfigError("cache_size must be non-negative")
        self._owned = shortlist is None
        base = shortlist if shortlist is not None else Shortlist(selector=selector, on_event=on_event)
        self.shortlist = base.derive(policy=base.tool_policy())
        self.k = k
        self.search_tool = search_tool
        self.search_k = search_k
        self._extra_hooks: tuple[EventHook, ...] = (on_event,) if on_event and shortlist is not None else ()
        self._cache_size = cache_size
        self._catalogs: OrderedDict[Hashable, tuple[Candidate, ...]] = OrderedDict()
        self._turns: OrderedDict[tuple[int, str], TurnSelection] = OrderedDict()
        self._lock = threading.Lock()

    # -- the catalog ---------------------------------------------------------------------------

    def catalog(self, key: Hashable, build: Callable[[], Iterable[Candidate]]) -> tuple[Candidate, ...]:
        """The candidates of one tool list, built once per ``key`` (say, the tools' names and ids).

        Raises:
            ConfigError: a tool is named like the search tool.
        """
        with self._lock:
            hit = self._catalogs.get(key)
            if hit is not None:
                self._catalogs.move_to_end(key)
                return hit
        built = tuple(c for c in build() if c.id != SEARCH_TOOL_NAME or not self.search_tool)
        with self._lock:
            self._catalogs[key] = built
            while len(self._catalogs) > 16:
                self._catalogs.popitem(last=False)
        return built

    # -- a model call --------------------------------------------------------------------------

    def _cached(self, candidates: tuple[Candidate, ...], text: str) -> tuple[tuple[int, str], TurnSelection | None]:
        key = (id(candidates), text)
        with self._lock:
            hit = self._turns.get(key)
            if hit is not None:
                self._turns.move_to_end(key)
        return key, hit

    def _remember(self, key: tuple[int, str], turn: TurnSelection) -> None:
        if self._cache_size == 0:
            return
        with self._lock:
            self._turns[key] = turn
            while len(self._turns) > self._cache_size:
                self._turns.popitem(last=False)

    def _choice(self, candidates: tuple[Candidate, ...], turn: TurnSelection, found: Iterable[str]) -> ToolChoice:
        offered = set(turn.ids)
        found_known = tuple(dict.fromkeys(n for n in found if n not in offered and n in _names(candidates)))
        offered.update(found_known)
        names = tuple(c.id for c in candidates if c.id in offered)
        return ToolChoice(names, turn, found_known, self.search_tool and len(names) < len(candidates))

    def choose(self, candidates: tuple[Candidate, ...], query: str, found: Iterable[str] = ()) -> ToolChoice:
        """The tools one model call is offered for the turn whose latest user message is ``query``.

        Args:
            candidates: the catalog (from :meth:`catalog`; the same tuple on every call).
            query: the latest user message ("" falls back to every tool).
            found: tool names earlier ``find_tools`` results named (:func:`found_in`).
        """
        key, turn = self._cached(candidates, query)
        if turn is None:
            turn = self.shortlist.select(Query(query, "tool", self.k), candidates, k=self.k, hooks=self._extra_hooks)
            self._remember(key, turn)
        return self._choice(candidates, turn, found)

    async def achoose(self, candidates: tuple[Candidate, ...], query: str, found: Iterable[str] = ()) -> ToolChoice:
        """Async twin of :meth:`choose` (the selector runs through ``aselect``)."""
        key, turn = self._cached(candidates, query)
        if turn is None:
            turn = await self.shortlist.aselect(
                Query(query, "tool", self.k), candidates, k=self.k, hooks=self._extra_hooks
            )
            self._remember(key, turn)
        return self._choice(candidates, turn, found)

    # -- the escape hatch ----------------------------------------------------------------------

    def search(self, candidates: tuple[Candidate, ...], query: str) -> tuple[Candidate, ...]:
        """The tools ``find_tools`` returns for the model's ``query`` (a ``selection.tool_searched`` event)."""
        found, _ = search_tools(
            self.shortlist,
            OfferState(),
            query,
            policy="deferred",  # nothing to re-write: the found tools join the next call's tools
            candidates=candidates,
            k=self.search_k,
            hooks=self._extra_hooks,
        )
        return found

    @staticmethod
    def search_result(found: Sequence[Candidate]) -> str:
        """The JSON text a ``find_tools`` call answers (names and descriptions; :func:`found_in` reads it)."""
        if not found:
            return json.dumps({"found": [], "note": "no tool matches; describe the action differently"})
        return json.dumps(
            {
                "found": [{"name": c.name, "description": c.description} for c in found],
                "note": "these tools are callable from your next step on",
            },
            ensure_ascii=False,
        )

    def find(self, candidates: tuple[Candidate, ...], query: str) -> str:
        """:meth:`search` and :meth:`search_result` in one: what a ``find_tools`` tool returns."""
        return self.search_result(self.search(candidates, query))

    # -- measuring -----------------------------------------------------------------------------

    @staticmethod
    def definition_tokens(candidates: Iterable[Candidate]) -> int:
        """An estimate of the tokens ``candidates``' definitions take in a request."""
        return sum(definition_tokens(c) for c in candidates)

    def close(self) -> None:
        """Close the selectors this narrower built (nothing when it was given a ``shortlist``)."""
        if self._owned:
            self.shortlist.registry.close()


_NAMES: dict[int, tuple[tuple[Candidate, ...], frozenset[str]]] = {}


def _names(candidates: tuple[Candidate, ...]) -> frozenset[str]:
    hit = _NAMES.get(id(candidates))
    if hit is not None and hit[0] is candidates:
        return hit[1]
    names = frozenset(c.id for c in candidates)
    if len(_NAMES) > 64:
        _NAMES.clear()
    _NAMES[id(candidates)] = (candidates, names)
    return names
