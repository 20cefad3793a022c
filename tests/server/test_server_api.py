"""The service over real HTTP: selection, the exec protocol, limits, errors, metrics, OpenAPI."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from shortlist.adapters._catalog import load_catalog

EXAMPLE = Path(str(resources.files("shortlist.data") / "example_tools.json"))

TOOLS = [
    {"id": "get_weather", "description": "Get the weather forecast for a city"},
    {"id": "send_email", "description": "Send an email message to a recipient"},
    {"id": "create_invoice", "description": "Create an invoice for a customer"},
    {"id": "memory__recall", "description": "Recall memories"},
]


def test_select_inline_candidates(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/select", json={"query": "what is the weather in Paris", "candidates": TOOLS, "k": 1})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ranked"] == ["get_weather"]
        assert body["selected"] == ["get_weather", "memory__recall"]  # the pinned system tool survives
        assert body["pinned"] == ["memory__recall"] and body["fallback"] is None


def test_select_empty_query_falls_back_with_reason(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        body = c.post("/v1/select", json={"query": "", "candidates": TOOLS}).json()
        assert body["fallback"] == "empty_query"
        assert body["selected"] == [t["id"] for t in TOOLS]


def test_select_with_catalog_loaded_at_start_up(app_factory: Any) -> None:
    with app_factory(catalogs={"example": str(EXAMPLE)}) as srv, srv.client() as c:
        ready = c.get("/readyz")
        assert ready.status_code == 200 and ready.json()["catalogs"] == {"example": len(load_catalog(EXAMPLE))}
        body = c.post("/v1/select", json={"query": "send an email to bob", "catalog": "example", "k": 3}).json()
        assert body["ranked"][0] == "send_email"
        missing = c.post("/v1/select", json={"query": "x", "catalog": "nope"})
        assert missing.status_code == 404 and "example" in missing.json()["error"]["message"]
        both = c.post("/v1/select", json={"query": "x", "catalog": "example", "candidates": TOOLS})
        assert both.status_code == 422


def test_select_refuses_exec_selector_names_from_clients(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/select", json={"query": "x", "candidates": TOOLS, "selector": "exec:touch /tmp/pwned"})
        assert r.status_code == 404
        r = c.post("/v1/selectors/exec:true:select", json={"query": {"text": "x"}, "candidates": TOOLS})
        assert r.status_code == 404


def test_exec_protocol_over_http_accepts_go_capitalised_keys(app_factory: Any) -> None:
    go_request = {
        "Query": {"Text": "weather forecast", "Kind": "tool", "PackID": "p", "AgentID": "a", "K": 1},
        "Candidates": [
            {"ID": "get_weather", "Name": "get_weather", "Description": "Get the weather forecast", "Metadata": None},
            {"ID": "send_email", "Name": "send_email", "Description": "Send an email", "Metadata": None},
        ],
    }
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/selectors/lexical:select", json=go_request)
        assert r.status_code == 200, r.text
        assert r.json()["selected"] == ["get_weather"]
        snake = {"version": 1, "id": 7, "query": {"text": "send an email", "k": 1}, "candidates": TOOLS}
        r = c.post("/v1/selectors/lexical:select", json=snake)
        assert r.json()["selected"] == ["send_email"] and r.json()["id"] == 7
        bad = c.post("/v1/selectors/lexical:select", json={"version": 2, "query": {"text": "x"}})
        assert bad.status_code == 422 and "version" in bad.json()["error"]["message"]


def test_exec_protocol_over_http_reports_a_failing_external_selector(tmp_path: Path, app_factory: Any) -> None:
    behave = Path(__file__).resolve().parent.parent / "fixtures" / "selectors" / "behave.py"
    config = tmp_path / "runtime.yaml"
    config.write_text(
        "spec:\n  selectors:\n"
        f"    broken:\n      command: {sys.executable}\n      args: [{str(behave)!r}, nonzero]\n"
        f"    slow:\n      command: {sys.executable}\n      args: [{str(behave)!r}, sleep, '30']\n"
        "      timeout_ms: 300\n"
    )
    with app_factory(config_path=str(config)) as srv, srv.client() as c:
        req = {"query": {"text": "weather"}, "candidates": TOOLS}
        r = c.post("/v1/selectors/broken:select", json=req)
        assert r.status_code == 502 and "broken" in r.json()["error"]
        for _ in range(2):  # three consecutive failures open the circuit breaker
            assert c.post("/v1/selectors/broken:select", json=req).status_code == 502
        r = c.post("/v1/selectors/broken:select", json=req)
        assert r.status_code == 502 and "circuit open" in r.json()["error"]
        r = c.post("/v1/selectors/slow:select", json=req)
        assert r.status_code == 504
        # through /v1/select the same failure is a counted fallback, not an error
        r = c.post("/v1/select", json={"query": "weather", "candidates": TOOLS, "selector": "slow"})
        assert r.status_code == 200 and r.json()["fallback"] == "timeout"
        metrics = c.get("/metrics").text
        assert 'shortlist_selection_fallbacks_total{reason="timeout",selector="slow"} 1.0' in metrics
        assert 'shortlist_external_selector_timeouts_total{selector="slow"}' in metrics
        assert 'shortlist_circuit_breaker_changes_total{selector="broken",state="open"} 1.0' in metrics


def test_body_and_candidate_limits_answer_413(app_factory: Any) -> None:
    with app_factory(max_body_bytes=2048, max_candidates=3) as srv, srv.client() as c:
        big = {"query": "x", "candidates": [{"id": f"t{i}", "description": "y" * 100} for i in range(40)]}
        r = c.post("/v1/select", json=big)
        assert r.status_code == 413 and "2048 bytes" in r.json()["error"]["message"]
        payload = json.dumps(big).encode()

        def chunks() -> Any:  # no content-length: httpx sends a real chunked body
            for i in range(0, len(payload), 512):
                yield payload[i : i + 512]

        r = c.post("/v1/select", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        r = c.post("/v1/select", json={"query": "x", "candidates": TOOLS})
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_candidates"
        assert "at most 3" in r.json()["error"]["message"]


def test_unexpected_errors_answer_500_without_a_stack_trace(app_factory: Any) -> None:
    def prepare(app: Any) -> None:
        def explode() -> None:
            raise RuntimeError("secret internal detail")

        app.add_api_route("/v1/test-explode", explode, methods=["GET"])

    with app_factory(prepare=prepare) as srv, srv.client() as c:
        r = c.get("/v1/test-explode")
        assert r.status_code == 500
        assert r.json() == {
            "error": {"code": "internal", "message": "internal server error; the server log has the details"}
        }
        assert "Traceback" not in r.text and "secret" not in r.text
        bad = c.post("/v1/select", content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 422 and "Traceback" not in bad.text


def test_validation_errors_do_not_echo_memory_contents(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post(
            "/v1/memory/remember", json={"scope": {"user_id": "u"}, "content": "my secret pin 4242", "confidence": 7}
        )
        assert r.status_code == 422 and "4242" not in r.text


def test_metrics_count_requests_and_selections(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        for _ in range(3):
            assert c.post("/v1/select", json={"query": "send email", "candidates": TOOLS}).status_code == 200
        c.post("/v1/select", json={"query": "", "candidates": TOOLS})
        text = c.get("/metrics").text
        assert 'shortlist_http_requests_total{method="POST",route="/v1/select",status="200"} 4.0' in text
        assert 'shortlist_http_request_duration_seconds_count{method="POST",route="/v1/select"} 4.0' in text
        assert 'shortlist_selections_total{kind="tool",outcome="narrowed",selector="hybrid"} 3.0' in text
        assert 'shortlist_selection_fallbacks_total{reason="empty_query",selector="hybrid"} 1.0' in text


def test_openapi_document_lists_every_route(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        doc = c.get("/openapi.json").json()
        paths = set(doc["paths"])
        for path in (
            "/v1/select",
            "/v1/selectors/{name}:select",
            "/v1/retrieve",
            "/v1/reduce",
            "/v1/memory/remember",
            "/v1/memory/recall",
            "/v1/memory/list",
            "/v1/memory/forget",
            "/v1/embeddings",
            "/v1/rerank",
            "/healthz",
            "/readyz",
            "/metrics",
        ):
            assert path in paths, path
        assert "HTTPBearer" in doc["components"]["securitySchemes"]


def test_reduce_fits_a_budget(app_factory: Any) -> None:
    messages = [{"role": "system", "content": "be brief"}]
    for i in range(12):
        messages.append({"role": "user", "content": f"question {i} " + "words " * 60})
        messages.append({"role": "assistant", "content": f"answer {i} " + "more " * 60})
    messages.append({"role": "user", "content": "final question"})
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/reduce", json={"messages": messages, "max_chars": 2000})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["chars_after"] <= 2000 < body["chars_before"]
        assert body["messages"][0]["content"] == "be brief" and body["messages"][-1]["content"] == "final question"
        impossible = c.post("/v1/reduce", json={"messages": messages, "max_chars": 5})
        assert impossible.status_code == 422 and impossible.json()["error"]["code"] == "over_budget"


def test_retrieve_without_corpus_is_a_clear_404(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        r = c.post("/v1/retrieve", json={"scope": {"user_id": "u"}, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 404 and r.json()["error"]["code"] == "no_corpus"


def test_retrieve_grounds_a_conversation_in_the_corpus(app_factory: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "refunds.md").write_text("# Refund policy\nRefunds are issued within 14 days of a return request.\n")
    (corpus / "shipping.md").write_text("# Shipping\nOrders ship from our Lyon warehouse within two business days.\n")
    (corpus / "holidays.md").write_text("# Holidays\nThe office is closed on public holidays in France.\n")
    with app_factory(corpus_path=str(corpus), corpus_scoring="lexical") as srv, srv.client() as c:
        messages = [{"role": "user", "content": "how many days do refunds take after a return?"}]
        r = c.post("/v1/retrieve", json={"scope": {"user_id": "u1"}, "messages": messages})
        assert r.status_code == 200, r.text
        docs = r.json()["documents"]
        assert docs and "Refunds are issued" in docs[0]["content"]
        assert docs[0]["scope"] == {"user_id": "u1"}


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_endpoints(app_factory: Any, path: str) -> None:
    with app_factory() as srv, srv.client() as c:
        assert c.get(path).status_code == 200


@pytest.mark.slow  # replicas as processes
@pytest.mark.parametrize("backend", ["embedded", "qdrant"])
def test_replicas_share_a_built_corpus_index(server_factory: Any, tmp_path: Path, backend: str) -> None:
    import subprocess
    import sys

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"id": "refunds", "title": "Refunds", "text": "Refunds are issued within 14 days of a return request."},
                {"id": "shipping", "title": "Shipping", "text": "Orders ship from the Lyon warehouse in two days."},
            ]
        )
    )
    index = tmp_path / "index"
    build = [sys.executable, "-m", "shortlist.cli", "index", "build", "--docs", str(docs), "--path", str(index)]
    out = subprocess.run([*build, "--backend", backend], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    messages = [{"role": "user", "content": "how many days until my refund is issued?"}]
    replicas = 2 if backend == "embedded" else 1  # Qdrant's local mode allows one client per folder; a server many
    answers = []
    for _ in range(replicas):
        with server_factory(corpus_index=str(index)) as srv, srv.client() as c:
            r = c.post("/v1/retrieve", json={"scope": {"user_id": "u1"}, "messages": messages})
            assert r.status_code == 200, r.text
            answers.append([d["metadata"]["document_id"] for d in r.json()["documents"]])
    assert answers[0][:1] == ["refunds"] and all(a == answers[0] for a in answers)


def test_reduce_defaults_to_the_librarys_selector(app_factory: Any) -> None:
    """One default everywhere: /v1/reduce keeps what the library keeps (relevance), not the newest steps."""
    from shortlist.reduction import ReductionStage, openai_from_fragments, openai_to_fragments
    from shortlist.reduction._contract import ExecutionContext
    from shortlist.reduction._stage import DEFAULT_LOCAL_SELECTOR

    messages = [{"role": "user", "content": "my locker code is 4711 " + "filler " * 80}]
    messages.append({"role": "assistant", "content": "noted " + "ok " * 80})
    for i in range(6):
        messages.append({"role": "user", "content": f"unrelated chat {i} " + "weather " * 60})
        messages.append({"role": "assistant", "content": f"reply {i} " + "sunny " * 60})
    messages.append({"role": "user", "content": "what is my locker code?"})
    stage = ReductionStage.local("lib", max_chars=2500)
    library = openai_from_fragments(stage.reduce_sync(openai_to_fragments(messages), ExecutionContext()).fragments)
    with app_factory() as srv, srv.client() as c:
        default = c.post("/v1/reduce", json={"messages": messages, "max_chars": 2500}).json()["messages"]
        newest = c.post("/v1/reduce", json={"messages": messages, "max_chars": 2500, "selector": "newest"}).json()
    assert DEFAULT_LOCAL_SELECTOR == "relevance"
    assert default == library and default != newest["messages"]
    assert any("4711" in str(m.get("content")) for m in default)
