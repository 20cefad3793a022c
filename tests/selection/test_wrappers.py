"""Failure behaviour as wrappers around any selector: timeout, circuit breaker, fallback (issue 13.2)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from shortlist._config import parse_runtime_config, runtime_config_schema
from shortlist._config_sections import BreakerConfig
from shortlist._events import Event, SelectionFallback, add_event_hook, remove_event_hook
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import ConfigError, SelectorError
from shortlist.rankers._breaker import BreakerSelector, CircuitBreakerChanged
from shortlist.rankers._registry import SelectorRegistry, create_builtin_selector
from shortlist.rankers._timeout import TimeoutSelector
from shortlist.rankers._wrappers import FallbackSelector, SelectorFellBack, WrapperSelector
from shortlist.runtime import Conversation, Pack
from shortlist.selection._base import Selector
from shortlist.selection._facade import Shortlist
from shortlist.selection._narrowing import NarrowingPolicy, anarrow, narrow
from shortlist.testing import FailingSelector, StaticSelector

CANDS = (
    Candidate("get_weather", description="Get the weather forecast for a city."),
    Candidate("send_email", description="Send an email to a recipient."),
    Candidate("create_invoice", description="Create an invoice for a customer."),
    Candidate("book_flight", description="Book a flight between two airports."),
)
Q = Query("what is the weather forecast in Paris", "tool", 1)


def bm25() -> Selector:
    return create_builtin_selector("bm25")


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()  # let a hung call's thread finish


class Hung(Selector):
    """Blocks until ``gate`` is set (a hung reranker), then answers ``send_email``."""

    name = "hung"

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.gate.wait(30)
        return Selection(("send_email",))


class Flaky(Selector):
    """Fails while ``fail`` is set; counts its calls; ``entered`` is set when a call starts."""

    name = "flaky"

    def __init__(self) -> None:
        self.fail = True
        self.calls = 0
        self.entered = threading.Event()

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.calls += 1
        self.entered.set()
        if self.fail:
            raise SelectorError("down", selector=self.name)
        return Selection(("get_weather",))


# --- fallback --------------------------------------------------------------------------


def test_a_failing_reranker_falls_back_to_bm25_not_to_all_eligible() -> None:
    events: list[Event] = []
    chain = FallbackSelector(FailingSelector(SelectorError("rerank endpoint down"), name="rerank"), bm25())
    turn = narrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.fallback is None
    assert turn.ids == ("get_weather",)  # bm25's ranking, not the four eligible tools
    assert turn.selector == "rerank"
    hops = [e for e in events if isinstance(e, SelectorFellBack)]
    assert [(h.selector, h.fallback, h.reason, h.kind) for h in hops] == [("rerank", "bm25", "error", "tool")]
    assert "rerank endpoint down" in hops[0].error
    assert not [e for e in events if isinstance(e, SelectionFallback)]


async def test_the_async_path_falls_back_too() -> None:
    events: list[Event] = []
    chain = FallbackSelector(FailingSelector(name="rerank"), bm25())
    turn = await anarrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.fallback is None and turn.ids == ("get_weather",)
    assert [e.reason for e in events if isinstance(e, SelectorFellBack)] == ["error"]


def test_an_empty_or_unknown_answer_falls_back_but_an_abstention_does_not() -> None:
    for primary, reason in ((StaticSelector([]), "empty"), (StaticSelector(["nope"]), "empty")):
        events: list[Event] = []
        turn = narrow(FallbackSelector(primary, bm25()), Q, CANDS, hooks=[events.append])
        assert turn.ids == ("get_weather",)
        assert [e.reason for e in events if isinstance(e, SelectorFellBack)] == [reason]

    class Unknown(Selector):
        def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
            return Selection(("not_a_tool",))

    events = []
    turn = narrow(FallbackSelector(Unknown(), bm25()), Q, CANDS, hooks=[events.append])
    assert turn.ids == ("get_weather",)
    assert [e.reason for e in events if isinstance(e, SelectorFellBack)] == ["unknown_ids"]

    abstaining = StaticSelector([], abstain=True)
    fallback = StaticSelector(["send_email"], name="other")
    turn = narrow(FallbackSelector(abstaining, fallback), Q, CANDS, NarrowingPolicy(on_abstain="pins"))
    assert turn.abstained and turn.ids == () and fallback.calls == []


def test_when_the_whole_chain_fails_narrow_includes_all_eligible() -> None:
    events: list[Event] = []
    chain = FallbackSelector(FailingSelector(name="rerank"), FailingSelector(RuntimeError("bm25 broke"), name="bm25"))
    turn = narrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.fallback == "error" and len(turn.ids) == len(CANDS)
    assert "bm25 broke" in turn.reason
    assert [type(e).__name__ for e in events] == ["SelectorFellBack", "SelectionFallback"]


def test_nested_fallbacks_report_every_hop_in_order() -> None:
    events: list[Event] = []
    inner = FallbackSelector(FailingSelector(name="embedding"), bm25())
    chain = FallbackSelector(FailingSelector(name="rerank"), inner)
    turn = narrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.ids == ("get_weather",)
    hops = [(e.selector, e.fallback) for e in events if isinstance(e, SelectorFellBack)]
    assert hops == [("rerank", "embedding"), ("embedding", "bm25")]


# --- timeout ---------------------------------------------------------------------------


def test_a_hanging_primary_times_out_to_the_fallback(gate: threading.Event) -> None:
    events: list[Event] = []
    chain = FallbackSelector(TimeoutSelector(Hung(gate), 0.05), bm25())
    turn = narrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.fallback is None and turn.ids == ("get_weather",)
    hops = [e for e in events if isinstance(e, SelectorFellBack)]
    assert [(h.selector, h.reason) for h in hops] == [("hung", "timeout")]


async def test_a_hanging_primary_times_out_to_the_fallback_on_the_async_path(gate: threading.Event) -> None:
    events: list[Event] = []
    chain = FallbackSelector(TimeoutSelector(Hung(gate), 0.05), bm25())
    turn = await anarrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.fallback is None and turn.ids == ("get_weather",)
    assert [e.reason for e in events if isinstance(e, SelectorFellBack)] == ["timeout"]


def test_events_inside_a_deadline_reach_the_callers_hooks() -> None:
    """The wrapped chain runs on a pool thread; the call's hooks still see its hops."""
    events: list[Event] = []
    chain = TimeoutSelector(FallbackSelector(FailingSelector(name="rerank"), bm25()), 5.0)
    turn = narrow(chain, Q, CANDS, hooks=[events.append])
    assert turn.ids == ("get_weather",)
    assert [e.selector for e in events if isinstance(e, SelectorFellBack)] == ["rerank"]


