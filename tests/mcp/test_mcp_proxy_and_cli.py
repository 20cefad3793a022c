"""``shortlist mcp-proxy`` and ``shortlist select --mcp-server`` as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp.client.stdio import stdio_client

from mcp import ClientSession, StdioServerParameters

pytestmark = pytest.mark.slow  # real MCP servers and the proxy process


async def test_proxy_lists_searches_and_forwards(server_args: dict[str, str], git_repo: Path) -> None:
    args = ["-m", "shortlist.cli", "mcp-proxy", "--k", "3", "--selector", "lexical", "--state", "off"]
    for name in ("time", "git", "fetch"):
        args += ["--mcp-server", server_args[name]]
    notes: list[Any] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        notes.append(message)
        if isinstance(message, mt.ToolListChangedNotification):
            changed.set()

    params = StdioServerParameters(command=sys.executable, args=args)
    async with stdio_client(params) as (read, write), ClientSession(read, write, message_handler=on_message) as s:
        await s.initialize()
        first = [t.name for t in (await s.list_tools()).tools]
        assert first == ["find_tools"]  # narrowed: no upstream tool before a search
        found = await s.call_tool("find_tools", {"query": "current time in a timezone"})
        assert not found.is_error
        names = [t["name"] for t in json.loads(found.content[0].text)["tools"]]  # type: ignore[union-attr]
        assert "mcp__time__get_current_time" in names and len(names) <= 3
        with anyio.fail_after(30):
            await changed.wait()
        listed = [t.name for t in (await s.list_tools()).tools]
        assert "mcp__time__get_current_time" in listed and "mcp__git__git_commit" not in listed
        now = await s.call_tool("mcp__time__get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error and "Europe/Paris" in now.content[0].text  # type: ignore[union-attr]
        log = await s.call_tool("mcp__git__git_log", {"repo_path": str(git_repo)})  # forwarded unlisted
        assert "first commit" in log.content[0].text  # type: ignore[union-attr]
        unknown = await s.call_tool("mcp__git__nope", {})
        assert unknown.is_error
        empty = await s.call_tool("find_tools", {"query": " "})
        assert empty.is_error


def test_select_narrows_live_servers(server_args: dict[str, str], tmp_path: Path) -> None:
    catalog = tmp_path / "cat.json"
    catalog.write_text(json.dumps([{"name": "send_email", "description": "Send an email message"}]))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "shortlist.cli",
            "select",
            "--json",
            "--k",
            "3",
            "--selector",
            "lexical",
            "--catalog",
            str(catalog),
            "--mcp-server",
            server_args["time"],
            "--mcp-server",
            server_args["git"],
            "what time is it now in Tokyo timezone",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["fallback"] is None and "mcp__time__get_current_time" in data["ranked"]
    assert len(data["selected"]) <= 3 and "mcp__git__git_commit" not in data["selected"]
    bad = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "select", "--mcp-server", "broken", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("shortlist: error:") and "Traceback" not in bad.stderr
