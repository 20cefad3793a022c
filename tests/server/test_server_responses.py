"""``FastJSONResponse``: the same JSON as the stdlib renderer, always valid (non-finite floats become null)."""

from __future__ import annotations

import json
import math

from shortlist.server._responses import FastJSONResponse


def test_renders_the_same_document_as_json_dumps() -> None:
    doc = {"selected": ["a", "é", "\u2603"], "scores": [0.1 + 0.2, 1e-9, -3.5], "n": 3, "ok": True, "none": None}
    body = FastJSONResponse(doc).body
    assert json.loads(bytes(body)) == doc
    assert "é".encode() in body  # UTF-8, not \\u escapes


def test_non_finite_floats_become_null() -> None:
    body = FastJSONResponse({"scores": [math.nan, math.inf, -math.inf, 1.0]}).body
    assert json.loads(bytes(body)) == {"scores": [None, None, None, 1.0]}