def test_a_timeout_alone_is_the_turns_timeout(gate: threading.Event) -> None:
    turn = narrow(TimeoutSelector(Hung(gate), 0.05), Q, CANDS)
    assert turn.fallback == "timeout" and len(turn.ids) == len(CANDS)


# --- breaker ---------------------------------------------------------------------------


def _wait_for_probe(breaker: BreakerSelector) -> None:
    deadline = time.monotonic() + 5
    while breaker.probing and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not breaker.probing


def test_the_breaker_opens_refuses_without_calling_probes_in_the_background_and_closes() -> None:
    inner = Flaky()
    changes: list[CircuitBreakerChanged] = []
    hook = lambda e: changes.append(e) if isinstance(e, CircuitBreakerChanged) else None  # noqa: E731
    breaker = BreakerSelector(inner, failures=2, cooldown_s=0.05)
    add_event_hook(hook)  # the probe reports from its own thread: a global hook sees it
    try:
        for _ in range(2):
            with pytest.raises(SelectorError, match="down"):
                breaker.select(Q, CANDS)
        assert breaker.is_open
        assert [(c.selector, c.state, c.failures) for c in changes] == [("flaky", "open", 2)]
        for _ in range(3):  # refused without reaching the selector
            with pytest.raises(SelectorError, match="circuit open"):
                breaker.select(Q, CANDS)
        assert inner.calls == 2
        inner.fail = False
        inner.entered.clear()
        deadline = time.monotonic() + 5
        while not inner.entered.is_set() and time.monotonic() < deadline:  # after the cooldown: one probe
            with pytest.raises(SelectorError, match="circuit open"):  # the call that starts it is refused too
                breaker.select(Q, CANDS)
            time.sleep(0.01)
        _wait_for_probe(breaker)
    finally:
        remove_event_hook(hook)
    assert inner.calls == 3  # two failures and one probe
    assert [c.state for c in changes] == ["open", "closed"]
    assert not breaker.is_open
    assert breaker.select(Q, CANDS).selected == ("get_weather",)


def test_an_open_breaker_is_answered_by_the_fallback() -> None:
    inner = Flaky()
    events: list[Event] = []
    chain = FallbackSelector(BreakerSelector(inner, failures=1, cooldown_s=60), bm25())
    for _ in range(3):
        turn = narrow(chain, Q, CANDS, hooks=[events.append])
        assert turn.fallback is None and turn.ids == ("get_weather",)
    assert inner.calls == 1
    hops = [e.error for e in events if isinstance(e, SelectorFellBack)]
    assert "down" in hops[0] and all("circuit open" in h for h in hops[1:]) and len(hops) == 3
    assert [e.state for e in events if isinstance(e, CircuitBreakerChanged)] == ["open"]


