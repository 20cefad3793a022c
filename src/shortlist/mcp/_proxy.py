"""A narrowing MCP proxy: one MCP server that fronts several, for clients that cannot narrow.

The proxy connects to the upstream servers (:class:`~shortlist.mcp._client.MCPClient`) and
offers its own client:

* a **narrowed tool list**: the ``find_tools`` tool, then the session's tools block, an
  :class:`~shortlist.offer.OfferState` as the runtime keeps one: the tools matching the
  ``always_include`` patterns (a :class:`~shortlist.selection._narrowing.PinPolicy`), the tools
  earlier sessions' searches found for the same upstream servers (most recent first), then the
  tools this session's searches found (at most ``max_offered`` besides the pins); it never lists
  every upstream tool. The found tools persist per catalog in a small JSON file
  (``state_path``, an offer state), so a client that validates a name against ``tools/list``
  before calling it (MCP Inspector 2.x) can call, in a new session, a tool an earlier search
  found (:meth:`MCPProxy.listed` takes a ``session`` key for transports that serve several);
* **start-up**: ``initialize`` is answered at once; the upstream servers connect in the
  background, and ``tools/list`` and ``tools/call`` wait for them (an upstream that fails to
  start is an :class:`UpstreamFailed` event, and its tools are missing from the list);
* ``notifications/tools/list_changed`` is sent after a search only when the list changed;
* ``find_tools{query, k?}``: the one tool search (:func:`~shortlist.offer.search_tools`, as
  the runtime's): the bound selector (MCP unpinned, see :func:`~shortlist.mcp._tools.mcp_policy`)
  ranks the upstream tools the session's list does not hold yet, so a repeated search pages on
  through the rest; a failing selector falls back to a lexical ranking. The found tools, with
  their input schemas, join the session's list, and the proxy sends
  ``notifications/tools/list_changed`` so the client lists again;
* **forwarding**: a call to ``mcp__<server>__<tool>`` goes to that upstream (with the
  client's reconnect policy). A tool that exists upstream is forwarded even if it was not
  offered yet; an unknown one is a tool error;
* **learning from misses** (with a ``feedback`` log, ``--feedback-db``): every search is
  recorded (its query and the tools it found), and when the model then calls a tool that a
  search found, not one it was offered from the start (``always_include``), the call is
  credited to that search: the found tools the model calls after one search are one turn of the
  log (the search's query, those tools in call order, each once), written when the turn closes:
  at the session's next search (before it ranks) or when the proxy stops (:meth:`MCPProxy.flush`;
  ``shortlist mcp-proxy`` on a closed stdin, SIGTERM or SIGINT).
  Searches rank the upstream tools with the log's examples through the proxy's binding (its
  ``examples``, as every surface reads a log: :meth:`~shortlist.Shortlist.enrich`), so the next
  searches, in this session or the next, learn from it; a found tool brings the tools the log's
  turns used with it (:meth:`~shortlist.Shortlist.co_usage`: the proxy's own turns, and those the
  runtime or ``POST /v1/feedback`` recorded). Each search is a
  :class:`~shortlist.offer.ToolSearched` event, each credited call a :class:`FoundToolCalled` when
  its turn is written, a failed write a :class:`FeedbackFailed` (the tool call still goes
  through), a log that cannot be read a ``selection.feedback_unavailable`` event (the search goes
  on without its examples and companions).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from shortlist._events import Event, emit
from shortlist._types import Candidate
from shortlist.errors import UsageError
from shortlist.mcp._client import MCPClient
from shortlist.mcp._proxy_server import build_server
from shortlist.mcp._tools import mcp_policy
from shortlist.offer import OfferState, search_tools
from shortlist.offer._search import SEARCH_TOOL_DESCRIPTION, SEARCH_TOOL_NAME, SEARCH_TOOL_PARAMETERS, ToolSearch
from shortlist.selection._base import Selector
from shortlist.selection._facade import Shortlist
from shortlist.selection._narrowing import NarrowingPolicy, PinPolicy

if TYPE_CHECKING:
    from shortlist.feedback._store import FeedbackStore

__all__ = [
    "MAX_STATE_BYTES",
    "FeedbackFailed",
    "FoundToolCalled",
    "MCPProxy",
    "StateIgnored",
    "UpstreamFailed",
    "default_state_path",
]

logger = logging.getLogger("shortlist.mcp")

#: The search tool's input schema: the one search tool's, plus how many tools to return.
_SEARCH_SCHEMA: dict[str, Any] = {
    **SEARCH_TOOL_PARAMETERS,
    "properties": {
        **SEARCH_TOOL_PARAMETERS["properties"],
        "k": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many tools to return."},
    },
    "additionalProperties": False,
}
#: The state file's layout: ``{"version": 2, "offer": OfferState}`` (version 1 held ``{"found": [ids]}``).
_STATE_VERSION = 2
#: The largest state file read: one the proxy writes holds at most ``max_offered`` ids (a few KiB).
MAX_STATE_BYTES = 256 * 1024


@dataclass(frozen=True, kw_only=True)
class FoundToolCalled(Event):
    """The model called a tool that a search found (it was not offered from the start).

    With a feedback log it is emitted when the search's turn is written (the session's next search,
    or the proxy's stop: :meth:`MCPProxy.flush`), ``recorded`` saying whether the write succeeded;
    without one, at the call.
    """

    name: ClassVar[str] = "mcp.found_tool_called"
    area: ClassVar[str] = "mcp"
    level: int = logging.INFO
    tool: str = ""
    query: str = ""
    recorded: bool = False  # False without a feedback log, or when the write failed


@dataclass(frozen=True, kw_only=True)
class FeedbackFailed(Event):
    """Recording a search or a use into the feedback log failed; the proxy carried on (reading it is the
    binding's: ``selection.feedback_unavailable``)."""

    name: ClassVar[str] = "mcp.feedback_failed"
    area: ClassVar[str] = "mcp"
    level: int = logging.WARNING
    what: str = ""  # "search" or "use"
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class UpstreamFailed(Event):
    """An upstream MCP server did not connect at start-up; the proxy serves the others without its tools."""

    name: ClassVar[str] = "mcp.upstream_failed"
    area: ClassVar[str] = "mcp"
    level: int = logging.WARNING
    server: str = ""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class StateIgnored(Event):
    """The proxy's state file was not read: the list starts without the tools earlier sessions found.

    ``reason``: ``not_regular_file`` (a FIFO, device, socket or folder: never opened for reading,
    so it cannot hang the start-up, and never replaced), ``too_large`` (over ``limit`` bytes),
    ``unreadable`` or ``invalid`` (not the proxy's JSON); ``error`` says more.
    """

    name: ClassVar[str] = "mcp.state_ignored"
    area: ClassVar[str] = "mcp"
    level: int = logging.WARNING
    path: str = ""
    reason: str = ""
    error: str = ""
    limit: int = 0


def default_state_path(servers: Sequence[tuple[str, str]]) -> Path | None:
    """Where the found tools of this set of upstream servers persist: the user cache folder, one file per catalog.

    ``servers`` are ``(name, command or URL)`` pairs; the file is named by their digest, so the
    same servers share their found tools and other servers do not. None when the cache is off
    (``SHORTLIST_CACHE_DIR=off``).
    """
    from shortlist.embeddings._cache import cache_dir

    base = cache_dir()
    if base is None:
        return None
    digest = hashlib.sha256(json.dumps(sorted(servers)).encode("utf-8")).hexdigest()[:24]
    return base / "mcp-proxy" / f"{digest}.json"


@dataclass(frozen=True, slots=True)
class _Search:
    """One search of a session: its query, its id in the feedback log and what it found."""

    query: str
    key: str
    found: tuple[str, ...]


@dataclass(slots=True)
class _Uses:
    """The found tools the model called after one search: those written to the log, those waiting for
    the turn to close (call order), and how many turns were written for it."""

    search: _Search
    written: set[str] = field(default_factory=set)
    pending: list[str] = field(default_factory=list)
    turns: int = 0

    def close(self) -> _Turn | None:
        """The turn to write (the search, its external id, the tools), or None when no call waits; the
        tools then count as written."""
        if not self.pending:
            return None
        tools = tuple(self.pending)
        self.written.update(tools)
        self.pending = []
        self.turns += 1
        key = f"mcp-use:{self.search.key}" + (f":{self.turns}" if self.turns > 1 else "")
        return self.search, key, tools


#: A closed turn of found tools: the search, the turn's external id in the log, the tools in call order.
_Turn = tuple[_Search, str, tuple[str, ...]]


def _closed(credits: Sequence[_Uses]) -> list[_Turn]:
    """The turns the credits' waiting calls make (closed: their tools count as written)."""
    return [turn for turn in (c.close() for c in credits) if turn is not None]


class MCPProxy:
    """The proxy's logic, independent of the transport it is served on.

    Args:
        client: the started upstream client.
        selector: the selector that ranks tools for ``find_tools`` (None, or a failing one: a
            lexical ranking).
        k: tools returned by a search (when the caller gives no ``k``).
        policy: the base narrowing policy (``mcp`` is unpinned from it).
        always_include: ``fnmatch`` patterns of prefixed tool names always listed.
        max_offered: the most searched tools kept in a session's list.
        feedback: a feedback log that records searches and the found tools the model called
            (and whose examples enrich the tools searches rank); the caller closes it.
        state_path: a JSON file where the tools searches found persist across sessions and
            processes (listed after the session's own); None keeps them in this process only.
    """

    def __init__(
        self,
        client: MCPClient,
        *,
        selector: Selector | None,
        k: int = 5,
        policy: NarrowingPolicy | None = None,
        always_include: Sequence[str] = (),
        max_offered: int = 50,
        feedback: FeedbackStore | None = None,
        state_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if k < 1:
            raise UsageError("k must be >= 1")
        self.client = client
        self.selector = selector
        self.k = k
        self.policy = mcp_policy(policy)
        self.pins = PinPolicy(namespaces=(), always_include=tuple(always_include), pin_wildcards=False)
        self.always_include = self.pins.always_include
        self.max_offered = max_offered
        self.feedback = feedback
        # the one binding the search ranks with (the upstream tools are passed on each search), and reads
        # the log's examples and co-usage through, as every surface does
        self.binding = Shortlist(selector=selector, policy=self.policy, examples=feedback)
        self._states: dict[int, OfferState] = {}  # session key -> its tools block
        self._found: dict[int, dict[str, _Search]] = {}  # session key -> tool id -> the latest search that found it
        self._uses: dict[int, dict[str, _Uses]] = {}  # session key -> search key -> the found tools called after it
        self.state_path = Path(state_path) if state_path is not None else None
        self._state_refused = False  # the path is not a regular file: neither read nor replaced
        self._known: dict[str, None] = dict.fromkeys(self._load_state())  # found by any session, most recent last
        self._connected: asyncio.Task[None] | None = None
        self._failed: set[str] = set()

    def _ignored(self, reason: str, error: str = "") -> list[str]:
        emit(StateIgnored(path=str(self.state_path), reason=reason, error=error[:2048], limit=MAX_STATE_BYTES))
        return []

    def _load_state(self) -> list[str]:
        """The tools earlier sessions found, most recent last (the state file's offer block).

        Only a regular file of at most :data:`MAX_STATE_BYTES` is read (opened non-blocking, so a
        FIFO never hangs the start-up); anything else is a :class:`StateIgnored` event.
        """
        from shortlist.skills._files import BeneathError, read_regular_file

        if self.state_path is None or self._state_refused:
            return []
        try:
            raw = read_regular_file(self.state_path, MAX_STATE_BYTES)
        except BeneathError as exc:
            if exc.reason == "missing":
                return []
            if exc.reason == "not_regular_file":  # not ours to read or to replace
                self._state_refused = True
                return self._ignored(exc.reason, "not a regular file; the found tools are kept in this process only")
            return self._ignored("unreadable", exc.detail or exc.reason)
        if len(raw) > MAX_STATE_BYTES:  # a broken file costs the list its history, nothing more
            return self._ignored("too_large", f"larger than {MAX_STATE_BYTES} bytes; rewritten by the next search")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except ValueError as exc:
            return self._ignored("invalid", str(exc))
        if not isinstance(doc, dict):
            return self._ignored("invalid", "not a JSON object")
        if doc.get("version") == 1:  # an earlier proxy's file: a plain list of found ids
            found = doc.get("found")
            return list(dict.fromkeys(i for i in found if isinstance(i, str))) if isinstance(found, list) else []
        try:
            return list(OfferState.from_dict(doc.get("offer")).block)
        except Exception as exc:  # not an offer state: the list loses its history, nothing more
            return self._ignored("invalid", f"{type(exc).__name__}: {exc}")

    def _save_state(self, ids: Sequence[str]) -> None:
        """Merge ``ids`` (newest last) into the state file, atomically (another process may share it)."""
        if self.state_path is None:
            return
        merged = dict.fromkeys(self._load_state())
        if self._state_refused:
            return
        for i in ids:
            merged.pop(i, None)
            merged[i] = None
        keep = OfferState(block=tuple(merged)[-self.max_offered :])
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.state_path.parent, prefix=".proxy-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"version": _STATE_VERSION, "offer": keep.to_dict()}, fh)
            os.replace(tmp, self.state_path)
        except OSError as exc:  # the list still holds them for this process
            logger.warning("mcp-proxy state %s not written: %s", self.state_path, exc)
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)

    def start(self) -> None:
        """Connect the upstream servers in the background (idempotent); listing and calling wait for it."""
        if self._connected is None:
            self._connected = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        async def one(server: str) -> None:
            try:
                await self.client.list_server_tools(server)
            except Exception as exc:  # one server down must not take the others with it
                self._failed.add(server)
                emit(UpstreamFailed(server=server, error=f"{type(exc).__name__}: {exc}"[:2048]))

        await asyncio.gather(*(one(n) for n in self.client.servers))

    async def tools(self) -> list[Candidate]:
        """Every tool of the upstream servers that connected, servers in order (waits for the start-up)."""
        self.start()
        assert self._connected is not None
        await asyncio.shield(self._connected)
        servers = [n for n in self.client.servers if n not in self._failed]
        lists = await asyncio.gather(*(self.client.list_server_tools(n) for n in servers))
        return [c for tools in lists for c in tools]

    def search_tool(self) -> Candidate:
        """The ``find_tools`` tool definition (the one search tool's name and description)."""
        return Candidate(id=SEARCH_TOOL_NAME, description=SEARCH_TOOL_DESCRIPTION, parameters=_SEARCH_SCHEMA)

    def _state(self, session: int, tools: Sequence[Candidate]) -> OfferState:
        """``session``'s offer state; a new session's block is the pins, then what earlier searches found."""
        state = self._states.get(session)
        if state is None:
            ids = {c.id for c in tools}
            pinned = tuple(c.id for c in tools if self.pins.is_pinned(c.id))
            known = tuple(i for i in reversed(self._known) if i in ids and i not in pinned)
            state = self._states[session] = OfferState(block=pinned + known[: self.max_offered])
        return state

    def _capped(self, state: OfferState) -> OfferState:
        """At most ``max_offered`` found tools in the block besides the pins (the oldest go)."""
        found = [i for i in state.block if not self.pins.is_pinned(i)]
        if len(found) <= self.max_offered:
            return state
        drop = set(found[: len(found) - self.max_offered])
        return replace(state, block=tuple(i for i in state.block if i not in drop))

    async def listed(self, session: int = 0) -> list[Candidate]:
        """What ``tools/list`` shows to ``session``: ``find_tools``, then its tools block."""
        tools = await self.tools()
        by_id = {c.id: c for c in tools}
        block = self._state(session, tools).block
        return [self.search_tool(), *(by_id[i] for i in block if i in by_id)]

    async def search(self, query: str, k: int | None = None, *, session: int = 0) -> dict[str, Any]:
        """Search the upstream tools ``session``'s list does not hold yet; the found ones join it.

        The one tool search (:func:`~shortlist.offer.search_tools`, a ``selection.tool_searched``
        event): a repeated search pages on; a failing selector falls back to a lexical ranking.

        Returns:
            ``{"query", "tools": [{"name", "description", "inputSchema", "score"?}], "fallback", "selector"}``.
        """
        k = max(1, min(int(k or self.k), 50))
        await self.flush(session)  # the tools called since the last search are a turn: this one learns from it
        tools = await self.tools()
        state = self._state(session, tools)

        def searched() -> ToolSearch:
            # The binding ranks the tools with the log's examples (what the model used after earlier
            # searches) and brings the tools the log's turns used together, as every surface does; a
            # log that cannot be read is a selection.feedback_unavailable event. Off the event loop:
            # SQLite may wait for another writer.
            co_usage = self.binding.co_usage(kind="tool")
            return search_tools(self.binding, state, query, policy="stable", candidates=tools, k=k, co_usage=co_usage)

        result = await asyncio.to_thread(searched)
        self._states[session] = self._capped(result.state)
        chosen = list(result.found)
        ids = tuple(c.id for c in chosen)
        found_ids = [i for i in ids if not self.pins.is_pinned(i)]
        for i in found_ids:
            self._known.pop(i, None)
            self._known[i] = None
        while len(self._known) > self.max_offered:
            self._known.pop(next(iter(self._known)))
        if found_ids:
            await asyncio.to_thread(self._save_state, found_ids)
        search = _Search(query=query, key=uuid.uuid4().hex, found=ids)
        found = self._found.setdefault(session, {})
        for i in found_ids:
            found.pop(i, None)
            found[i] = search
        while len(found) > self.max_offered:
            found.pop(next(iter(found)))
        await self._record("search", search.query, ids, (), f"mcp-search:{search.key}")
        scores = result.scores or {}
        listed = []
        for c in chosen:
            item: dict[str, Any] = {"name": c.id, "description": c.description, "inputSchema": dict(c.parameters or {})}
            if c.id in scores:
                item["score"] = scores[c.id]
            listed.append(item)
        return {"query": query, "tools": listed, "fallback": result.fallback, "selector": result.selector}

    async def called(self, tool: str, *, session: int = 0) -> bool:
        """Note that the model called ``tool``; a tool a search found is credited to the latest search that
        found it.

        The found tools called after one search are one turn of the feedback log (the search's query,
        the tools in call order, each once however often it is called), written when the turn closes:
        at ``session``'s next search or at :meth:`flush`. One turn teaches each tool the query (its
        example) and the tools that served it together (co-usage pairs).

        Returns:
            True when the call was credited (a log is attached and a search found the tool).
        """
        search = self._found.get(session, {}).get(tool)
        if search is None:  # offered from the start, or forwarded without a search: nothing learnt
            return False
        if self.feedback is None:
            emit(FoundToolCalled(tool=tool, query=search.query, recorded=False))
            return False
        uses = self._uses.setdefault(session, {})
        credited = uses.get(search.key)
        if credited is None:
            credited = uses[search.key] = _Uses(search)
            while len(uses) > self.max_offered:  # the oldest searches' credits go (their waiting turns written)
                turns = _closed([uses.pop(next(iter(uses)))])
                if turns:
                    await asyncio.to_thread(self._write_turns, turns)
        if tool not in credited.written and tool not in credited.pending:
            credited.pending.append(tool)
        return True

    async def flush(self, session: int | None = None) -> int:
        """Write the turns of the found tools called since ``session``'s last search (None: every session's).

        A search does this first, so the proxy calls it only at its stop; a host serving the proxy
        itself calls it before it stops, and whenever it wants the log current.

        Returns:
            The number of turns written (or attempted: a failed write is an ``mcp.feedback_failed`` event).
        """
        turns = self._close_turns(session)  # on the loop: no call lost
        if turns:
            await asyncio.to_thread(self._write_turns, turns)  # off the loop: SQLite may wait for another writer
        return len(turns)

    def flush_now(self) -> int:
        """:meth:`flush` every session on this thread, blocking: for a stop where no event loop will run
        again (the end of :meth:`serve_stdio`, a signal handler).

        Returns:
            The number of turns written (or attempted).
        """
        turns = self._close_turns(None)
        self._write_turns(turns)
        return len(turns)

    def _close_turns(self, session: int | None) -> list[_Turn]:
        """Close the open turns of ``session`` (None: of every session), to be written."""
        sessions = list(self._uses) if session is None else [session]
        return _closed([u for s in sessions for u in self._uses.get(s, {}).values()])

    def _write_turns(self, turns: Sequence[_Turn]) -> None:
        """Write each closed turn, with a :class:`FoundToolCalled` per tool."""
        for search, external_id, tools in turns:
            recorded = self._write("use", search.query, search.found, tools, external_id)
            for tool in tools:
                emit(FoundToolCalled(tool=tool, query=search.query, recorded=recorded))

    async def _record(
        self, what: str, query: str, selected: Sequence[str], used: Sequence[str], external_id: str
    ) -> bool:
        if self.feedback is None:
            return False
        # off the event loop: SQLite may wait for another writer
        return await asyncio.to_thread(self._write, what, query, selected, used, external_id)

    def _write(self, what: str, query: str, selected: Sequence[str], used: Sequence[str], external_id: str) -> bool:
        """Record one turn; a failure is a :class:`FeedbackFailed` event (the log is best effort)."""
        if self.feedback is None:
            return False
        try:
            self.feedback.record(query, selected, used, kind="tool", external_id=external_id)
        except Exception as exc:  # the log is best effort; the model's turn goes on
            emit(FeedbackFailed(what=what, error=f"{type(exc).__name__}: {exc}"))
            return False
        return True

    def build_server(self, name: str = "shortlist-proxy") -> Any:
        """A low-level ``mcp`` :class:`Server` serving this proxy."""
        return build_server(self, name)

    async def serve_stdio(self) -> None:
        """Serve the proxy on this process's stdin/stdout until the client disconnects."""
        from mcp.server.lowlevel import NotificationOptions
        from mcp.server.stdio import stdio_server

        server = self.build_server()
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        self.start()  # upstreams connect while the client initialises
        try:
            async with stdio_server() as (read, write):
                await server.run(read, write, options)
        finally:  # the client is gone (or the proxy stops): the last turns are written
            self.flush_now()
