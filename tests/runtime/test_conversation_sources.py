"""The runtime with real tool sources: live MCP servers over stdio and SKILL.md skills."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from shortlist.runtime import Conversation, Pack, Tool

pytestmark = pytest.mark.slow  # real MCP servers over stdio


def _server(name: str) -> str:
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the dev extra")
    return found


def read_pdf(path: str) -> str:
    """Extract the text of a PDF file."""
    return f"text of {path}"


def send_email(to: str) -> str:
    """Send an email."""
    return "sent"


def test_live_mcp_tools_are_narrowed_and_called() -> None:
    requests: list[dict[str, Any]] = []

    def script(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(req)
        if req["messages"][-1]["role"] == "user":
            fn = {"name": "mcp__time__get_current_time", "arguments": json.dumps({"timezone": "UTC"})}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "t", "type": "function", "function": fn}],
            }
        return {"role": "assistant", "content": "It is " + req["messages"][-1]["content"][:80]}

    pack = Pack(
        tools=[Tool.from_function(send_email)],
        mcp_servers={"time": f"{_server('mcp-server-time')} --local-timezone UTC"},
    )
    conv = Conversation(pack, model=script, k=1, tool_selector="bm25", offer_policy="stable")
    try:
        result = conv.send("what is the current time in UTC?")
    finally:
        asyncio.run(conv.aclose())
    offered = [t["function"]["name"] for t in requests[0]["tools"]]
    # narrowed: one of 3 tools, mcp__ is not pinned here (find_tools reaches the other two)
    assert offered == ["mcp__time__get_current_time", "find_tools"]
    assert result.report.tool_calls[0].source == "mcp" and result.report.tool_calls[0].ok
    assert '"timezone": "UTC"' in result.answer and '"datetime"' in result.answer  # the tool result, relayed


def test_wildcard_allowed_tools_survive_narrowing_as_a_set() -> None:
    offered: list[list[str]] = []

    def script(req: dict[str, Any]) -> dict[str, Any]:
        offered.append([t["function"]["name"] for t in req["tools"]])
        return {"role": "assistant", "content": "ok"}

    pack = Pack(
        tools=[Tool.from_function(send_email), Tool.from_function(read_pdf)],
        allowed_tools=["send_email", "read_pdf", "mcp__time__*"],
        mcp_servers={"time": f"{_server('mcp-server-time')} --local-timezone UTC"},
    )
    conv = Conversation(pack, model=script, k=1, tool_selector="bm25", offer_policy="stable")
    try:
        conv.send("email my boss")
    finally:
        asyncio.run(conv.aclose())
    assert offered[0][0] == "send_email"
    assert set(offered[0][1:-1]) == {"mcp__time__get_current_time", "mcp__time__convert_time"}
    assert offered[0][-1] == "find_tools"  # read_pdf is deferred


def _two_skills(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "pdf-forms"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: pdf-forms\ndescription: Fill and read PDF forms\nallowed-tools: read_pdf\n---\nUse read_pdf.\n"
    )
    other = tmp_path / "skills" / "spreadsheets"
    other.mkdir()
    (other / "SKILL.md").write_text("---\nname: spreadsheets\ndescription: Analyse spreadsheet tables\n---\nx\n")


def _activate_pdf_forms(requests: list[dict[str, Any]]) -> Any:
    def script(req: dict[str, Any]) -> dict[str, Any]:
        requests.append(req)
        last = req["messages"][-1]
        if last["role"] == "user":
            fn = {"name": "skill__activate", "arguments": json.dumps({"name": "pdf-forms"})}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"s{len(requests)}", "type": "function", "function": fn}],
            }
        return {"role": "assistant", "content": "activated"}

    return script


def test_skills_index_narrowed_per_turn_and_activation_adds_tools(tmp_path: Path) -> None:
    # grounding_placement="system": the turn's narrowed index is in skill__activate's description
    _two_skills(tmp_path)
    requests: list[dict[str, Any]] = []
    script = _activate_pdf_forms(requests)

    pack = Pack(
        tools=[Tool.from_function(send_email), Tool.from_function(read_pdf)],
        allowed_tools=["send_email"],
        skills=[tmp_path / "skills"],
    )
    conv = Conversation(
        pack, model=script, k=1, tool_selector="bm25", skills_selector="bm25", grounding_placement="system"
    )
    conv.send("please fill this pdf form")
    tools_first = {t["function"]["name"]: t["function"]["description"] for t in requests[0]["tools"]}
    assert "pdf-forms" in tools_first["skill__activate"] and "spreadsheets" not in tools_first["skill__activate"]
    assert "read_pdf" not in tools_first
    tools_second = [t["function"]["name"] for t in requests[1]["tools"]]
    assert "read_pdf" in tools_second  # the activated skill added its tool
    # an image-only turn restores the full index
    image = conv.send({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]})
    last_index = {t["function"]["name"]: t["function"]["description"] for t in requests[-1]["tools"]}
    assert "spreadsheets" in last_index["skill__activate"]
    # the index changed the tools array, so the cached prefix broke there, and the report says why
    prefix = image.report.prefix
    assert (prefix["request"], prefix["part"], prefix["reason"]) == (3, "tools", "skill_index")
    assert prefix["cache_miss_reason"] == "tools_changed"
    assert prefix["detail"] == "redefined: skill__activate"  # the index is the activation tool's description


def test_skills_index_listed_once_in_the_history_keeps_the_tools_array(tmp_path: Path) -> None:
    _two_skills(tmp_path)
    requests: list[dict[str, Any]] = []
    pack = Pack(
        tools=[Tool.from_function(send_email), Tool.from_function(read_pdf)],
        allowed_tools=["send_email"],
        skills=[tmp_path / "skills"],
    )
    conv = Conversation(pack, model=_activate_pdf_forms(requests), k=1, tool_selector="bm25", skills_selector="bm25")
    first = conv.send("please fill this pdf form")
    # the turn's narrowed index is listed before the user's text, in that turn's user message
    listing, own = requests[0]["messages"][1]["content"]
    assert own == {"type": "text", "text": "please fill this pdf form"}
    assert "- pdf-forms: Fill and read PDF forms" in listing["text"] and "spreadsheets" not in listing["text"]
    assert "read_pdf" in [t["function"]["name"] for t in requests[1]["tools"]]  # activation still adds its tool
    assert first.report.prefix_breaks == [
        {
            "request": 2,
            "survived": False,
            "part": "tools",
            "reason": "skill_tools",
            "cache_miss_reason": "tools_changed",
            "detail": "added: read_pdf",
        }
    ]
    # the same skill asked again: nothing new to list, the message is the user's text alone
    conv.send("fill another pdf form")
    assert requests[2]["messages"][-1] == {"role": "user", "content": "fill another pdf form"}
    # an image-only turn surfaces the full index: only the skill not listed yet is added
    conv.send({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]})
    listing, image = requests[-2]["messages"][-1]["content"]
    assert "- spreadsheets: Analyse spreadsheet tables" in listing["text"] and "pdf-forms" not in listing["text"]
    assert image["type"] == "image_url"
    descriptions = {json.dumps([t for t in r["tools"] if t["function"]["name"] == "skill__activate"]) for r in requests}
    assert len(descriptions) == 1  # the index never re-rendered into the tools array
    assert "pdf-forms" not in descriptions.pop()
    # the conversation itself holds the user's messages as sent, without the listing
    assert [m for m in conv.history if m["role"] == "user"][-1]["content"] == [image]


def test_mcp_servers_start_once_across_send_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    from shortlist.mcp._client import MCPClient

    starts: list[int] = []
    real_start = MCPClient.start

    async def counting_start(self: MCPClient) -> None:
        starts.append(1)
        await real_start(self)

    monkeypatch.setattr(MCPClient, "start", counting_start)

    def script(req: dict[str, Any]) -> dict[str, Any]:
        if req["messages"][-1]["role"] == "user":
            fn = {"name": "mcp__time__get_current_time", "arguments": json.dumps({"timezone": "UTC"})}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "t", "type": "function", "function": fn}],
            }
        return {"role": "assistant", "content": "It is " + req["messages"][-1]["content"][:80]}

    pack = Pack(mcp_servers={"time": f"{_server('mcp-server-time')} --local-timezone UTC"})
    conv = Conversation(pack, model=script, tool_selector=None)
    try:
        results = [conv.send(f"what is the current time in UTC? ({i})") for i in range(3)]
    finally:
        conv.close()
    assert len(starts) == 1  # one event loop for the conversation's lifetime: the server lives across turns
    assert all(r.report.tool_calls[0].source == "mcp" and r.report.tool_calls[0].ok for r in results)