def test_the_service_breaker_is_the_library_one() -> None:
    from shortlist.server._breaker import CircuitBreakerChanged as ServiceChanged
    from shortlist.server._breaker import CircuitBreakerSelector

    breaker = CircuitBreakerSelector(Flaky(), threshold=2, cooldown_s=1.0)
    assert isinstance(breaker, BreakerSelector) and breaker.threshold == breaker.failures == 2
    assert ServiceChanged is CircuitBreakerChanged and CircuitBreakerChanged.name == "breaker.changed"


# --- the wrapper contract --------------------------------------------------------------


def test_wrappers_delegate_init_and_close_and_keep_the_name() -> None:
    class Tracked(StaticSelector):
        def __init__(self, name: str) -> None:
            super().__init__(["get_weather"], name=name)
            self.inits = 0
            self.closes = 0

        def init(self, ctx: object) -> None:
            self.inits += 1

        def close(self) -> None:
            self.closes += 1

    primary, fallback = Tracked("primary"), Tracked("fallback")
    chain = FallbackSelector(BreakerSelector(TimeoutSelector(primary, 1.0)), fallback)
    assert chain.name == "primary" and isinstance(chain, WrapperSelector)
    registry = SelectorRegistry(selectors={"chain": chain})
    assert registry.get("chain") is chain
    registry.get("chain")
    registry.close()
    assert (primary.inits, primary.closes, fallback.inits, fallback.closes) == (1, 1, 1, 1)


def test_invalid_wrapper_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        TimeoutSelector(bm25(), 0)
    with pytest.raises(ValueError, match="failures"):
        BreakerSelector(bm25(), failures=0)
    with pytest.raises(TypeError, match="Selector"):
        FallbackSelector(bm25(), object())  # type: ignore[arg-type]


# --- runtime.yaml ----------------------------------------------------------------------

FAILING_RERANK = f"""
spec:
  selectors:
    rerank:
      command: {sys.executable}
      args: ["-c", "import sys; sys.exit(3)"]
      fallback: cheap
      breaker: {{failures: 2, cooldown_ms: 60000}}
    cheap:
      type: bm25
      options: {{top_k: 3}}
    fast:
      type: lexical
      timeout_ms: 500
      fallback: bm25
  tool_selector: rerank
  skills: {{selector: cheap}}
"""


def test_config_round_trip_keeps_fallback_and_breaker() -> None:
    config = parse_runtime_config(yaml.safe_load(FAILING_RERANK))
    rerank = config.spec.selectors["rerank"]
    assert rerank is not None and rerank.fallback == "cheap"
    assert rerank.breaker == BreakerConfig(failures=2, cooldown_ms=60000)
    assert rerank.breaker.cooldown_s == 60.0
    dumped = config.model_dump(by_alias=True, exclude_none=True)
    assert parse_runtime_config(yaml.safe_load(yaml.safe_dump(dumped))) == config
    defaults = BreakerConfig()
    assert (defaults.failures, defaults.cooldown_ms) == (3, 5000)


def test_the_json_schema_describes_fallback_and_breaker() -> None:
    schema = runtime_config_schema()
    props = schema["$defs"]["SelectorConfig"]["properties"]
    assert "fallback" in props and "breaker" in props
    breaker = schema["$defs"]["BreakerConfig"]
    assert set(breaker["properties"]) == {"failures", "cooldown_ms"}
    assert breaker["additionalProperties"] is False


def _spec(selectors: str) -> dict[str, object]:
    loaded = yaml.safe_load(f"spec:\n  selectors:\n{selectors}")
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(
    ("selectors", "message", "path"),
    [
        ("    a: {type: bm25, fallback: a}\n", "fallback cycle a -> a", "spec.selectors.a.fallback"),
        (
            "    a: {type: bm25, fallback: b}\n"
            "    b: {type: lexical, fallback: c}\n"
            "    c: {type: overlap, fallback: a}\n",
            "fallback cycle a -> b -> c -> a",
            "spec.selectors.a.fallback",
        ),
        ("    a: {type: hybrid, fallback: bm52}\n", "did you mean 'bm25'?", "spec.selectors.a.fallback"),
        ("    a: {type: hybrid, fallback: cheep}\n    cheap: {type: bm25}\n", "did you mean 'cheap'?", None),
        ("    a: {type: bm25, breaker: {failures: 0}}\n", "greater than or equal to 1", None),
        ("    a: {type: bm25, breaker: {failure: 2}}\n", "unknown key 'failure'", None),
        ("    a: {type: bm25, fallback: ' '}\n", "fallback must name a selector", None),
    ],
)
def test_bad_fallbacks_and_breakers_are_refused_at_load(selectors: str, message: str, path: str | None) -> None:
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")) as info:
        parse_runtime_config(_spec(selectors), source="runtime.yaml")
    assert "runtime.yaml" in str(info.value)
    if path:
        assert path in str(info.value)


