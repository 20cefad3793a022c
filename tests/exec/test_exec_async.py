"""The native async path (``aselect``): same answers and failures as ``select``, on the event loop."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from exec_helpers import BEHAVE, PYTHON, process_gone

from shortlist._events import Event, SelectionFallback, event_hooks
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorError, SelectorProcessError, SelectorProtocolError, SelectorTimeout
from shortlist.exec._events import ExecKilled, ExecSpawned
from shortlist.rankers._exec_client import ExecSelector
from shortlist.selection._narrowing import anarrow

pytestmark = pytest.mark.slow  # exec selector processes

CANDS = [Candidate("alpha"), Candidate("beta"), Candidate("gamma")]
QUERY = Query("second", k=3)


def behave(*args: str, **kw: object) -> ExecSelector:
    return ExecSelector("behave", PYTHON, [BEHAVE, *args], **kw)  # type: ignore[arg-type]


async def test_answer_and_envelope(events: list[Event]) -> None:
    assert (await behave("answer", "gamma", "alpha").aselect(QUERY, CANDS)).selected == ("gamma", "alpha")
    sent = json.loads((await behave("echo").aselect(QUERY, CANDS)).reason)
    assert sent["query"]["text"] == "second" and [c["id"] for c in sent["candidates"]] == ["alpha", "beta", "gamma"]
    assert sum(isinstance(e, ExecSpawned) for e in events) == 2


@pytest.mark.parametrize(
    ("args", "kw", "error", "why"),
    [
        (("nonzero",), {}, SelectorProcessError, "exited with status 3"),
        (("empty",), {}, SelectorProtocolError, "empty selector output"),
        (("bad_json",), {}, SelectorProtocolError, "not exactly one JSON document"),
        (("log_before",), {}, SelectorProtocolError, "not exactly one JSON document"),
        (("oversized", "100000"), {"max_output_bytes": 10_000}, SelectorProtocolError, "exceeded 10000 bytes"),
    ],
)
async def test_failures(args: tuple[str, ...], kw: dict, error: type[SelectorError], why: str) -> None:
    with pytest.raises(error, match=why):
        await behave(*args, **kw).aselect(QUERY, CANDS)


async def test_spawn_error() -> None:
    with pytest.raises(SelectorProcessError, match="cannot start"):
        await ExecSelector("ghost", "/nonexistent/selector").aselect(QUERY, CANDS)


async def test_timeout_kills_the_group_in_time(events: list[Event]) -> None:
    start = time.monotonic()
    with pytest.raises(SelectorTimeout) as info:
        await behave("grandchild", "30", timeout_ms=250).aselect(QUERY, CANDS)
    elapsed = time.monotonic() - start
    grandchild = int(re.search(r"grandchild (\d+)", info.value.stderr_tail).group(1))  # type: ignore[union-attr]
    (killed,) = [e for e in events if isinstance(e, ExecKilled)]  # the kill came before the call returned
    assert killed.reason == "timeout" and killed.elapsed_ms >= 250  # at the deadline, never before it
    assert 0.25 <= elapsed < 30  # ended by the kill, not by the child's own 30 s
    assert process_gone(killed.pid) and process_gone(grandchild)


async def test_straggler_does_not_hold_the_call(events: list[Event]) -> None:
    selection = await behave("straggler", timeout_ms=5000).aselect(QUERY, CANDS)
    assert selection.selected == ("alpha", "beta", "gamma")
    # answered, not timed out: the grandchild holding the pipes (30 s) was not waited for
    assert [e.reason for e in events if isinstance(e, ExecKilled) and e.reason == "timeout"] == []


async def test_cancelling_the_turn_kills_the_process(events: list[Event]) -> None:
    task = asyncio.create_task(behave("sleep", "30", timeout_ms=20_000).aselect(QUERY, CANDS))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if any(isinstance(e, ExecSpawned) for e in events):
            break
    (spawned,) = [e for e in events if isinstance(e, ExecSpawned)]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert process_gone(spawned.pid)


async def test_anarrow_falls_back_with_an_event(events: list[Event]) -> None:
    turn = await anarrow(behave("log_before"), QUERY, CANDS)
    assert turn.fallback == "error" and turn.ids == ("alpha", "beta", "gamma")
    (fb,) = [e for e in events if isinstance(e, SelectionFallback)]
    assert "not exactly one JSON document" in fb.error


async def test_concurrent_turns_run_in_parallel() -> None:
    sels = [behave("sleep", "0.5") for _ in range(4)]
    order: list[str] = []

    async def turn(sel: ExecSelector) -> Selection:
        result = await sel.aselect(QUERY, CANDS)
        order.append("answered")
        return result

    with event_hooks(lambda e: order.append("spawned") if isinstance(e, ExecSpawned) else None):
        results = await asyncio.gather(*(turn(s) for s in sels))
    assert all(r.selected == ("alpha",) for r in results)
    assert order == ["spawned"] * 4 + ["answered"] * 4  # all four ran at once: none waited for another


async def test_worker_mode_aselect() -> None:
    with ExecSelector("w", PYTHON, [BEHAVE, "worker"], worker=True) as sel:
        answers = await asyncio.gather(*(sel.aselect(Query("x", k=k), CANDS) for k in (1, 2, 3)))
    assert [a.selected for a in answers] == [("alpha",), ("alpha", "beta"), ("alpha", "beta", "gamma")]
