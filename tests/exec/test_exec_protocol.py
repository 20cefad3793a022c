"""Wire protocol v1: the keys we send, the Go-shaped keys we accept, strict responses, published schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shortlist._types import Candidate, Query, Selection
from shortlist.errors import SelectorProtocolError
from shortlist.exec._encode import encode_request, encode_response
from shortlist.exec._protocol import decode_request, decode_response, request_schema, response_schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "exec-protocol.md"


def _request() -> dict:
    q = Query("refund my order", kind="skill", k=3, pack_id="support", agent_id="triage")
    cands = [Candidate("refund", description="Refund an order", metadata={"tags": "billing"}), Candidate("weather")]
    return json.loads(encode_request(q, cands))


def test_sent_keys_are_exactly_the_documented_snake_case_keys() -> None:  # spec §9 item 25
    doc = _request()
    assert list(doc) == ["version", "query", "candidates"]
    assert doc["version"] == 1
    assert doc["query"] == {
        "text": "refund my order",
        "kind": "skill",
        "pack_id": "support",
        "agent_id": "triage",
        "k": 3,
    }
    assert doc["candidates"][0] == {
        "id": "refund",
        "name": "refund",
        "description": "Refund an order",
        "metadata": {"tags": "billing"},
    }
    assert set(doc["candidates"][1]) == {"id", "name", "description", "metadata"}


def test_sent_keys_are_all_declared_in_the_published_schema() -> None:
    schema = request_schema()
    defs = schema["$defs"]
    cand = Candidate("t", parameters={"type": "object"}, examples=("how do I refund",))
    doc = json.loads(encode_request(Query("x"), [cand], request_id=7))
    assert set(doc) <= set(schema["properties"])
    assert set(doc["query"]) == set(defs["WireQuery"]["properties"])
    assert set(doc["candidates"][0]) == set(defs["WireCandidate"]["properties"])
    assert doc["id"] == 7


def test_encoded_documents_validate_against_the_schemas() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(_request(), request_schema())
    jsonschema.validate(json.loads(encode_response(Selection(("a",), "r", (0.5,)), request_id=1)), response_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"query": {"k": -1}}, request_schema())


def test_go_shaped_request_with_capitalised_keys_is_accepted() -> None:
    go = {
        "Query": {"Text": "refund my order", "Kind": "tool", "PackID": "", "AgentID": "", "K": 2},
        "Candidates": [
            {"ID": "refund", "Name": "refund", "Description": "Refund an order", "Metadata": None},
            {"ID": "weather", "Name": "weather", "Description": "Weather", "Metadata": None},
        ],
    }
    query, cands, rid = decode_request(json.dumps(go))
    assert query == Query("refund my order", kind="tool", k=0)  # K = len(candidates), PromptKit's tool path: "choose"
    assert [c.id for c in cands] == ["refund", "weather"]
    assert dict(cands[0].metadata) == {}
    assert cands[0].description == "Refund an order"
    assert rid is None


def test_request_version_other_than_1_and_malformed_requests_are_rejected() -> None:
    with pytest.raises(ValueError, match="version 2"):
        decode_request('{"version": 2, "query": {"text": "x"}, "candidates": []}')
    with pytest.raises(ValueError, match="query"):
        decode_request('{"candidates": []}')
    with pytest.raises(ValueError, match="empty"):
        decode_request("  \n")
    with pytest.raises(ValueError, match="candidates"):
        decode_request('{"query": {"text": "x"}, "candidates": {"id": "a"}}')


@pytest.mark.parametrize(
    ("raw", "selected"),
    [
        ('{"selected": ["b", "a"], "reason": "r"}', ("b", "a")),
        ('\n  {"selected": null}\n\n', ()),
        ("{}", ()),
        ('{"Selected": ["a"], "Reason": "go casing", "extra": 1}', ("a",)),
    ],
)
def test_valid_responses(raw: str, selected: tuple[str, ...]) -> None:
    selection, _ = decode_response(raw)
    assert selection.selected == selected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ('loading model...\n{"selected": ["a"]}', "not exactly one JSON document"),
        ('{"selected": ["a"]}\n{"selected": ["b"]}', "not exactly one JSON document"),
        ('{"selected": ["a"]} done', "not exactly one JSON document"),
        ('["a"]', "must be a JSON object"),
        ('{"selected": "a"}', "selected"),
        ('{"selected": [1, 2]}', "selected"),
        ('{"selected": ["a", "b"], "scores": [1.0]}', "scores"),
        (b'{"selected": ["\xff"]}', "UTF-8"),
    ],
)
def test_invalid_responses_are_protocol_errors(raw: str | bytes, why: str) -> None:
    with pytest.raises(SelectorProtocolError, match=why):
        decode_response(raw, selector="s")


def test_docs_embed_the_generated_schemas() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- schema:(\w+) -->\s*```json\n(.*?)```", text, flags=re.S)
    found = {name: json.loads(body) for name, body in blocks}
    assert found == {"request": request_schema(), "response": response_schema()}
