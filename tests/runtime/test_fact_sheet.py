"""Reductions keep what removed messages stated: the history's fact sheet (issue 28, item 3).

The regression: facts the model (or a tool result) stated early were lost once reductions
dropped or cleared their messages (0.1 of them left after three reductions in
``bench/bench_prefix.py``); the user's own facts survived only because user messages are kept.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from shortlist.reduction._facts import FACTS_HEADER
from shortlist.runtime import Conversation, Pack, Tool
from shortlist.runtime._context import HistoryWindow

FILLER = "the plan balanced cost speed and risk while every milestone moved on schedule " * 10


def lookup_order(id: str) -> str:
    """Look up an order by id."""
    return "found"


def _turn(window: HistoryWindow, n: int, *, said: str = "", result: str = "") -> None:
    window.append_user({"role": "user", "content": f"question {n}: " + FILLER})
    if result:
        call = {"id": f"c{n}", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
        window.append({"role": "assistant", "content": None, "tool_calls": [call]})
        window.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"{result} {FILLER}"})
    window.append({"role": "assistant", "content": f"{said} {FILLER}".strip()})


def _run(window: HistoryWindow, turns: int, reductions: int) -> list[Any]:
    """Feed turns (facts stated in the first three) until ``reductions`` reductions happened."""
    outcomes = []
    facts = [("Your ticket number is T90412.", ""), ("", "The warehouse slot assigned is W55120."), ("", "")]
    for n in range(turns):
        said, result = facts[n] if n < len(facts) else ("", "")
        _turn(window, n, said=said, result=result)
        outcome = asyncio.run(window.reduce(goal=f"question {n}"))
        if outcome is not None and outcome.reduced:
            outcomes.append(outcome)
            if len(outcomes) == reductions:
                break
    assert len(outcomes) == reductions, "the history never passed its budget often enough"
    return outcomes


def test_model_and_tool_facts_survive_three_reductions() -> None:
    window = HistoryWindow(max_tokens=1500)
    outcomes = _run(window, 60, 3)
    text = json.dumps(window.messages)
    assert "T90412" in text and "W55120" in text
    # one sheet, at the start of the history, first part of the first (user) message
    first = window.messages[0]
    assert first["role"] == "user" and first["content"][0]["text"].startswith(FACTS_HEADER)
    assert text.count(FACTS_HEADER) == 1
    assert "- assistant: Your ticket number is T90412." in first["content"][0]["text"]
    assert "- tool: The warehouse slot assigned is W55120." in first["content"][0]["text"]
    assert all(o.kept_facts >= 2 for o in outcomes)
    # the sheet and the messages fit under the low-water mark together (60% of the budget)
    assert all(o.tokens_after is not None and o.tokens_after <= 900 for o in outcomes)


def test_replacing_the_history_forgets_the_sheet() -> None:
    window = HistoryWindow(max_tokens=1500)
    _run(window, 60, 1)
    assert window.facts is not None and window.facts.facts
    window.replace([{"role": "user", "content": "a new start"}])
    assert window.facts.facts == [] and window.facts.render() == ""


def test_without_the_sheet_the_facts_are_lost() -> None:
    window = HistoryWindow(max_tokens=1500, keep_facts=False)
    outcomes = _run(window, 60, 3)
    text = json.dumps(window.messages)
    assert "T90412" not in text and "W55120" not in text and FACTS_HEADER not in text
    assert all(o.kept_facts == 0 for o in outcomes)


def test_the_sheet_respects_a_tight_budget() -> None:
    window = HistoryWindow(max_tokens=400, low_water=1.0)
    window.append({"role": "assistant", "content": " ".join(f"Code K{1000 + i} is active." for i in range(60))})
    window.append_user({"role": "user", "content": "now " * 300})  # the current turn alone takes most of it
    outcome = asyncio.run(window.reduce(goal="now"))
    assert outcome is not None and outcome.reduced and outcome.tokens_after is not None
    assert outcome.tokens_after <= 400


def test_a_find_tools_result_is_not_mined_for_facts() -> None:
    window = HistoryWindow(max_tokens=300)
    call = {"id": "s1", "type": "function", "function": {"name": "find_tools", "arguments": "{}"}}
    window.append_user({"role": "user", "content": "find a tool"})
    window.append({"role": "assistant", "content": None, "tool_calls": [call]})
    window.append({"role": "tool", "tool_call_id": "s1", "content": '{"name": "get_v2", "version": "2.10.4"} ' * 30})
    window.append_user({"role": "user", "content": "next " * 100})
    outcome = asyncio.run(window.reduce(goal="next"))
    assert outcome is not None and outcome.reduced
    assert "2.10.4" not in json.dumps(window.messages)


def test_the_conversation_reports_the_kept_facts() -> None:
    requests: list[dict[str, Any]] = []

    def model(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(json.loads(json.dumps(req)))
        said = "Noted. Your booking reference is B31337. " if len(requests) == 1 else ""
        return {"role": "assistant", "content": said + FILLER}

    conv = Conversation(
        Pack(tools=[Tool.from_function(lookup_order)]), model=model, tool_selector=None, max_tokens=1200
    )
    reduced = []
    for n in range(30):
        report = conv.send(f"question {n}: {FILLER}").report
        if report.reduction and report.reduction["reduced"]:
            reduced.append(report)
    conv.close()
    assert len(reduced) >= 3
    assert all((r.reduction or {})["kept_facts"] >= 1 for r in reduced)
    events = [e for r in reduced for e in r.events if e["name"] == "runtime.history_reduced"]
    assert events and all(e["kept_facts"] >= 1 for e in events)
    assert "B31337" in json.dumps(requests[-1])  # still there after every reduction
    off = Conversation(Pack(), model=model, tool_selector=None, max_tokens=1200, keep_facts=False)
    assert off.window.facts is None
    off.close()


def _user_heavy(keep_facts: bool) -> HistoryWindow:
    """A history whose user messages fit the low-water mark but not half of it."""
    window = HistoryWindow(max_tokens=1600, low_water=0.5, keep_facts=keep_facts)
    for i in range(12):  # 12 user turns of ~30 tokens, each with a short answer
        window.append_user({"role": "user", "content": f"Turn {i}: please note order O{7000 + i} " + "detail " * 50})
        window.append({"role": "assistant", "content": "Noted. " + "ok " * 100})
    window.append_user({"role": "user", "content": "now what was my first order?"})
    return window


def test_the_users_messages_keep_their_place_only_up_to_their_share_with_a_sheet() -> None:
    from shortlist.runtime._context import USER_SHARE

    users = [m for m in _user_heavy(True).messages if m["role"] == "user"]
    assert len(users) == 13
    with_sheet = _user_heavy(True)
    outcome = asyncio.run(with_sheet.reduce(goal="now what was my first order?"))
    assert outcome is not None and outcome.reduced and USER_SHARE < 1
    kept = [m for m in with_sheet.messages if m["role"] == "user" and "please note order" in json.dumps(m)]
    assert len(kept) < 12  # past half the mark the oldest went, like any step
    assert "O7000" in json.dumps(with_sheet.messages)  # and the sheet kept what they stated
    without = _user_heavy(False)
    outcome = asyncio.run(without.reduce(goal="now what was my first order?"))
    assert outcome is not None and outcome.reduced
    kept = [m for m in without.messages if m["role"] == "user" and "please note order" in json.dumps(m)]
    assert len(kept) == 12  # no sheet: every user message stays while they fit the mark