def test_a_fallback_may_end_on_a_selector_without_one() -> None:
    config = parse_runtime_config(_spec("    a: {type: hybrid, fallback: b}\n    b: {type: lexical, fallback: bm25}\n"))
    assert config.spec.active_selectors["b"].fallback == "bm25"


def test_the_registry_builds_the_chain_from_config(tmp_path: Path) -> None:
    path = tmp_path / "runtime.yaml"
    path.write_text(FAILING_RERANK)
    with Shortlist(CANDS, config=path) as sl:
        rerank = sl.selector_for("tool")
        assert isinstance(rerank, FallbackSelector) and rerank.name == "rerank"
        assert isinstance(rerank.primary, BreakerSelector) and rerank.primary.failures == 2
        assert not isinstance(rerank.primary.wrapped, TimeoutSelector)  # the process enforces its own timeout_ms
        # the fallback is the registry's own "cheap", built and initialised once, shared with the skill binding
        assert isinstance(rerank.fallback, WrapperSelector) and rerank.fallback.wrapped is sl.registry.get("cheap")
        assert sl.registry.get("cheap") is sl.registry.skills_selector()
        fast = sl.registry.get("fast")
        assert isinstance(fast, FallbackSelector) and isinstance(fast.primary, TimeoutSelector)
        assert fast.primary.timeout_s == 0.5 and fast.fallback.name == "bm25"
        plain = sl.registry.get("bm25")
        assert not isinstance(plain, WrapperSelector)


def test_shortlist_falls_back_from_a_failing_external_reranker_to_bm25(tmp_path: Path) -> None:
    path = tmp_path / "runtime.yaml"
    path.write_text(FAILING_RERANK)
    events: list[Event] = []
    with Shortlist(CANDS, config=path, on_event=events.append) as sl:
        for _ in range(3):  # two failures open the breaker; the third turn is refused at once
            turn = sl.select("what is the weather forecast in Paris")
            assert turn.fallback is None and turn.selector == "rerank"
            assert turn.ids[0] == "get_weather" and len(turn.ids) < len(CANDS)
    hops = [e for e in events if isinstance(e, SelectorFellBack)]
    assert [(h.selector, h.fallback) for h in hops] == [("rerank", "cheap")] * 3
    assert "circuit open" in hops[2].error
    assert [e.state for e in events if isinstance(e, CircuitBreakerChanged)] == ["open"]


def test_the_runtime_conversation_gets_the_wrappers_from_config(tmp_path: Path) -> None:
    path = tmp_path / "runtime.yaml"
    path.write_text(FAILING_RERANK)
    conv = Conversation(Pack(), model=lambda r: {}, config=path)
    try:
        selector = conv.tool_binding.selector_for("tool")
        assert isinstance(selector, FallbackSelector) and isinstance(selector.primary, BreakerSelector)
        events: list[Event] = []
        turn = conv.tool_binding.select("what is the weather forecast in Paris", CANDS, hooks=[events.append])
        assert turn.fallback is None and turn.ids[0] == "get_weather"
        assert [e.fallback for e in events if isinstance(e, SelectorFellBack)] == ["cheap"]
    finally:
        conv.close()


def test_the_service_adds_its_default_breaker_only_where_none_is_configured() -> None:
    from shortlist.server._settings import ServerSettings
    from shortlist.server._state import _with_default_breakers

    config = parse_runtime_config(
        yaml.safe_load(
            FAILING_RERANK.replace(
                "  tool_selector:",
                f"    other:\n      command: {sys.executable}\n      args: ['-c', 'pass']\n    unused: null\n"
                "  tool_selector:",
            )
        )
    )
    guarded = _with_default_breakers(config, ServerSettings(breaker_threshold=4, breaker_cooldown_s=0.5))
    selectors = guarded.spec.active_selectors
    assert selectors["rerank"].breaker == BreakerConfig(failures=2, cooldown_ms=60000)  # its own
    assert selectors["other"].breaker == BreakerConfig(failures=4, cooldown_ms=500)
    assert selectors["cheap"].breaker is None  # in-process rankers get no default breaker
    assert _with_default_breakers(config, ServerSettings(breaker_threshold=0)) is config
