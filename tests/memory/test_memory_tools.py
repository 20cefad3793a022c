"""The memory__* tools: definitions, defaults, forced provenance, metadata pass-through, visibility."""

from __future__ import annotations

import json

import pytest

from shortlist._events import Event, event_hooks
from shortlist.memory import InMemoryStore, Memory, MemoryTools
from shortlist.memory._record import Provenance
from shortlist.memory._tools import MEMORY_TOOL_NAMES, MemoryToolCalled

SCOPE = {"user_id": "u1", "workspace_id": "w"}


@pytest.fixture
def tools() -> MemoryTools:
    return MemoryTools(InMemoryStore(), SCOPE, session_id="sess-1")


def test_four_tools_with_json_schemas(tools: MemoryTools) -> None:
    defs = tools.definitions()
    assert [d.name for d in defs] == list(MEMORY_TOOL_NAMES)
    by_name = {d.name: d for d in defs}
    assert by_name["memory__remember"].parameters["required"] == ["content"]
    assert by_name["memory__recall"].parameters["required"] == ["query"]
    assert by_name["memory__forget"].parameters["required"] == ["memory_id"]
    assert "offset" in by_name["memory__list"].parameters["properties"]  # advertised, unlike the reference
    assert defs[0].to_openai()["function"]["name"] == "memory__remember"
    assert defs[0].to_anthropic()["input_schema"]["type"] == "object"
    json.dumps([d.to_openai() for d in defs])


def test_remember_defaults(tools: MemoryTools) -> None:
    out = tools.execute("memory__remember", {"content": "  likes jazz  "})
    assert out["status"] == "remembered"
    (m,) = tools.store.list(SCOPE)
    assert m.id == out["id"]
    assert (m.type, m.content, m.confidence) == ("general", "likes jazz", 0.8)
    assert m.provenance == Provenance.USER_REQUESTED
    assert m.session_id == "sess-1"
    assert m.scope == SCOPE


@pytest.mark.parametrize("confidence", [0, -1, None])
def test_remember_non_positive_confidence_becomes_default(tools: MemoryTools, confidence: float | None) -> None:
    tools.execute("memory__remember", {"content": "x", "confidence": confidence})
    assert tools.store.list(SCOPE)[0].confidence == 0.8


def test_remember_keeps_a_given_confidence_and_type(tools: MemoryTools) -> None:
    tools.execute("memory__remember", {"content": "x", "confidence": 0.4, "type": "preference"})
    m = tools.store.list(SCOPE)[0]
    assert (m.type, m.confidence) == ("preference", 0.4)


def test_provenance_cannot_be_spoofed(tools: MemoryTools) -> None:
    tools.execute(
        "memory__remember",
        {
            "content": "I am an admin",
            "provenance": "operator_curated",
            "metadata": {"provenance": "system_generated"},
        },
    )
    assert tools.store.list(SCOPE)[0].provenance == "user_requested"


def test_scope_cannot_be_chosen_by_the_model(tools: MemoryTools) -> None:
    tools.execute("memory__remember", {"content": "x", "scope": {"user_id": "victim"}, "user_id": "victim"})
    assert tools.store.list({"user_id": "victim"}) == []
    (m,) = tools.store.list(SCOPE)
    assert m.scope == SCOPE


def test_category_and_unknown_arguments_go_to_metadata_typed_fields_win(tools: MemoryTools) -> None:
    tools.execute(
        "memory__remember",
        {
            "content": "allergic to peanuts",
            "category": "memory:health",
            "about": "allergy",
            "consent_category": "memory:context",
            "metadata": {"source": "chat", "about": "food"},
        },
    )
    md = tools.store.list(SCOPE)[0].metadata
    assert md["consent_category"] == "memory:health"
    assert md["about"] == "food"  # the explicit metadata object beats a loose argument
    assert md["source"] == "chat"


def test_remember_rejects_empty_content(tools: MemoryTools) -> None:
    assert "error" in tools.execute("memory__remember", {"content": "   "})
    assert "error" in tools.execute("memory__remember", {})
    assert tools.store.list(SCOPE) == []


def test_recall_list_and_forget(tools: MemoryTools) -> None:
    ids = [tools.execute("memory__remember", {"content": f"note {i} about cats"})["id"] for i in range(12)]
    recalled = tools.execute("memory__recall", {"query": ""})
    assert recalled["count"] == 10 and len(recalled["memories"]) == 10  # empty query: everything up to 10
    assert "scope" not in recalled["memories"][0]
    assert tools.execute("memory__recall", {"query": "cats", "limit": 3})["count"] == 3
    page = tools.execute("memory__list", {"limit": 5, "offset": 10})
    assert [m["id"] for m in page["memories"]] == ids[10:]
    assert tools.execute("memory__forget", {"memory_id": ids[0]}) == {"status": "forgotten", "memory_id": ids[0]}
    assert ids[0] not in {m.id for m in tools.store.list(SCOPE, limit=100)}


def test_arguments_as_a_json_string(tools: MemoryTools) -> None:
    assert tools.execute("memory__remember", '{"content": "from a JSON string"}')["status"] == "remembered"
    assert "error" in tools.execute("memory__remember", "{not json")


def test_forget_cannot_reach_another_scope() -> None:
    store = InMemoryStore()
    victim = store.save(Memory(type="fact", content="victim's", scope={"user_id": "v"}))
    MemoryTools(store, {"user_id": "attacker"}).execute("memory__forget", {"memory_id": victim.id})
    assert store.list({"user_id": "v"}) == [victim]


@pytest.mark.parametrize("scope", [{}, {"session_id": "s"}, {"user_id": ""}])
def test_hidden_for_anonymous_users(scope: dict[str, str]) -> None:
    store = InMemoryStore()
    tools = MemoryTools(store, scope)
    assert not tools.visible and tools.definitions() == []
    assert "error" in tools.execute("memory__remember", {"content": "x"})


def test_hidden_when_disabled_but_store_still_usable() -> None:
    store = InMemoryStore()
    tools = MemoryTools(store, SCOPE, enabled=False)
    assert tools.definitions() == []
    assert "error" in tools.execute("memory__recall", {"query": "x"})
    store.save(Memory(type="fact", content="ambient still works", scope=SCOPE))
    assert store.retrieve(SCOPE, "ambient")


def test_calls_are_events(tools: MemoryTools) -> None:
    seen: list[Event] = []
    with event_hooks(seen.append):
        tools.execute("memory__remember", {"content": "x"})
        tools.execute("memory__nope", {})
    calls = [e for e in seen if isinstance(e, MemoryToolCalled)]
    assert [(c.tool, c.ok) for c in calls] == [("memory__remember", True), ("memory__nope", False)]
