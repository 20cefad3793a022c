"""The one binding layer the runtime uses: facade siblings, the live-tool pin policy, wildcard expansion."""

from __future__ import annotations

from shortlist.runtime import Conversation, Pack
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
