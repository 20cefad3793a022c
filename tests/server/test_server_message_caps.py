"""A chat message's text is capped as a query is: every route taking ``messages`` (and ``/v1/select``'s query)."""

from __future__ import annotations

from typing import Any

import pytest
from server_helpers import EXAMPLE_CATALOG

from shortlist.server._routes import MAX_TEXT_CHARS

pytestmark = pytest.mark.slow  # a real server

TOO_LONG = "weather " * (MAX_TEXT_CHARS // 8) + "x"  # MAX_TEXT_CHARS + 1 characters


def _parts(text: str) -> list[dict[str, Any]]:
    half = len(text) // 2
    return [{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]


@pytest.mark.parametrize("content", ["str", "parts"])
def test_a_message_longer_than_a_query_is_refused_on_every_route(server_factory: Any, content: str) -> None:
    assert len(TOO_LONG) == MAX_TEXT_CHARS + 1
    body: Any = TOO_LONG if content == "str" else _parts(TOO_LONG)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": body}]
    requests = {
        "/v1/offer": {"catalog": "example", "messages": messages},
        "/v1/reduce": {"messages": messages, "max_tokens": 100},
        "/v1/retrieve": {"scope": {"user_id": "u"}, "messages": messages},
    }
    with server_factory(catalogs={"example": str(EXAMPLE_CATALOG)}, selector="lexical") as srv, srv.client() as c:
        for path, request in requests.items():
            r = c.post(path, json=request)
            assert r.status_code == 422, (path, r.text[:300])
            error = r.json()["error"]
            assert error["code"] == "invalid_request" and f"at most {MAX_TEXT_CHARS:,}" in error["message"], path
            assert "weather weather" not in r.text  # the text is never echoed back
        ok = [{"role": "user", "content": TOO_LONG[:MAX_TEXT_CHARS]}]
        assert c.post("/v1/offer", json={"catalog": "example", "messages": ok}).status_code == 200


def test_the_select_query_is_capped_too(server_factory: Any) -> None:
    with server_factory(catalogs={"example": str(EXAMPLE_CATALOG)}, selector="lexical") as srv, srv.client() as c:
        r = c.post("/v1/select", json={"catalog": "example", "query": TOO_LONG})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
        assert c.post("/v1/select", json={"catalog": "example", "query": TOO_LONG[:-1]}).status_code == 200
