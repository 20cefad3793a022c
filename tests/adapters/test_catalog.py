"""Loading catalogs in the formats hosts already have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shortlist.adapters import candidates_from_tools, to_anthropic_tool, to_openai_tool
from shortlist.adapters._catalog import load_catalog
from shortlist.errors import CatalogError

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_openai_anthropic_mcp_and_candidate_shapes() -> None:
    items = [
        {"type": "function", "function": {"name": "weather", "description": "Weather", "parameters": PARAMS}},
        {"type": "function", "name": "flat", "description": "Responses API shape"},
        {"name": "anth", "description": "Anthropic", "input_schema": PARAMS},
        {"name": "mcp_tool", "description": "MCP", "inputSchema": PARAMS},
        {"id": "cand", "description": "Candidate", "examples": ["q1"], "metadata": {"tags": "x"}},
    ]
    cands = candidates_from_tools(items)
    assert [c.id for c in cands] == ["weather", "flat", "anth", "mcp_tool", "cand"]
    assert [c.metadata.get("format") for c in cands] == ["openai", "openai", "anthropic", "mcp", None]
    assert cands[0].parameters == PARAMS and cands[2].parameters == PARAMS
    assert cands[4].examples == ("q1",)


def test_mcp_tools_list_result_and_jsonrpc_envelope() -> None:
    result = {"tools": [{"name": "a", "inputSchema": PARAMS}]}
    assert candidates_from_tools(result)[0].id == "a"
    assert candidates_from_tools({"jsonrpc": "2.0", "id": 1, "result": result})[0].id == "a"


def test_round_trip_to_provider_formats() -> None:
    c = candidates_from_tools([{"name": "w", "description": "d", "input_schema": PARAMS}])[0]
    assert to_openai_tool(c) == {
        "type": "function",
        "function": {"name": "w", "description": "d", "parameters": PARAMS},
    }
    assert to_anthropic_tool(c) == {"name": "w", "description": "d", "input_schema": PARAMS}


def test_files(tmp_path: Path) -> None:
    j = tmp_path / "t.json"
    j.write_text(json.dumps([{"name": "a"}, {"name": "b"}]))
    assert [c.id for c in load_catalog(j)] == ["a", "b"]
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"id": "a"}\n\n{"id": "b"}\n')
    assert [c.id for c in load_catalog(jl)] == ["a", "b"]


@pytest.mark.parametrize(
    ("content", "suffix", "words"),
    [
        ("[]", ".json", "empty"),
        ('[{"name": "a"}, {"name": "a"}]', ".json", "duplicate ids: a"),
        ("{not json", ".json", "invalid JSON"),
        ('{"id": "a"}\n{bad', ".jsonl", ":2: invalid JSON"),
        ('[{"description": "no name"}]', ".json", "non-empty `name`"),
        ('[{"name": "a", "description": 3}]', ".json", "description must be a string"),
        ('{"other": []}', ".json", "`tools` list"),
        ('[{"name": "a", "parameters": "x"}]', ".json", "JSON Schema object"),
    ],
)
def test_bad_catalogs(tmp_path: Path, content: str, suffix: str, words: str) -> None:
    p = tmp_path / f"c{suffix}"
    p.write_text(content)
    with pytest.raises(CatalogError, match=words):
        load_catalog(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog(tmp_path / "nope.json")
