"""The proxy's state file (issue 27, item 11): a FIFO never hangs the start-up, a huge file is never read whole.

A FIFO at ``--state`` used to block ``initialize`` forever (the proxy read it before answering);
a 30 MB state file was parsed on every search. Only a regular file of at most
``MAX_STATE_BYTES`` is read; anything else is a ``mcp.state_ignored`` event (the library) or one
line and exit 2 (``--state`` on the command line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shortlist._events import Event, event_hooks
from shortlist.mcp import MCPClient
from shortlist.mcp._proxy import MAX_STATE_BYTES, MCPProxy, StateIgnored

pytest.importorskip("mcp")


def _proxy(state: Path, events: list[Event]) -> MCPProxy:
    with event_hooks(events.append):
        return MCPProxy(MCPClient([]), selector=None, state_path=state)


def _ignored(events: list[Event]) -> list[StateIgnored]:
    return [e for e in events if isinstance(e, StateIgnored)]


def test_a_fifo_state_is_refused_without_blocking_and_never_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    events: list[Event] = []
    built: list[MCPProxy] = []
    thread = threading.Thread(target=lambda: built.append(_proxy(fifo, events)), daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():  # the old proxy blocks in open(): give it a writer so the test ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        pytest.fail("building the proxy blocked on a FIFO state file")
    [event] = _ignored(events)
    assert event.reason == "not_regular_file" and event.path == str(fifo)
    proxy = built[0]
    proxy._save_state(["mcp__time__get_current_time"])  # a search's save leaves the FIFO alone
    assert fifo.is_fifo()


def test_a_huge_state_is_not_read_and_is_rewritten_small(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    block = [f"mcp__up__tool_{i:07d}" for i in range(1_400_000)]  # ~30 MB, a valid offer state
    state.write_text(json.dumps({"version": 2, "offer": {"block": block}}), encoding="utf-8")
    assert state.stat().st_size > 25_000_000
    events: list[Event] = []
    started = time.perf_counter()
    proxy = _proxy(state, events)
    assert time.perf_counter() - started < 2.0
    [event] = _ignored(events)
    assert event.reason == "too_large" and event.limit == MAX_STATE_BYTES
    assert proxy._known == {}
    started = time.perf_counter()
    proxy._save_state(["mcp__time__get_current_time"])  # what a search does: bounded too
    assert time.perf_counter() - started < 2.0
    assert state.stat().st_size < 1024
    assert json.loads(state.read_text())["offer"]["block"] == ["mcp__time__get_current_time"]


def test_a_broken_state_is_an_event_and_a_good_one_is_read(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{not json", encoding="utf-8")
    events: list[Event] = []
    _proxy(state, events)
    assert [e.reason for e in _ignored(events)] == ["invalid"]
    state.write_text(json.dumps({"version": 2, "offer": {"block": ["mcp__a__x", "mcp__a__y"]}}), encoding="utf-8")
    events.clear()
    assert list(_proxy(state, events)._known) == ["mcp__a__x", "mcp__a__y"]
    assert _ignored(events) == []


@pytest.mark.slow
def test_the_cli_refuses_a_fifo_or_an_oversized_state_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_STATE_BYTES + 1))
    for path, words in ((fifo, "not a regular file"), (big, "more than a state file holds")):
        proc = subprocess.run(
            [sys.executable, "-m", "shortlist.cli", "mcp-proxy", "--mcp-server", "x=true", "--state", str(path)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and str(path) in lines[0]
    assert fifo.is_fifo()
