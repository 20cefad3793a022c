"""``shortlist mcp-proxy --feedback-db``: searches and the found tools the model called feed the usage log."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import stdio_client

from mcp import ClientSession, StdioServerParameters
from shortlist._events import Event, event_hooks
from shortlist.feedback import FeedbackStore
from shortlist.mcp import MCPClient
from shortlist.mcp._client import parse_server_arg
from shortlist.mcp._proxy import MCPProxy
from shortlist.rankers._registry import create_builtin_selector

pytestmark = pytest.mark.slow  # real MCP servers and the proxy

NOW = "mcp__time__get_current_time"


def _proxy_args(server_args: dict[str, str], db: Path) -> list[str]:
    args = [
        "-m",
        "shortlist.cli",
        "mcp-proxy",
        "--k",
        "2",
        "--selector",
        "lexical",
        "--state",
        "off",
        "--feedback-db",
        str(db),
    ]
    args += ["--always-include", "mcp__time__convert_time"]
    for name in ("time", "git"):
        args += ["--mcp-server", server_args[name]]
    return args


async def _search(s: ClientSession, query: str) -> dict[str, Any]:
    result = await s.call_tool("find_tools", {"query": query})
    assert not result.is_error
    found: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return found


async def test_a_found_tool_the_model_calls_teaches_the_next_searches(
    server_args: dict[str, str], git_repo: Path, tmp_path: Path
) -> None:
    db = tmp_path / "feedback" / "log.db"
    params = StdioServerParameters(command=sys.executable, args=_proxy_args(server_args, db))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        before = await _search(s, "Lisbon wristwatch")
        assert before["fallback"] is not None and before["tools"] == []  # no tool says anything of the kind yet
        hit = await _search(s, "current time in Lisbon wristwatch")
        assert hit["fallback"] is None and hit["tools"][0]["name"] == NOW
        for _ in range(2):  # the same search and tool are one use, however often it is called
            now = await s.call_tool(NOW, {"timezone": "Europe/Lisbon"})
            assert not now.is_error
        pinned = await s.call_tool(
            "mcp__time__convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Lisbon"}
        )
        assert not pinned.is_error  # offered from the start: nothing to learn
        log = await s.call_tool("mcp__git__git_log", {"repo_path": str(git_repo)})  # never found by a search
        assert not log.is_error
        after = await _search(s, "Lisbon wristwatch")  # NOW is listed already: the search pages on past it
        assert NOW not in [t["name"] for t in after["tools"]]
    with FeedbackStore(db) as store:
        assert store.examples() == {NOW: ["current time in Lisbon wristwatch"]}
        stats = store.stats()
        assert stats["turns"] == 4 and stats["uses"] == 1  # three searches, one use
    # a new proxy on the same log starts out knowing it
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        again = await _search(s, "Lisbon wristwatch")
        assert again["fallback"] is None and again["tools"][0]["name"] == NOW


async def test_the_last_turn_is_written_when_the_client_disconnects(
    server_args: dict[str, str], tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    params = StdioServerParameters(command=sys.executable, args=_proxy_args(server_args, db))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        hit = await _search(s, "current time in Lisbon")
        assert hit["tools"][0]["name"] == NOW
        assert not (await s.call_tool(NOW, {"timezone": "Europe/Lisbon"})).is_error
    # no search came after the call: the proxy wrote its turn as it stopped
    with FeedbackStore(db) as store:
        assert store.examples() == {NOW: ["current time in Lisbon"]}
        assert store.stats()["uses"] == 1


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
async def test_a_signal_stops_the_proxy_and_writes_its_last_turn(
    server_args: dict[str, str], tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    """A supervisor's SIGTERM or a Ctrl-C ends the proxy at once, as a closed stdin does: the open turn is
    written (SIGINT hung until the client's next message, SIGTERM killed it with the turn unwritten)."""
    db = tmp_path / "log.db"
    proxy = await asyncio.create_subprocess_exec(
        sys.executable,
        *_proxy_args(server_args, db),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proxy.stdin is not None and proxy.stdout is not None

    async def ask(message: dict[str, Any]) -> dict[str, Any]:
        assert proxy.stdin is not None and proxy.stdout is not None
        proxy.stdin.write((json.dumps(message) + "\n").encode())
        await proxy.stdin.drain()
        if "id" not in message:
            return {}
        while True:
            line = await asyncio.wait_for(proxy.stdout.readline(), 60)
            assert line, "the proxy closed its stdout"
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == message["id"]:
                return answer

    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    await ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    await ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
    search = {"name": "find_tools", "arguments": {"query": "current time in Lisbon"}}
    found = await ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search})
    assert NOW in json.dumps(found)
    now = {"name": NOW, "arguments": {"timezone": "Europe/Lisbon"}}
    assert not (await ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": now}))["result"]["isError"]
    proxy.send_signal(sig)  # stdin still open: only the signal stops it
    assert await asyncio.wait_for(proxy.wait(), 30) == code
    with FeedbackStore(db) as store:
        assert store.examples() == {NOW: ["current time in Lisbon"]}


async def test_a_search_brings_the_tools_the_log_used_with_the_found_one(
    server_args: dict[str, str], tmp_path: Path
) -> None:
    store = FeedbackStore(tmp_path / "log.db")
    store.record("what time is it in Lisbon, and log it", used=[NOW, "mcp__git__git_log"])  # a runtime's turn
    async with MCPClient([parse_server_arg(server_args[n]) for n in ("time", "git")]) as client:
        proxy = MCPProxy(client, selector=create_builtin_selector("lexical"), k=1, feedback=store)
        found = await proxy.search("current time in a timezone")
        assert [t["name"] for t in found["tools"]] == [NOW, "mcp__git__git_log"]
        assert {c.id for c in await proxy.listed()} >= {NOW, "mcp__git__git_log"}
    plain = FeedbackStore(tmp_path / "other.db")
    async with MCPClient([parse_server_arg(server_args[n]) for n in ("time", "git")]) as client:
        proxy = MCPProxy(client, selector=create_builtin_selector("lexical"), k=1, feedback=plain)
        found = await proxy.search("current time in a timezone")
        assert [t["name"] for t in found["tools"]] == [NOW]
    store.close()
    plain.close()


async def test_proxy_events_and_a_failing_log(server_args: dict[str, str], tmp_path: Path) -> None:
    events: list[Event] = []
    store = FeedbackStore(tmp_path / "log.db")
    async with MCPClient([parse_server_arg(server_args["time"])]) as client:
        proxy = MCPProxy(client, selector=create_builtin_selector("lexical"), k=1, feedback=store)
        with event_hooks(events.append):
            found = await proxy.search("current time in a timezone")
            assert [t["name"] for t in found["tools"]] == [NOW]
            assert await proxy.called(NOW) is True  # credited to the search; written at the next one
            assert await proxy.called("mcp__time__convert_time") is False  # not found by a search
            assert store.stats()["uses"] == 0
            found = await proxy.search("what time is it now")  # the first search's turn is written first
            assert store.stats()["uses"] == 1
            store.close()  # the log breaks: searches and calls carry on
            assert found["tools"] and await proxy.called(found["tools"][0]["name"]) is True
            assert await proxy.flush() == 1  # its turn is attempted, and fails
            assert await proxy.flush() == 0  # nothing waits any more
    watched = ("selection.tool_searched", "selection.feedback_unavailable")
    by_name = [(e.name, e) for e in events if e.area == "mcp" or e.name in watched]
    names = [n for n, _ in by_name]
    assert names == [
        "selection.tool_searched",
        "mcp.found_tool_called",  # written before the second search ranks
        "selection.tool_searched",
        "mcp.feedback_failed",
        "mcp.found_tool_called",
    ]
    searched = by_name[0][1]
    assert searched.found == (NOW,) and searched.query == "current time in a timezone"  # type: ignore[attr-defined]
    used = by_name[1][1]
    assert used.tool == NOW and used.recorded is True  # type: ignore[attr-defined]
    failures = [(e.what, "ProgrammingError" in e.error) for n, e in by_name if n == "mcp.feedback_failed"]  # type: ignore[attr-defined]
    assert failures == [("use", True)]
    assert by_name[-1][1].recorded is False  # type: ignore[attr-defined]
    events.clear()
    with event_hooks(events.append):  # a search on the closed log: its examples, co-usage and record fail
        async with MCPClient([parse_server_arg(server_args["time"])]) as client:
            proxy = MCPProxy(client, selector=create_builtin_selector("lexical"), k=1, feedback=store)
            assert (await proxy.search("current time in a timezone"))["tools"]
    unread = [e.what for e in events if e.name == "selection.feedback_unavailable"]  # type: ignore[attr-defined]
    assert unread == ["co_usage", "examples"]  # read as every surface reads a log; the search goes on without them
    assert [e.what for e in events if e.name == "mcp.feedback_failed"] == ["search"]  # type: ignore[attr-defined]


async def test_the_found_tools_called_after_one_search_are_one_turn(
    server_args: dict[str, str], tmp_path: Path
) -> None:
    """Two found tools served one request: the log learns them as a pair, and each once."""
    convert = "mcp__time__convert_time"
    store = FeedbackStore(tmp_path / "log.db")
    async with MCPClient([parse_server_arg(server_args["time"])]) as client:
        proxy = MCPProxy(client, selector=create_builtin_selector("lexical"), k=2, feedback=store)
        found = await proxy.search("time in a timezone")
        assert {t["name"] for t in found["tools"]} == {NOW, convert}
        for tool in (convert, NOW, convert):  # call order; a second call of a tool adds nothing
            assert await proxy.called(tool) is True
        assert store.stats()["turns"] == 1  # the search only: its turn is still open
        assert await proxy.flush() == 1
        assert store.used_sets() == [(convert, NOW)]
        assert store.examples() == {convert: ["time in a timezone"], NOW: ["time in a timezone"]}
        assert store.co_usage().companions([NOW]) == [convert]  # a pair, which one-tool turns never taught
        assert await proxy.called(NOW) is True and await proxy.flush() == 0  # written already: nothing more
        await proxy.search("another request")
        assert store.stats()["turns"] == 3  # two searches and one turn of uses
    store.close()


async def test_without_a_log_the_proxy_records_nothing(server_args: dict[str, str]) -> None:
    events: list[Event] = []
    async with MCPClient([parse_server_arg(server_args["time"])]) as client:
        proxy = MCPProxy(client, selector=create_builtin_selector("lexical"), k=1)
        with event_hooks(events.append):
            await proxy.search("current time in a timezone")
            assert await proxy.called(NOW) is False
    called = [e for e in events if e.name == "mcp.found_tool_called"]
    assert len(called) == 1 and called[0].recorded is False  # type: ignore[attr-defined]


async def test_a_failing_selector_falls_back_to_a_lexical_ranking(server_args: dict[str, str]) -> None:
    """The proxy's search is the runtime's: a broken selector is answered lexically, never with the first k."""
    from shortlist.testing import FailingSelector

    async with MCPClient([parse_server_arg(server_args["git"]), parse_server_arg(server_args["time"])]) as client:
        proxy = MCPProxy(client, selector=FailingSelector(), k=1)
        found = await proxy.search("current time in a timezone")
        assert found["fallback"] == "error" and [t["name"] for t in found["tools"]] == [NOW]
        nothing = await proxy.search("Lisbon wristwatch")  # no tool shares a word: nothing, not padding
        assert nothing["tools"] == [] and nothing["fallback"] == "error"
        again = await proxy.search("current time in a timezone")  # NOW is listed: the search pages on
        assert NOW not in [t["name"] for t in again["tools"]]
        assert [c.id for c in await proxy.listed()][:2] == ["find_tools", NOW]
