"""Shared fixtures of the MCP tests: real MCP servers from PyPI started over stdio."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopback import starts_processes

BIN = Path(sys.executable).parent


def server_bin(name: str) -> str:
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed (pip install {name}); the MCP tests need the real server")
        return found
    return str(path)


@pytest.fixture(scope="session")
@starts_processes
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    (repo / "README.md").write_text("hello\n", encoding="utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "README.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "first commit: add the readme"], check=True, env=env)
    (repo / "notes.txt").write_text("untracked\n", encoding="utf-8")
    return repo


@pytest.fixture(scope="session")
def server_args(git_repo: Path) -> dict[str, str]:
    """``NAME=COMMAND`` values for the three servers."""
    return {
        "time": f"time={server_bin('mcp-server-time')} --local-timezone UTC",
        "git": f"git={server_bin('mcp-server-git')} --repository {git_repo}",
        "fetch": f"fetch={server_bin('mcp-server-fetch')}",
    }


@pytest.fixture(scope="module")
@starts_processes
def source(server_args: dict[str, str]) -> Iterator[object]:
    from shortlist.mcp import MCPToolSource
    from shortlist.mcp._client import parse_server_arg

    with MCPToolSource([parse_server_arg(v) for v in server_args.values()]) as src:
        yield src
