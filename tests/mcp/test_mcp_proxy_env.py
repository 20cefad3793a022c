"""Upstream servers get the environment they are granted, and the documented `mcpServers` entry works
(issue 27, item 31).

A server that needs a token (``GITHUB_TOKEN``) could not run behind ``shortlist mcp-proxy``:
upstream processes got only the MCP SDK's default environment and there was no way to grant
more. ``--mcp-env SERVER=NAME[=VALUE]`` grants a variable to one server (the rules of an
external selector's ``env``); nothing else of the proxy's environment is passed on. The
Claude Desktop / ``mcpServers`` entry of docs/skills-and-mcp.md is loaded from the page and
started as a client would start it (the GitHub server replaced by a local stand-in that reports
its environment; npx is not available offline).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from shortlist._events import Event
from shortlist.errors import ConfigError
from shortlist.mcp._client import MCPEnvNotSet, grant_server_env, parse_server_arg

pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "skills-and-mcp.md"
ENV_SERVER = Path(__file__).with_name("env_server.py")
TOKEN = "GITHUB_PERSONAL_ACCESS_TOKEN"


def _specs(*values: str) -> list[Any]:
    return [parse_server_arg(v) for v in values]


def test_a_server_gets_its_grants_and_a_safe_minimum_only() -> None:
    host = {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "GITHUB_TOKEN": "t0k", "AWS_SECRET": "no"}
    events: list[Event] = []
    github, time_ = grant_server_env(
        _specs("github=npx server-github", "time=mcp-server-time"),
        ["github=GITHUB_TOKEN", "github=GITHUB_HOST=github.example.com", "github=UNSET_ONE"],
        host=host,
        hooks=[events.append],
    )
    assert dict(github.env or {}) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C.UTF-8",
        "GITHUB_TOKEN": "t0k",
        "GITHUB_HOST": "github.example.com",
    }
    assert dict(time_.env or {}) == {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8"}  # no token for the others
    assert [(e.server, e.variable) for e in events if isinstance(e, MCPEnvNotSet)] == [("github", "UNSET_ONE")]


@pytest.mark.parametrize(
    ("grant", "words"),
    [
        ("gitlab=TOKEN", "no upstream server named 'gitlab'"),
        ("github", "expects SERVER=NAME"),
        ("github=", "expects SERVER=NAME"),
        ("github=BAD-NAME", "not an environment variable name"),
        ("web=TOKEN", "HTTP server"),
    ],
)
def test_a_bad_grant_is_a_config_error(grant: str, words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        grant_server_env(_specs("github=npx server-github", "web=http://127.0.0.1:9/mcp"), [grant], host={})


def _desktop_entry() -> dict[str, Any]:
    """The one ```json block of the page that holds an ``mcpServers`` object: its ``shortlist`` entry."""
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)]
    (config,) = [b for b in blocks if "mcpServers" in b]
    entry: dict[str, Any] = config["mcpServers"]["shortlist"]
    return entry


def _local(args: list[str]) -> list[str]:
    """The entry's arguments, with the GitHub server's npx command replaced by the local stand-in."""
    out: list[str] = []
    for arg in args:
        if out and out[-1] == "--mcp-server" and arg.startswith("github="):
            assert "server-github" in arg
            arg = f"github={shlex.join([sys.executable, str(ENV_SERVER)])}"
        out.append(arg)
    assert out != args, "the page's entry starts no GitHub server"
    return out


@pytest.mark.slow
def test_the_documented_mcp_servers_entry_starts_and_grants_the_token() -> None:
    import mcp.types as mt
    from mcp.client.stdio import stdio_client

    from mcp import ClientSession, StdioServerParameters

    entry = _desktop_entry()
    assert entry["command"] == "shortlist" and entry["args"][0] == "mcp-proxy"
    assert set(entry["env"]) == {TOKEN}
    bin_dir = str(Path(sys.executable).parent)  # where pip put shortlist and mcp-server-time
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    command = shutil.which(entry["command"], path=path)
    assert command is not None, "the `shortlist` command is not installed"
    # what the client passes: its own environment plus the entry's env; a decoy secret must stay here
    env = {**os.environ, "PATH": path, **entry["env"], TOKEN: "test-token", "SHORTLIST_TEST_DECOY": "secret"}
    args = [*_local(entry["args"]), "--selector", "lexical", "--state", "off"]
    params = StdioServerParameters(command=command, args=args, env=env)

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            with anyio.fail_after(120):
                await s.initialize()
                names = await s.call_tool("mcp__github__env_names", {})
                token = await s.call_tool("mcp__github__env_value", {"name": TOKEN})
                now = await s.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
        assert not names.is_error and not token.is_error and not now.is_error
        assert isinstance(names.content[0], mt.TextContent) and isinstance(token.content[0], mt.TextContent)
        seen = set(json.loads(names.content[0].text))
        assert token.content[0].text == "test-token"
        assert "SHORTLIST_TEST_DECOY" not in seen  # nothing but the grant and the safe minimum
        assert seen <= {TOKEN, "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_CTYPE"}

    anyio.run(main)
