"""Live MCP servers from PyPI (time, git, fetch) as a tool source: list, narrow, call, reconnect."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import child_pids

from shortlist._events import Event, event_hooks
from shortlist._install import pip_install
from shortlist._types import Query
from shortlist.errors import ConfigError, MissingDependencyError
from shortlist.mcp import MCPClient, select_mcp_tools
from shortlist.mcp._client import MCPReconnected, MCPServerError, parse_server_arg
from shortlist.mcp._tools import expand_tool_patterns, mcp_policy, parse_tool_name
from shortlist.rankers._registry import create_builtin_selector
from shortlist.selection._narrowing import NarrowingPolicy, narrow

pytestmark = pytest.mark.slow  # real MCP servers over stdio

GIT_TOOLS = {"git_status", "git_log", "git_diff", "git_commit", "git_add", "git_show", "git_branch"}


def test_lists_every_server_with_prefixed_names(source: Any) -> None:
    tools = source.list_candidates()
    ids = [c.id for c in tools]
    assert len(ids) == len(set(ids)) >= 14
    assert {"mcp__time__get_current_time", "mcp__time__convert_time", "mcp__fetch__fetch"} <= set(ids)
    assert {f"mcp__git__{t}" for t in GIT_TOOLS} <= set(ids)
    now = next(c for c in tools if c.id == "mcp__time__get_current_time")
    assert now.metadata["server"] == "time" and now.metadata["tool"] == "get_current_time"
    assert now.parameters is not None and "timezone" in now.parameters["properties"]
    assert parse_tool_name(now.id) == ("time", "get_current_time")


def test_live_tools_are_narrowed_like_any_tool(source: Any) -> None:
    tools = source.list_candidates()
    lexical = create_builtin_selector("lexical")
    query = Query(text="show the git commit log history of the repository", kind="tool", k=5)
    turn = narrow(lexical, query, tools, mcp_policy())
    assert turn.narrowed and "mcp__git__git_log" in turn.ranked
    assert 0 < len(turn.surfaced) <= 5 and "mcp__fetch__fetch" not in turn.ids
    pinned_all = narrow(lexical, query, tools, NarrowingPolicy())  # default pins: the mcp namespace is pinned
    assert len(pinned_all.surfaced) == len(tools)


def test_wildcard_entry_survives_narrowing_and_expands(source: Any) -> None:
    tools = source.list_candidates()
    allowed = ["mcp__git__*", "mcp__time__get_current_time", "mcp__time__convert_time", "mcp__fetch__fetch"]
    query = Query(text="convert 9am in Tokyo to New York timezone", kind="tool", k=1)
    chosen = select_mcp_tools(create_builtin_selector("lexical"), query, tools, allowed)
    assert chosen.turn.narrowed and "mcp__git__*" in chosen.turn.pinned
    git = sorted(c.id for c in tools if c.id.startswith("mcp__git__"))
    assert [i for i in chosen.ids if i.startswith("mcp__git__")] == git  # the whole server, as a set
    assert "mcp__fetch__fetch" not in chosen.ids and len(chosen.ids) == len(git) + 1
    assert expand_tool_patterns(["mcp__time__*", "mcp__nope__x"], [c.id for c in tools]) == [
        "mcp__time__convert_time",
        "mcp__time__get_current_time",
    ]


def test_calls_time_and_git(source: Any, git_repo: Path) -> None:
    now = source.call("mcp__time__get_current_time", {"timezone": "Asia/Tokyo"})
    assert not now.is_error and json.loads(now.text)["timezone"] == "Asia/Tokyo"
    log = source.call("mcp__git__git_log", {"repo_path": str(git_repo)})
    assert not log.is_error and "first commit: add the readme" in log.text
    status = source.call("mcp__git__git_status", {"repo_path": str(git_repo)})
    assert "notes.txt" in status.text
    bad = source.call("mcp__time__get_current_time", {"timezone": "Not/AZone"})
    assert bad.is_error
    with pytest.raises(MCPServerError, match="unknown MCP server"):
        source.call("mcp__nope__x", {})
    with pytest.raises(MCPServerError, match="not an MCP tool name"):
        source.call("git_log", {})


async def test_reconnects_after_the_server_process_is_killed(server_args: dict[str, str]) -> None:
    events: list[Event] = []
    others = set(child_pids("mcp-server-time"))  # e.g. the module fixture's server
    with event_hooks(events.append):
        async with MCPClient([parse_server_arg(server_args["time"])]) as client:
            first = await client.call("mcp__time__get_current_time", {"timezone": "UTC"})
            assert not first.is_error
            pids = set(child_pids("mcp-server-time")) - others
            assert len(pids) == 1
            (killed,) = pids
            os.kill(killed, signal.SIGKILL)
            again = await client.call("mcp__time__get_current_time", {"timezone": "UTC"})
            assert not again.is_error and json.loads(again.text)["timezone"] == "UTC"
            new = set(child_pids("mcp-server-time")) - others
            assert len(new) == 1 and killed not in new
            assert len(await client.list_server_tools("time")) == 2
    assert [e for e in events if isinstance(e, MCPReconnected) and e.server == "time"]
    assert set(child_pids("mcp-server-time")) - others == set()  # closed: no process left behind


async def test_a_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text("import sys\nsys.stderr.write('boom: no config\\n')\nsys.exit(3)\n", encoding="utf-8")
    with pytest.raises(MCPServerError, match=r"'bad'.*did not start.*boom: no config"):
        async with MCPClient([parse_server_arg(f"bad={sys.executable} {script}")], connect_timeout_s=20):
            pass


def test_server_arguments_are_validated() -> None:
    spec = parse_server_arg("git=mcp-server-git --repository '/tmp/a b'")
    assert spec.command == ("mcp-server-git", "--repository", "/tmp/a b") and spec.transport == "stdio"
    assert parse_server_arg("remote=http://127.0.0.1:9/mcp").transport == "http"
    for bad in ("noequals", "a__b=cmd", "=cmd", "x=", "sp ace=cmd"):
        with pytest.raises(ConfigError):
            parse_server_arg(bad)
    with pytest.raises(ConfigError, match="duplicate"):
        MCPClient([parse_server_arg("a=x"), parse_server_arg("a=y")])


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from shortlist.mcp._client import require_mcp

    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(MissingDependencyError) as raised:
        require_mcp()
    assert pip_install("mcp") in str(raised.value)  # the command for this installation (a clone: -e '.[mcp]')
    with pytest.raises(MissingDependencyError):
        MCPClient([parse_server_arg("a=x")])


async def test_the_stderr_file_of_a_stdio_server_is_closed_with_the_client(
    server_args: dict[str, str], tmp_path: Path
) -> None:
    client = MCPClient([parse_server_arg(server_args["time"])])
    async with client:
        assert not (await client.call("mcp__time__get_current_time", {"timezone": "UTC"})).is_error
        (conn,) = client._conns.values()
        errlog = conn._errlog
        assert errlog is not None and not errlog.closed
    assert errlog.closed and conn._errlog is None  # deleted, not left for the garbage collector
    script = tmp_path / "crash.py"
    script.write_text("import sys\nsys.stderr.write('boom\\n')\nsys.exit(3)\n", encoding="utf-8")
    failing = MCPClient([parse_server_arg(f"bad={sys.executable} {script}")], connect_timeout_s=20)
    with pytest.raises(MCPServerError, match="boom"):
        async with failing:
            pass
    assert all(c._errlog is None for c in failing._conns.values())
