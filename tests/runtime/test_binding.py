"""The one binding layer the runtime uses: facade siblings, the live-tool pin policy, wildcard expansion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shortlist._config import RuntimeConfig
from shortlist.feedback import FeedbackStore
from shortlist.runtime import Conversation, Pack, Tool
from shortlist.selection._base import FunctionSelector
from shortlist.selection._facade import Shortlist
from shortlist.selection._narrowing import NarrowingPolicy, PinPolicy, expand_tool_patterns, live_tool_policy


def test_live_tool_policy_unpins_mcp_and_keeps_wildcards() -> None:
    base = NarrowingPolicy(pins=PinPolicy(namespaces=("mcp", "memory"), always_include=("x",), pin_wildcards=False))
    policy = live_tool_policy(base)
    assert policy.pins.namespaces == ("memory",) and policy.pins.always_include == ("x",)
    assert policy.pins.is_pinned("mcp__srv__*") and not policy.pins.is_pinned("mcp__srv__tool")


def test_expand_tool_patterns_keeps_entry_order_and_drops_unknown_names() -> None:
    tools = ["mcp__t__b", "send", "mcp__t__a", "other"]
    assert expand_tool_patterns(["send", "mcp__t__*", "missing", "send"], tools) == ["send", "mcp__t__a", "mcp__t__b"]


def test_derive_shares_the_registry_and_inherits_the_selector() -> None:
    sel = FunctionSelector(lambda q, c: [], name="mine")
    parent = Shortlist(selector=sel)
    twin = parent.derive(policy=parent.tool_policy())
    skills = parent.derive(selector=None, kind="skill")
    assert twin.registry is parent.registry and twin.selector_for("tool") is sel
    assert skills.selector_for("skill") is None and skills.kind == "skill"
    twin.close()  # a sibling closes nothing of its parent's
    parent.close()


def test_conversation_binds_through_one_facade() -> None:
    sel = FunctionSelector(lambda q, c: [], name="mine")
    conv = Conversation(Pack(), model=lambda r: {}, tool_selector=sel, skills_selector=None)
    assert conv.tool_binding.registry is conv.shortlist.registry is conv.skill_binding.registry
    assert conv.tool_binding.selector_for("tool") is sel and conv.skill_binding.selector_for("skill") is None
    assert "mcp" not in conv.tool_binding.policy.pins.namespaces
    conv.close()


def test_a_packs_feedback_log_is_the_usage_examples_it_ranks_with(tmp_path: Path) -> None:
    """What the runtime logs (a turn's message and the tools it used) ranks the next conversations:
    "ignite my vehicle" shares no word with ``start_engine``'s description, only with its logged turn."""

    def start_engine() -> str:
        """Start the engine of the car."""
        return "started"

    def get_weather(city: str) -> str:
        """Get the weather forecast for a city."""
        return "sunny"

    tools = [Tool.from_function(f) for f in (start_engine, get_weather)]
    log = FeedbackStore(tmp_path / "feedback.db")
    log.record("ignite my vehicle", used=["start_engine"], kind="tool")

    def prefetched(pack: Pack, **options: Any) -> tuple[str, ...]:
        conv = Conversation(pack, model=lambda r: {}, tool_selector="bm25", skills_selector=None, **options)
        try:
            return conv.session.offer("ignite my vehicle", candidates=conv._tool_candidates()).prefetched
        finally:
            conv.close()

    assert prefetched(Pack(tools=tools)) == ()  # no log: BM25 finds no word of the message
    assert prefetched(Pack(tools=tools, feedback=log))[:1] == ("start_engine",)
    other = FeedbackStore(tmp_path / "curated.db")  # the config's own examples log wins over the pack's
    config = RuntimeConfig.model_validate({"spec": {"selection": {"examples": str(tmp_path / "curated.db")}}})
    assert prefetched(Pack(tools=tools, feedback=log), config=config) == ()
    other.close()
    log.close()


def test_a_conversation_learns_co_usage_on_top_of_the_log_it_ranks_with(tmp_path: Path) -> None:
    """One home for the log: the conversation's companions come from the log its ranking reads (the
    pack's, or the config's ``selection.examples``), and what it learns stays its own."""
    packs_log = FeedbackStore(tmp_path / "feedback.db")
    packs_log.record("drive off", used=["start_engine", "release_brake"])
    curated = FeedbackStore(tmp_path / "curated.db")
    curated.record("drive off", used=["start_engine", "check_mirrors"])
    config = RuntimeConfig.model_validate({"spec": {"selection": {"examples": str(tmp_path / "curated.db")}}})

    def companions(pack: Pack, **options: Any) -> list[str]:
        conv = Conversation(pack, model=lambda r: {}, tool_selector="bm25", skills_selector=None, **options)
        try:
            table = conv.session.co_usage
            if table is None:
                return []
            conv.session.record_calls(["start_engine", "honk"])  # taught to this conversation only
            return table.companions(["start_engine"])
        finally:
            conv.close()

    assert companions(Pack()) == []  # no log: nothing to layer on
    assert companions(Pack(feedback=packs_log)) == ["honk", "release_brake"]
    assert companions(Pack(feedback=packs_log), config=config) == ["check_mirrors", "honk"]
    assert packs_log.co_usage().companions(["start_engine"]) == ["release_brake"]  # the shared log's unchanged
    packs_log.close()
    curated.close()


def test_a_recorded_turn_is_indexed_before_the_next_turn_needs_it(tmp_path: Path) -> None:
    """The conversation writes each turn to its pack's log, then asks for the new examples' index at
    once (on a thread): the next turn ranks exactly what that refresh prepared, with the new example,
    instead of building the index itself."""
    import threading

    from shortlist._events import Event
    from shortlist._types import Candidate, Query, Selection
    from shortlist.selection._base import Selector
    from shortlist.selection._refresh import ExamplesRefreshed

    def get_weather(city: str) -> str:
        """Get the weather forecast for a city."""
        return "sunny"

    def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    class Recording(Selector):
        name = "recording"

        def __init__(self) -> None:
            self.prepared: list[tuple[Candidate, ...]] = []
            self.seen: list[tuple[Candidate, ...]] = []
            self.lock = threading.Lock()

        def prepare(self, candidates: Any) -> None:
            with self.lock:
                self.prepared.append(tuple(candidates))

        def select(self, query: Query, candidates: Any) -> Selection:
            self.seen.append(tuple(candidates))
            return Selection(("get_weather", "send_email"), scores=(1.0, 0.5))

    replies = iter(
        [
            {"content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"content": [{"type": "text", "text": "sunny"}]},
            {"content": [{"type": "text", "text": "ok"}]},
        ]
    )
    log = FeedbackStore(tmp_path / "feedback.db")
    sel = Recording()
    events: list[Event] = []
    tools = [Tool.from_function(f) for f in (get_weather, send_email)]
    conv = Conversation(
        Pack(tools=tools, feedback=log),
        model=lambda r: next(replies),
        format="anthropic",
        tool_selector=sel,
        skills_selector=None,
        on_event=events.append,
    )
    try:
        conv.send("is it raining in Oslo")
        assert conv.session.shortlist._enriched.wait(10)
        (refreshed,) = [e for e in events if isinstance(e, ExamplesRefreshed)]
        assert refreshed.reason == "write" and refreshed.error == ""
        prepared = sel.prepared[-1]
        assert next(c.examples for c in prepared if c.id == "get_weather") == ("is it raining in Oslo",)
        conv.send("and in Rome")
        assert sel.seen[-1] is prepared  # the turn found the refreshed catalog: nothing built in it
        assert conv.session.shortlist._enriched.wait(10)
        assert len([e for e in events if isinstance(e, ExamplesRefreshed)]) == 1  # no call, nothing written
    finally:
        conv.close()
        log.close()
