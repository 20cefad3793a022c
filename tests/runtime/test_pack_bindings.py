"""A pack's conversations share their selector binding: the indexes are built once per pack, not per conversation."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from shortlist._types import Candidate, Query, Selection
from shortlist.runtime import Conversation, Pack, Tool
from shortlist.selection._base import Selector


def get_weather(city: str) -> str:
    """Get the weather forecast for a city."""
    return "sunny"


def send_email(to: str) -> str:
    """Send an email."""
    return "sent"


TOOLS = [Tool.from_function(f) for f in (get_weather, send_email)] + [
    Tool(name=f"report_{i}", description=f"Write report number {i}.", func=lambda: "done") for i in range(10)
]  # more than a turn offers: every turn ranks


class Counting(Selector):
    """Counts what a real ranker pays per catalog (``prepare``: its indexes) and whether it was closed."""

    name = "counting"

    def __init__(self) -> None:
        self.prepared = 0
        self.closed = 0
        self.lock = threading.Lock()

    def prepare(self, candidates: Any) -> None:
        with self.lock:
            self.prepared += 1

    def select(self, query: Query, candidates: Any) -> Selection:
        return Selection(("get_weather",), scores=(1.0,))

    def close(self) -> None:
        self.closed += 1


def answer(request: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "ok"}]}


def talk(pack: Pack, sel: Selector, text: str) -> Conversation:
    """A conversation of ``pack`` ranking with ``sel`` (registered by name), after one turn."""
    conv = Conversation(pack, model=answer, format="anthropic", selectors={"mine": sel}, tool_selector="mine")
    conv.send(text)
    return conv


def test_a_packs_second_conversation_finds_the_index_built(tmp_path: Path) -> None:
    """A selector the binding builds (the default hybrid, or one the config declares) is built once per
    pack: the second conversation's first turn ranks on the index the first one built."""
    config = tmp_path / "runtime.yaml"
    config.write_text("spec:\n  selectors:\n    tools: {type: bm25}\n  tool_selector: tools\n")
    pack = Pack(tools=TOOLS)
    first = Conversation(pack, model=answer, format="anthropic", config=config)
    first.send("weather in Oslo")
    ranker: Any = first.tool_binding.selector_for("tool")
    (index,) = ranker._entries.entries
    second = Conversation(pack, model=answer, format="anthropic", config=config)
    second.send("weather in Rome")
    assert ranker._entries.entries == (index,)  # nothing built in its turn
    assert second.tool_binding.selector_for("tool") is ranker
    assert second.shortlist is first.shortlist and second.tool_binding is first.tool_binding
    assert second.session is not first.session  # each keeps its own offer state
    assert len(pack.bindings) == 1
    first.close()
    second.close()
    pack.close()


def test_the_default_selector_is_built_once_per_pack() -> None:
    pack = Pack(tools=TOOLS)
    first, second = (Conversation(pack, model=answer) for _ in range(2))
    assert first.tool_binding.selector_for("tool") is second.tool_binding.selector_for("tool") is not None
    first.close()
    second.close()
    pack.close()


def test_closing_a_conversation_leaves_the_selectors_to_the_next_and_the_pack_closes_them() -> None:
    sel = Counting()
    pack = Pack(tools=TOOLS)
    talk(pack, sel, "weather in Oslo").close()
    assert sel.closed == 0
    later = Conversation(pack, model=answer, format="anthropic", selectors={"mine": sel}, tool_selector="mine")
    assert later.send("weather in Rome").answer == "ok"
    later.close()
    pack.close()
    assert sel.closed == 1 and len(pack.bindings) == 0
    pack.close()  # twice: nothing left to close
    assert sel.closed == 1


def test_other_selector_arguments_get_their_own_binding() -> None:
    one, two = Counting(), Counting()
    pack = Pack(tools=TOOLS)
    convs = [
        Conversation(pack, model=answer, selectors={"mine": one}, tool_selector="mine"),
        Conversation(pack, model=answer, selectors={"mine": two}, tool_selector="mine"),
        Conversation(pack, model=answer, selectors={"mine": one}, tool_selector="mine", skills_selector=None),
        Conversation(pack, model=answer, selectors={"mine": one}, tool_selector="mine"),
    ]
    assert convs[3].shortlist is convs[0].shortlist
    assert len({id(c.shortlist) for c in convs}) == 3 and len(pack.bindings) == 3
    assert convs[1].tool_binding.selector_for("tool") is two
    other = Pack(tools=TOOLS)  # another pack, another binding
    assert (
        Conversation(other, model=answer, selectors={"mine": one}, tool_selector="mine").shortlist
        is not convs[0].shortlist
    )
    for c in convs:
        c.close()
    pack.close()
    other.close()


def test_a_changed_config_file_is_read_again(tmp_path: Path) -> None:
    config = tmp_path / "runtime.yaml"
    config.write_text("apiVersion: v1\nkind: RuntimeConfig\nspec:\n  selection:\n    k: 3\n")
    pack = Pack(tools=TOOLS)
    sel = Counting()
    first = Conversation(pack, model=answer, config=config, tool_selector=sel)
    assert Conversation(pack, model=answer, config=config, tool_selector=Counting()).shortlist is not first.shortlist
    same = Conversation(pack, model=answer, config=str(config), tool_selector=sel)  # the same file, named as text
    assert same.shortlist is first.shortlist and same.config.spec.selection.k == 3
    config.write_text("apiVersion: v1\nkind: RuntimeConfig\nspec:\n  selection:\n    k: 7\n")
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    changed = Conversation(pack, model=answer, config=config, tool_selector=sel)
    assert changed.shortlist is not same.shortlist and changed.config.spec.selection.k == 7
    pack.close()


def test_a_missing_config_file_is_still_an_error() -> None:
    from shortlist.errors import ConfigError

    with pytest.raises(ConfigError):
        Conversation(Pack(tools=TOOLS), model=answer, config="/nonexistent/runtime.yaml")


def test_conversations_started_at_once_share_one_binding() -> None:
    sel = Counting()
    pack = Pack(tools=TOOLS)
    got: list[Conversation] = []
    start = threading.Barrier(4)

    def begin() -> None:
        start.wait()
        got.append(Conversation(pack, model=answer, selectors={"mine": sel}, tool_selector="mine"))

    threads = [threading.Thread(target=begin) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and len({id(c.shortlist) for c in got}) == 1
    pack.close()


def test_a_dropped_pack_closes_what_its_conversations_built() -> None:
    sel = Counting()
    pack = Pack(tools=TOOLS)
    talk(pack, sel, "weather in Oslo").close()
    del pack
    gc.collect()
    assert sel.closed == 1


def test_candidates_reach_the_shared_selector_unchanged() -> None:
    seen: list[tuple[Candidate, ...]] = []

    class Seeing(Counting):
        def select(self, query: Query, candidates: Any) -> Selection:
            seen.append(tuple(candidates))
            return super().select(query, candidates)

    sel = Seeing()
    pack = Pack(tools=TOOLS)
    for text in ("weather in Oslo", "weather in Rome"):
        talk(pack, sel, text).close()
    assert len(seen) == 2 and seen[0] == seen[1]
    assert sorted(c.id for c in seen[0]) == sorted(t.name for t in TOOLS)
    pack.close()
