"""``shortlist mcp-proxy`` with real clients: the official ``mcp`` Python client and the MCP Inspector CLI.

Clients that validate a tool name against ``tools/list`` before calling it (the Inspector
2.x) must be able to call, in a new session, a tool that an earlier search found: the found
tools persist per set of upstream servers (``--state``). ``initialize`` is answered before
the upstream servers are connected; ``tools/list_changed`` is sent only when the list changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp.client.stdio import stdio_client

import shortlist
from mcp import ClientSession, StdioServerParameters

pytestmark = pytest.mark.slow  # real MCP servers, the proxy process and node

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = Path(os.environ.get("SHORTLIST_MCP_INSPECTOR", REPO / ".cache/node-tools/node_modules/.bin/mcp-inspector"))
TIME_TOOL = "mcp__time__get_current_time"
QUERY = "current time in a timezone"


def proxy_args(state: Path, *servers: str) -> list[str]:
    args = ["-m", "shortlist.cli", "mcp-proxy", "--k", "3", "--selector", "lexical", "--state", str(state)]
    for server in servers:
        args += ["--mcp-server", server]
    return args


class Session:
    """One client session over a new proxy process; counts tools/list_changed notifications."""

    def __init__(self) -> None:
        self.changed = 0
        self.changed_event = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self.changed += 1
            self.changed_event.set()


def names(result: mt.ListToolsResult) -> list[str]:
    return [t.name for t in result.tools]


async def test_found_tools_stay_callable_in_a_new_session(server_args: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "proxy-state.json"
    params = StdioServerParameters(
        command=sys.executable, args=proxy_args(state, server_args["time"], server_args["git"])
    )
    first = Session()
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=first.on_message) as s,
    ):
        init = await s.initialize()
        assert init.server_info.version == shortlist.__version__
        assert names(await s.list_tools()) == ["find_tools"]
        found = await s.call_tool("find_tools", {"query": QUERY})
        assert not found.is_error
        assert TIME_TOOL in [t["name"] for t in json.loads(found.content[0].text)["tools"]]  # type: ignore[union-attr]
        with anyio.fail_after(30):
            await first.changed_event.wait()
        listed = names(await s.list_tools())
        assert TIME_TOOL in listed
        # the same words and more: the search pages on, never returning a tool the list holds
        again = await s.call_tool("find_tools", {"query": f"{QUERY} or the git log of a repository"})
        assert not again.is_error
        more = [t["name"] for t in json.loads(again.content[0].text)["tools"]]  # type: ignore[union-attr]
        assert more and not set(more) & set(listed)
        with anyio.fail_after(30):
            while first.changed < 2:
                await anyio.sleep(0.05)
        assert names(await s.list_tools()) == [*listed, *more]
        now = await s.call_tool(TIME_TOOL, {"timezone": "Europe/Paris"})
        assert not now.is_error and "Europe/Paris" in now.content[0].text  # type: ignore[union-attr]
    assert TIME_TOOL in json.loads(state.read_text())["offer"]["block"]

    second = Session()
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=second.on_message) as s,
    ):
        await s.initialize()
        listed = names(await s.list_tools())
        assert listed[0] == "find_tools" and TIME_TOOL in listed  # found by the earlier session
        now = await s.call_tool(TIME_TOOL, {"timezone": "UTC"})
        assert not now.is_error and "UTC" in now.content[0].text  # type: ignore[union-attr]
    assert second.changed == 0


async def test_initialize_is_answered_before_the_upstream_starts(server_args: dict[str, str], tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    time_cmd = server_args["time"].partition("=")[2]
    held = f"time=sh -c 'while [ ! -e {gate} ]; do sleep 0.05; done; exec {time_cmd}'"
    params = StdioServerParameters(command=sys.executable, args=proxy_args(tmp_path / "state.json", held))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        with anyio.fail_after(60):
            await s.initialize()  # the upstream cannot have started: its gate is still closed
        assert not gate.exists()
        gate.touch()
        found = await s.call_tool("find_tools", {"query": QUERY})
        assert not found.is_error
        assert TIME_TOOL in names(await s.list_tools())


async def test_an_upstream_that_fails_to_start_leaves_the_others(server_args: dict[str, str], tmp_path: Path) -> None:
    errlog = tmp_path / "proxy.err"
    params = StdioServerParameters(
        command=sys.executable, args=proxy_args(tmp_path / "state.json", "broken=false", server_args["time"])
    )
    with open(errlog, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            found = await s.call_tool("find_tools", {"query": QUERY})
            assert not found.is_error
            assert TIME_TOOL in [t["name"] for t in json.loads(found.content[0].text)["tools"]]  # type: ignore[union-attr]
            now = await s.call_tool(TIME_TOOL, {"timezone": "UTC"})
            assert not now.is_error
    assert "mcp.upstream_failed" in errlog.read_text() and "broken" in errlog.read_text()


def inspector(state: Path, time_server: str, *method: str) -> dict[str, Any]:
    """One ``mcp-inspector --cli`` run: a new client process, a new proxy process, one method."""
    if not INSPECTOR.exists():
        if shutil.which("npm") is None:
            pytest.skip("node/npm not installed: the MCP Inspector CLI tests need them (CI installs them)")
        pytest.skip(f"MCP Inspector not installed at {INSPECTOR}: run scripts/install-node-tools")
    cmd = [
        str(INSPECTOR),
        "--cli",
        sys.executable,
        *proxy_args(state, time_server),
        *method,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_mcp_inspector_cli_calls_a_found_tool_in_a_new_session(server_args: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    time_server = server_args["time"]
    listed = inspector(state, time_server, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["find_tools"]
    found = inspector(
        state, time_server, "--method", "tools/call", "--tool-name", "find_tools", "--tool-arg", f"query={QUERY}"
    )
    assert not found.get("isError")
    assert TIME_TOOL in [t["name"] for t in found["structuredContent"]["tools"]]
    called = inspector(
        state, time_server, "--method", "tools/call", "--tool-name", TIME_TOOL, "--tool-arg", "timezone=Asia/Tokyo"
    )
    assert not called.get("isError") and "error" not in called
    assert "Asia/Tokyo" in called["content"][0]["text"]
    listed = inspector(state, time_server, "--method", "tools/list")
    assert TIME_TOOL in [t["name"] for t in listed["tools"]]
