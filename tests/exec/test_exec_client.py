"""The exec client against real child processes: answers, every failure mode, timeouts, env isolation."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time

import pytest
from exec_helpers import BEHAVE, PYTHON, process_gone

from shortlist._config_sections import SelectorConfig
from shortlist._events import Event, SelectionFallback
from shortlist._types import Candidate, Query
from shortlist.errors import (
    SelectorError,
    SelectorProcessError,
    SelectorProtocolError,
    SelectorTimeout,
)
from shortlist.exec._events import ExecKilled, ExecSpawned
from shortlist.rankers._exec_client import ExecSelector
from shortlist.selection._narrowing import anarrow, narrow

pytestmark = pytest.mark.slow  # exec selector processes

CANDS = [
    Candidate("alpha", description="first tool", metadata={"tags": "x"}),
    Candidate("beta", description="second tool"),
    Candidate("gamma", description="third tool"),
]
QUERY = Query("find the second tool", kind="tool", k=3, pack_id="pack", agent_id="agent")


def behave(*args: str, **kw: object) -> ExecSelector:
    return ExecSelector("behave", PYTHON, [BEHAVE, *args], **kw)  # type: ignore[arg-type]


def fallbacks(events: list[Event]) -> list[SelectionFallback]:
    return [e for e in events if isinstance(e, SelectionFallback)]


# --- happy path (spec §9 item 19) ----------------------------------------------------------


def test_envelope_carries_the_query_and_every_candidate() -> None:
    """What a real child reads is the documented envelope, snake_case keys only (items 19 and 25)."""
    sel = behave("echo")
    sent = json.loads(sel.select(QUERY, CANDS).reason)
    assert list(sent) == ["version", "query", "candidates"] and sent["version"] == 1
    assert sent["query"] == {"text": QUERY.text, "kind": "tool", "pack_id": "pack", "agent_id": "agent", "k": 3}
    assert [c["id"] for c in sent["candidates"]] == ["alpha", "beta", "gamma"]
    assert sent["candidates"][0] == {
        "id": "alpha",
        "name": "alpha",
        "description": "first tool",
        "metadata": {"tags": "x"},
    }


def test_answer_order_is_kept(events: list[Event]) -> None:
    sel = behave("answer", "beta", "alpha")
    assert sel.select(QUERY, CANDS).selected == ("beta", "alpha")
    turn = narrow(sel, QUERY, CANDS)
    assert turn.fallback is None
    assert turn.ids == ("beta", "alpha")
    assert turn.reason == "fixed"
    assert any(isinstance(e, ExecSpawned) and e.selector == "behave" and not e.worker for e in events)


async def test_aselect_does_not_block_the_loop() -> None:
    sel = behave("sleep", "0.4")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.create_task(tick())
    turn = await anarrow(sel, QUERY, CANDS)
    ticker.cancel()
    assert turn.ids == ("alpha",)
    assert ticks >= 5


# --- failures fall back, observably (spec §9 items 20 and 26) ----------------------------------


def test_spawn_error_missing_binary(events: list[Event]) -> None:  # spec §9 item 20
    sel = ExecSelector("ghost", "/nonexistent/selector-binary")
    with pytest.raises(SelectorProcessError, match="cannot start '/nonexistent/selector-binary'"):
        sel.select(QUERY, CANDS)
    turn = narrow(sel, QUERY, CANDS)
    assert turn.fallback == "error"
    assert turn.ids == ("alpha", "beta", "gamma")
    (fb,) = fallbacks(events)
    assert fb.selector == "ghost" and "SelectorProcessError" in fb.error


def test_nonzero_exit_with_valid_stdout_falls_back_with_stderr_tail(events: list[Event]) -> None:
    sel = behave("nonzero")
    with pytest.raises(SelectorProcessError, match="exited with status 3") as info:
        sel.select(QUERY, CANDS)
    assert "something went wrong" in info.value.stderr_tail
    assert info.value.selector == "behave" and info.value.elapsed_ms is not None
    turn = narrow(sel, QUERY, CANDS)
    assert turn.fallback == "error" and len(turn.ids) == 3
    (fb,) = fallbacks(events)
    assert "something went wrong after answering" in fb.stderr_tail


@pytest.mark.parametrize(
    ("mode", "error", "why"),
    [
        ("empty", SelectorProtocolError, "empty selector output"),
        ("bad_json", SelectorProtocolError, "not exactly one JSON document"),
    ],
)
def test_bad_output_is_a_protocol_error(mode: str, error: type[SelectorError], why: str) -> None:
    with pytest.raises(error, match=why):
        behave(mode).select(QUERY, CANDS)
    assert narrow(behave(mode), QUERY, CANDS).fallback == "error"


def test_log_line_before_json_falls_back_with_an_event_saying_why(events: list[Event]) -> None:
    """Spec §9 item 26: strict single JSON document; a stray log line is a reported fallback."""
    turn = narrow(behave("log_before"), QUERY, CANDS)
    assert turn.fallback == "error"
    assert turn.ids == ("alpha", "beta", "gamma")
    (fb,) = fallbacks(events)
    assert fb.reason == "error" and fb.selector == "behave"
    assert "not exactly one JSON document" in fb.error
    assert "INFO loading model" in fb.error


def test_oversized_stdout_is_capped() -> None:
    sel = behave("oversized", "200000", max_output_bytes=50_000)
    with pytest.raises(SelectorProtocolError, match="stdout exceeded 50000 bytes"):
        sel.select(QUERY, CANDS)
    assert behave("oversized", "20000", max_output_bytes=50_000).select(QUERY, CANDS).selected == (
        "alpha", "beta", "gamma",
    )  # fmt: skip


def test_selector_error_field_is_an_error() -> None:
    sel = ExecSelector("err", PYTHON, ["-c", 'print(\'{"error": "index not built"}\')'])
    with pytest.raises(SelectorError, match="index not built"):
        sel.select(QUERY, CANDS)


def test_large_request_is_streamed_without_deadlock() -> None:
    many = [Candidate(f"t{i}", description="d" * 200) for i in range(3000)]  # ~700 KB on stdin
    assert behave("answer", "t2999").select(Query("x"), many).selected == ("t2999",)


# --- timeouts (spec §9 item 21) ----------------------------------------------------------------


def test_timeout_defaults() -> None:  # spec §9 item 21: 0 or unset means 10 s
    assert ExecSelector("a", "x").timeout_ms == 10_000
    assert ExecSelector("a", "x", timeout_ms=0).timeout_ms == 10_000
    assert ExecSelector.from_config("a", SelectorConfig(command="x")).timeout_s == 10.0
    assert ExecSelector.from_config("a", SelectorConfig(command="x", timeout_ms=0)).timeout_ms == 10_000
    assert ExecSelector.from_config("a", SelectorConfig(command="x", timeout_ms=1500)).timeout_ms == 1500


@pytest.mark.parametrize("timeout_ms", [250, 1500])
def test_sleeping_child_is_killed_in_time(timeout_ms: int, events: list[Event]) -> None:
    sel = behave("grandchild", "30", timeout_ms=timeout_ms)
    start = time.monotonic()
    with pytest.raises(SelectorTimeout) as info:
        sel.select(QUERY, CANDS)
    elapsed = time.monotonic() - start
    grandchild = int(re.search(r"grandchild (\d+)", info.value.stderr_tail).group(1))  # type: ignore[union-attr]
    (killed,) = [e for e in events if isinstance(e, ExecKilled)]  # the kill came before the call returned
    assert killed.reason == "timeout" and killed.elapsed_ms >= timeout_ms  # at the deadline, never before it
    assert timeout_ms / 1000 <= elapsed < 30  # ended by the kill, not by the child's own 30 s
    assert process_gone(killed.pid) and process_gone(grandchild)


def test_configured_timeout_is_honoured_for_a_slow_but_timely_child() -> None:
    assert behave("sleep", "0.6", timeout_ms=1500).select(QUERY, CANDS).selected == ("alpha",)


def test_timeout_through_narrow_is_a_timeout_fallback(events: list[Event]) -> None:
    turn = narrow(behave("sleep", "30", timeout_ms=250), QUERY, CANDS)
    assert turn.fallback == "timeout"
    assert fallbacks(events)[0].reason == "timeout"


def test_grandchild_holding_the_pipes_does_not_hold_the_call(events: list[Event]) -> None:
    turn = narrow(behave("straggler", timeout_ms=5000), QUERY, CANDS)
    assert turn.fallback is None
    assert turn.ids == ("alpha", "beta", "gamma")
    # not the 5 s timeout: the pipes' holder (asleep for 30 s) does not count
    assert [e for e in events if isinstance(e, ExecKilled) and e.reason == "timeout"] == []


def test_straggler_is_killed_after_a_successful_call() -> None:
    from shortlist.exec._process import run_once

    sel = behave("straggler")
    result = run_once(
        sel.launch(), b'{"query": {"text": "x"}, "candidates": [{"id": "a"}]}', timeout_s=5,
        max_output_bytes=1000, tail_bytes=500, selector="s",
    )  # fmt: skip
    assert json.loads(result.stdout) == {"selected": ["a"]}
    assert result.elapsed_ms < 5000
    grandchild = int(re.search(r"grandchild (\d+)", result.stderr_tail).group(1))  # type: ignore[union-attr]
    assert process_gone(grandchild)


# --- environment (spec §9 item 22) ---------------------------------------------------------------


def test_env_isolation(monkeypatch: pytest.MonkeyPatch) -> None:  # spec §9 item 22
    monkeypatch.setenv("SHORTLIST_TEST_SECRET", "s3cr3t")
    monkeypatch.setenv("GRANTED_FROM_HOST", "host-value")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    sel = behave("env", env=["GRANTED_FROM_HOST", "LITERAL=lit=eral", "NOT_SET_ANYWHERE"])
    env = json.loads(sel.select(QUERY, CANDS).reason)
    assert env["GRANTED_FROM_HOST"] == "host-value"
    assert env["LITERAL"] == "lit=eral"
    assert "NOT_SET_ANYWHERE" not in env
    assert "SHORTLIST_TEST_SECRET" not in env
    assert "s3cr3t" not in json.dumps(env)
    allowed = {"PATH", "HOME", "LANG", "GRANTED_FROM_HOST", "LITERAL", "LC_CTYPE"}  # LC_CTYPE: PEP 538 coercion
    assert set(env) <= allowed
    assert env.get("PATH") == os.environ.get("PATH")


def test_env_isolation_with_no_grants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORTLIST_TEST_SECRET", "s3cr3t")
    env = json.loads(behave("env").select(QUERY, CANDS).reason)
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_CTYPE"}
