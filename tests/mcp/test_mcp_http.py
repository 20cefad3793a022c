"""The streamable HTTP transport against a real SDK server process, including a reconnect."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopback import free_port, wait_listening
from shortlist._events import Event, event_hooks
from shortlist.mcp import MCPClient, MCPServerSpec
from shortlist.mcp._client import MCPReconnected

pytestmark = pytest.mark.slow  # a real MCP server over HTTP

SERVER = str(Path(__file__).with_name("http_server.py"))


def start(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if wait_listening(port, proc=proc, seconds=30):
        return proc
    if proc.poll() is not None:
        pytest.fail(f"the HTTP MCP server exited with {proc.returncode}")
    proc.kill()
    proc.wait()
    pytest.fail("the HTTP MCP server did not listen within 30 s")


@pytest.fixture()
def port() -> Iterator[int]:
    yield free_port()


async def test_http_server_listed_called_and_reconnected(port: int) -> None:
    proc = start(port)
    events: list[Event] = []
    try:
        with event_hooks(events.append):
            async with MCPClient([MCPServerSpec(name="notes", url=f"http://127.0.0.1:{port}/mcp")]) as client:
                tools = {c.id for c in await client.list_candidates()}
                assert tools == {"mcp__notes__add_note", "mcp__notes__count_words"}
                out = await client.call("mcp__notes__count_words", {"text": "one two three"})
                assert not out.is_error and out.text == "3"
                proc.kill()
                proc.wait()
                proc = start(port)  # the server comes back (a new session must be opened)
                again = await client.call("mcp__notes__add_note", {"text": "hi"})
                assert not again.is_error and again.text == "note 1: hi"
        assert [e for e in events if isinstance(e, MCPReconnected) and e.server == "notes"]
    finally:
        proc.kill()
        proc.wait()
