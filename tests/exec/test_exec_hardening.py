"""Hardening of the exec area (issue 12): worker desync, request ids, deep JSON, setsid escapees, reason cap.

Every test runs real processes: the hostile selectors of ``hostile_selector.py``, or the
``shortlist exec-selector`` CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_helpers import PYTHON, process_gone

from shortlist._events import Event, SelectionFallback
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorProtocolError, SelectorTimeout
from shortlist.exec._protocol import decode_response, parse_request
from shortlist.rankers._exec_client import ExecSelector
from shortlist.rankers._registry import DEFAULT_SELECTOR, create_builtin_selector
from shortlist.selection._base import FunctionSelector
from shortlist.selection._narrowing import narrow

HOSTILE = str(Path(__file__).resolve().parent / "hostile_selector.py")
CLI = [PYTHON, "-m", "shortlist.cli", "exec-selector"]
CANDS = [Candidate("a"), Candidate("b"), Candidate("c")]


def hostile(*args: str, worker: bool = False, timeout_ms: int = 5000) -> ExecSelector:
    return ExecSelector("hostile", PYTHON, [HOSTILE, *args], worker=worker, timeout_ms=timeout_ms)


def named(events: list[Event], name: str) -> list[Event]:
    return [e for e in events if e.name == name]


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- 1. worker desync: every answer must carry its request's id ---------------------------


@pytest.mark.slow  # exec selector processes
def test_stray_id_less_line_is_a_protocol_error_not_the_next_answer(events: list[Event]) -> None:
    with hostile("worker_stray", "stray", worker=True) as sel:
        assert sel.select(Query("fine", k=1), CANDS).selected == ("a",)
        with pytest.raises(SelectorProtocolError, match="id"):
            sel.select(Query("stray line first", k=2), CANDS)
        # the replaced worker answers each request with its own answer: no off-by-one
        assert sel.select(Query("fine again", k=2), CANDS).selected == ("a", "b")
        assert sel.select(Query("and again", k=3), CANDS).selected == ("a", "b", "c")
    (killed,) = named(events, "exec.killed")
    assert killed.reason == "protocol_error"  # type: ignore[attr-defined]
    (restarted,) = named(events, "exec.worker_restarted")
    assert restarted.reason == "protocol_error"  # type: ignore[attr-defined]


@pytest.mark.slow  # exec selector processes
def test_stray_line_turn_falls_back_like_any_selector_error(events: list[Event]) -> None:
    with hostile("worker_stray", "stray", worker=True) as sel:
        result = narrow(sel, Query("stray line first", k=1), CANDS)
    assert result.fallback == "error"
    assert list(result.ids) == ["a", "b", "c"]
    (fallback,) = [e for e in events if isinstance(e, SelectionFallback)]
    assert "SelectorProtocolError" in fallback.error and "id" in fallback.error


@pytest.mark.slow  # exec selector processes
def test_a_worker_that_never_echoes_the_id_is_refused(events: list[Event]) -> None:
    with hostile("worker_id", "none", worker=True) as sel:
        for _ in range(2):
            with pytest.raises(SelectorProtocolError, match="no id"):
                sel.select(Query("x", k=1), CANDS)
    assert len(named(events, "exec.killed")) == 2


# --- 3. id rules: integers the client chose; a bool is not an id; a decimal string echo is ---


@pytest.mark.slow  # exec selector processes
def test_true_is_not_the_id_1(events: list[Event]) -> None:
    with hostile("worker_id", "true", worker=True) as sel, pytest.raises(SelectorProtocolError, match="id"):
        sel.select(Query("x", k=1), CANDS)  # the first request's id is 1
    assert [e.reason for e in named(events, "exec.killed")] == ["protocol_error"]  # type: ignore[attr-defined]


@pytest.mark.slow  # exec selector processes
@pytest.mark.parametrize("kind", ["padded", "float"])
def test_other_look_alike_ids_are_protocol_errors(kind: str) -> None:
    with hostile("worker_id", kind, worker=True) as sel, pytest.raises(SelectorProtocolError, match="id"):
        sel.select(Query("x", k=1), CANDS)


@pytest.mark.slow  # exec selector processes
def test_a_decimal_string_echo_of_the_id_is_accepted_without_restarts(events: list[Event]) -> None:
    with hostile("worker_id", "str", worker=True) as sel:
        for k in (1, 2, 3, 1):
            assert sel.select(Query("x", k=k), CANDS).selected == ("a", "b", "c")[:k]
    assert sum(e.name == "exec.spawned" for e in events) == 1
    assert not named(events, "exec.worker_restarted") and not named(events, "exec.killed")


def test_wire_response_id_is_strict() -> None:
    with pytest.raises(SelectorProtocolError, match="id"):
        decode_response('{"id": true, "selected": ["a"]}')
    with pytest.raises(SelectorProtocolError, match="id"):
        decode_response('{"id": 1.0, "selected": ["a"]}')
    assert decode_response('{"id": 7, "selected": ["a"]}')[1].id == 7
    assert decode_response('{"id": "7", "selected": ["a"]}')[1].id == "7"
    with pytest.raises(ValueError, match="id"):
        parse_request('{"id": true, "query": {"text": "x"}}')


# --- 2. deeply nested JSON ----------------------------------------------------------------


def _request(rid: int, text: str, metadata: str = "{}", *, id_last: bool = False) -> str:
    cands = ",".join(f'{{"id": "{c}", "description": "{c} tool", "metadata": {metadata}}}' for c in ("a", "b"))
    body = f'"query": {{"text": "{text}", "k": 1}}, "candidates": [{cands}]'
    return f'{{{body}, "id": {rid}}}' if id_last else f'{{"id": {rid}, {body}}}'


@pytest.mark.slow  # exec selector processes
def test_exec_selector_worker_answers_a_deep_line_in_band_and_goes_on() -> None:
    lines = [
        _request(1, "a tool"),
        _request(2, "a tool", f'{{"m": {deep(100_000)}}}'),
        _request(3, "b tool"),
        _request(4, "a tool", f'{{"m": {deep(100_000)}}}', id_last=True),
        _request(5, "b tool", f'{{"m": {deep(500)}}}'),
        _request(6, "b tool"),
    ]
    proc = subprocess.run(
        [*CLI, "--worker"], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o.get("id") for o in out] == [1, 2, 3, 4, 5, 6]
    default = create_builtin_selector(DEFAULT_SELECTOR)  # the served selector, asked in-process
    cands = [Candidate(c, description=f"{c} tool") for c in ("a", "b")]
    for answered, text in ((out[0], "a tool"), (out[2], "b tool"), (out[5], "b tool")):
        assert tuple(answered["selected"]) == default.select(Query(text, k=1), cands).selected
    for bad in (out[1], out[3], out[4]):
        assert "selected" not in bad and "deeper than" in bad["error"]


def test_parse_request_refuses_deep_documents_with_a_clear_value_error() -> None:
    for depth in (500, 100_000):
        with pytest.raises(ValueError, match="deeper than"):
            parse_request(_request(1, "x", f'{{"m": {deep(depth)}}}'))
    nested_ok = json.loads(_request(1, "x", f'{{"m": {deep(20)}}}'))
    assert parse_request(nested_ok).candidates[0].metadata["m"]  # moderate nesting is fine
    deep_mapping: list[object] = []
    node = deep_mapping
    for _ in range(500):
        child: list[object] = []
        node.append(child)
        node = child
    with pytest.raises(ValueError, match="deeper than"):
        parse_request({"query": {"text": "x"}, "candidates": [{"id": "a", "metadata": {"m": deep_mapping}}]})


def test_a_deep_response_is_a_protocol_error() -> None:
    with pytest.raises(SelectorProtocolError, match="deeper than"):
        decode_response('{"selected": ["a"], "extra": ' + deep(100_000) + "}")


# --- 4. a grandchild that calls setsid does not escape the kill ---------------------------


@contextlib.contextmanager
def reaped(pidfile: Path) -> Iterator[None]:
    """Make sure a leaked grandchild never outlives the test (it would on the unfixed code)."""
    try:
        yield
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


def _escapee(pidfile: Path) -> int:
    pid = int(pidfile.read_text())
    assert os.getsid(pid) == pid  # it really left the selector's session and process group
    return pid


@pytest.mark.slow  # exec selector processes
def test_timeout_kills_a_setsid_grandchild_spawn_per_call(tmp_path: Path, events: list[Event]) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with reaped(pidfile):
        sel = hostile("setsid", str(pidfile), timeout_ms=1500)
        with pytest.raises(SelectorTimeout):
            sel.select(Query("x"), CANDS)
        assert pidfile.exists()
        assert process_gone(int(pidfile.read_text()))
    (killed,) = named(events, "exec.descendants_killed")
    assert int(pidfile.read_text()) in killed.pids  # type: ignore[attr-defined]


@pytest.mark.slow  # exec selector processes
def test_timeout_kills_a_setsid_grandchild_async(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with reaped(pidfile):
        sel = hostile("setsid", str(pidfile), timeout_ms=1500)
        with pytest.raises(SelectorTimeout):
            asyncio.run(sel.aselect(Query("x"), CANDS))
        assert process_gone(int(pidfile.read_text()))


@pytest.mark.slow  # exec selector processes
def test_worker_timeout_and_close_kill_setsid_grandchildren(tmp_path: Path, events: list[Event]) -> None:
    first, second = tmp_path / "first.pid", tmp_path / "second.pid"
    with reaped(first), reaped(second):
        sel = hostile("worker_setsid", str(first), worker=True, timeout_ms=1500)
        assert sel.select(Query("x", k=1), CANDS).selected == ("a",)
        escapee = _escapee(first)
        with pytest.raises(SelectorTimeout):
            sel.select(Query("hang now", k=1), CANDS)
        assert process_gone(escapee)
        sel.args = (HOSTILE, "worker_setsid", str(second))
        assert sel.select(Query("x", k=1), CANDS).selected == ("a",)
        escapee = _escapee(second)
        sel.close()
        assert process_gone(escapee)
    assert len(named(events, "exec.descendants_killed")) == 2


# --- 5. the reason is capped --------------------------------------------------------------


@pytest.mark.slow  # exec selector processes
def test_a_huge_exec_reason_is_truncated_with_an_event(events: list[Event]) -> None:
    from shortlist._types import MAX_REASON_CHARS, REASON_TRUNCATED_MARKER

    sel = hostile("reason", str(3 * 1024 * 1024))
    selection = sel.select(Query("x"), CANDS)
    assert selection.selected == ("a",)
    assert len(selection.reason) == MAX_REASON_CHARS
    assert selection.reason.endswith(REASON_TRUNCATED_MARKER) and selection.reason.startswith("rrrr")
    (truncated,) = named(events, "exec.reason_truncated")
    assert truncated.selector == "hostile" and truncated.chars == 3 * 1024 * 1024  # type: ignore[attr-defined]
    assert not named(events, "selection.reason_truncated")  # capped once, at the protocol boundary


@pytest.mark.slow  # exec selector processes
def test_a_short_reason_is_untouched(events: list[Event]) -> None:
    assert hostile("reason", "40").select(Query("x"), CANDS).reason == "r" * 40
    assert not named(events, "exec.reason_truncated")


def test_in_process_selections_cannot_carry_an_unbounded_reason(events: list[Event]) -> None:
    from shortlist._types import MAX_REASON_CHARS, REASON_TRUNCATED_MARKER

    huge = "z" * (3 * 1024 * 1024)
    assert len(Selection(("a",), reason=huge).reason) == MAX_REASON_CHARS
    ranker = FunctionSelector(lambda q, c: Selection(("b",), reason=huge))
    result = narrow(ranker, Query("x"), CANDS)
    assert list(result.ids) == ["b"]
    assert len(result.reason) == MAX_REASON_CHARS and result.reason.endswith(REASON_TRUNCATED_MARKER)
    assert named(events, "selection.reason_truncated")
    exact = "y" * MAX_REASON_CHARS
    assert Selection(reason=exact).reason == exact
