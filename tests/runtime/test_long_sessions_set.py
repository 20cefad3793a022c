"""The long-session development set (``bench/bench_long_sessions.py``): deterministic, needles as documented."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from shortlist.offer import Prices

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_long_sessions.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_long_sessions", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_set_is_deterministic_and_holds_its_needles(bench: ModuleType) -> None:
    one, again, other = bench.generate(7, 30), bench.generate(7, 30), bench.generate(8, 30)
    assert json.dumps(one) == json.dumps(again) and json.dumps(one) != json.dumps(other)
    assert len(one["turns"]) == 30
    needles = one["needles"]
    assert [n["stated_by"] for n in needles] == ["user"] * 3 + ["assistant"] * 3 + ["tool"] * 3
    for n in needles:
        turn = one["turns"][n["turn"]]
        where = {"user": "user", "assistant": "answer", "tool": "tool_result"}[n["stated_by"]]
        assert n["value"] in turn[where]
        assert 20 <= n["asked_at"] < 30  # asked in the last third
    # an id appears where it is stated and nowhere else; the filler holds no digits
    text = json.dumps(one["turns"])
    assert all(text.count(n["value"]) == 1 for n in needles)
    assert set(re.findall(r"[A-Z]\d{5}", text)) == {n["value"] for n in needles}


def test_too_short_a_trace_is_refused(bench: ModuleType) -> None:
    with pytest.raises(SystemExit, match="at least 12"):
        bench.generate(1, 5)


def test_requests_are_priced_by_their_shared_prefix(bench: ModuleType) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    a = {"role": "user", "content": "hello there"}
    b = {"role": "assistant", "content": "general kenobi"}
    system = {"role": "system", "content": "be brief"}
    first = {"tools": tools, "messages": [system, a]}
    second = {"tools": tools, "messages": [system, a, b]}
    prices = Prices(1.25, 0.1)
    alone = bench.request_cost([first], "openai", prices)
    both = bench.request_cost([first, second], "openai", prices)
    extra = bench.request_cost([second], "openai", prices) - alone  # b's tokens at the write price
    # the second request reads the whole first one and writes only b
    assert both == pytest.approx(alone + alone / 1.25 * 0.1 + extra)
    broken = {"tools": tools, "messages": [{"role": "system", "content": "be long"}, a, b]}
    assert bench.request_cost([first, broken], "openai", prices) > both  # another system prompt: re-written
