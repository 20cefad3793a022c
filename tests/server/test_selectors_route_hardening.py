"""``POST /v1/selectors/{name}:select`` under hostile bodies: deep JSON is a typed 4xx, never a 500."""

from __future__ import annotations

import json
from typing import Any

TOOLS = [
    {"id": "get_weather", "description": "Get the weather forecast for a city"},
    {"id": "send_email", "description": "Send an email message to a recipient"},
]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _body(metadata: str) -> bytes:
    cands = json.dumps(TOOLS)[:-1] + f', {{"id": "deep", "metadata": {{"m": {metadata}}}}}]'
    return f'{{"id": 3, "query": {{"text": "weather"}}, "candidates": {cands}}}'.encode()


def test_deep_json_on_the_wire_route_is_a_typed_4xx(app_factory: Any) -> None:
    headers = {"Content-Type": "application/json"}
    with app_factory() as srv, srv.client() as c:
        for depth in (100_000, 2_000, 500):
            r = c.post("/v1/selectors/lexical:select", content=_body(_deep(depth)), headers=headers)
            assert r.status_code == 422, (depth, r.status_code, r.text[:300])
            error = r.json()["error"]
            assert error["code"] == "too_deep" and "deeper than" in error["message"]
        deep_top = ("[" * 100_000 + "]" * 100_000).encode()
        r = c.post("/v1/selectors/lexical:select", content=deep_top, headers=headers)
        assert r.status_code == 422 and r.json()["error"]["code"] == "too_deep"
        # the server is unharmed, and moderate nesting still works
        ok = c.post("/v1/selectors/lexical:select", content=_body(_deep(10)), headers=headers)
        assert ok.status_code == 200, ok.text
        assert ok.json()["id"] == 3 and ok.json()["selected"][0] == "get_weather"


def test_a_bool_request_id_is_refused(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/selectors/lexical:select", json={"id": True, "query": {"text": "x"}, "candidates": TOOLS})
        assert r.status_code == 422 and "id" in r.json()["error"]["message"]
