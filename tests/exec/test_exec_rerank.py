"""Our rewrite of the reference's example external ranker, run through the exec client (local and remote)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest
from exec_helpers import PYTHON, RERANK

from loopback import http_thread, starts_processes
from shortlist._config import parse_runtime_config
from shortlist._config_sections import SelectorConfig
from shortlist._events import Event, SelectionFallback
from shortlist._types import Candidate, Query
from shortlist.rankers._exec_client import ExecSelector
from shortlist.rankers._registry import SelectorRegistry
from shortlist.selection._narrowing import narrow

pytestmark = pytest.mark.slow  # the rerank exec selector as a process

CANDS = [
    Candidate("get_weather", description="weather forecast for a city"),
    Candidate("refund_order", description="refund my order and return the money"),
    Candidate("track_package", description="where is my package"),
]


def rerank(**kw: Any) -> ExecSelector:
    cfg = SelectorConfig(command=PYTHON, args=[RERANK], env=["RERANK_API_KEY", "RERANK_URL"], timeout_ms=5000, **kw)
    return ExecSelector.from_config("rerank", cfg, {})


def test_local_token_overlap_ranks_the_relevant_tool_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RERANK_URL", raising=False)
    monkeypatch.delenv("RERANK_API_KEY", raising=False)
    turn = narrow(rerank(), Query("refund my order", k=3), CANDS)
    assert turn.fallback is None
    assert turn.ranked[0] == "refund_order"
    assert len(turn.ranked) == 3  # zero scores included, like the reference
    assert turn.reason == "local token overlap"
    assert turn.scores["refund_order"] > turn.scores["get_weather"]


def test_empty_text_answers_nothing_so_the_turn_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RERANK_URL", raising=False)
    selection = rerank().select(Query(" "), CANDS)
    assert selection.selected == ()


def test_k_defaults_to_10() -> None:
    many = [Candidate(f"t{i}", description="x") for i in range(15)]
    assert len(rerank().select(Query("x"), many).selected) == 10


def test_through_runtime_yaml_and_registry() -> None:
    config = parse_runtime_config(
        {
            "spec": {
                "selectors": {"rerank": {"command": PYTHON, "args": [RERANK], "timeout_ms": 3000}},
                "tool_selector": "rerank",
            }
        }
    )
    registry = SelectorRegistry(config)
    selector = registry.tool_selector()
    assert isinstance(selector, ExecSelector)
    assert narrow(selector, Query("where is my package", k=1), CANDS).ids == ("track_package",)
    registry.close()


class _Rerank(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"auth": self.headers["Authorization"], "ctype": self.headers["Content-Type"], **body})
        if type(self).status != 200:
            self.send_error(type(self).status)
            return
        docs = body["documents"]
        results = [{"index": i, "score": float(i)} for i in reversed(range(len(docs)))] + [{"index": 99, "score": 0}]
        data = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
@starts_processes
def rerank_server() -> Iterator[str]:
    _Rerank.seen = []
    _Rerank.status = 200
    with http_thread(_Rerank) as server:
        yield f"{server.url}/v1/rerank"


def test_remote_mode_calls_the_rerank_endpoint(rerank_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_URL", rerank_server)
    monkeypatch.setenv("RERANK_API_KEY", "test-key")
    selection = rerank().select(Query("refund my order", k=2), CANDS)
    assert selection.selected == ("track_package", "refund_order")  # the service's order, cut to k
    assert selection.reason == "remote rerank"
    (call,) = _Rerank.seen
    assert call["auth"] == "Bearer test-key"
    assert call["ctype"] == "application/json"
    assert call["query"] == "refund my order" and call["top_k"] == 2
    assert call["documents"][1] == "refund_order: refund my order and return the money"


def test_remote_failure_exits_non_zero_and_falls_back(
    rerank_server: str, monkeypatch: pytest.MonkeyPatch, events: list[Event]
) -> None:
    _Rerank.status = 503
    monkeypatch.setenv("RERANK_URL", rerank_server)
    monkeypatch.setenv("RERANK_API_KEY", "test-key")
    turn = narrow(rerank(), Query("refund my order", k=2), CANDS)
    assert turn.fallback == "error"
    assert turn.ids == tuple(c.id for c in CANDS)
    (fb,) = [e for e in events if isinstance(e, SelectionFallback)]
    assert "503" in fb.stderr_tail


def test_remote_mode_needs_both_variables_granted(rerank_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_URL", rerank_server)
    monkeypatch.setenv("RERANK_API_KEY", "test-key")
    cfg = SelectorConfig(command=PYTHON, args=[RERANK], env=["RERANK_URL"])  # the key is not granted
    selection = ExecSelector.from_config("rerank", cfg, {}).select(Query("refund my order"), CANDS)
    assert selection.reason == "local token overlap"
    assert _Rerank.seen == []
