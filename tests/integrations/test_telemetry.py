"""OpenTelemetry spans of select, retrieve, reduce and external selector calls (the SDK's in-memory exporter)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from shortlist._types import Candidate, Query
from shortlist.integrations._core import ToolNarrower
from shortlist.rankers._exec_client import ExecSelector
from shortlist.reduction._fragments import ContextFragment
from shortlist.reduction._stage import ReductionStage
from shortlist.retrieval import CorpusRetriever, Document
from shortlist.selection._narrowing import anarrow, narrow
from shortlist.testing import FailingSelector, StaticSelector

CANDS = tuple(Candidate(f"tool_{i}", description=f"does thing number {i} " * 5) for i in range(20))
BEHAVE = str(Path(__file__).parents[1] / "fixtures" / "selectors" / "behave.py")


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # set by an earlier module: the global provider is set once
        return current
    sdk = TracerProvider()
    trace.set_tracer_provider(sdk)
    return sdk


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.shutdown()  # also stops exporting to this test's exporter


def only(exporter: InMemorySpanExporter, name: str) -> Any:
    [span] = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def test_a_narrowed_turn_is_a_retrieval_span_with_the_decision(spans: InMemorySpanExporter) -> None:
    narrow(StaticSelector(["tool_3", "tool_1", "tool_5"]), Query("do thing three", k=2), CANDS)
    span = only(spans, "shortlist.select")
    attrs = dict(span.attributes)
    assert attrs["gen_ai.operation.name"] == "retrieval" and attrs["gen_ai.data_source.id"] == "tools"
    assert attrs["gen_ai.request.top_k"] == 2 and attrs["shortlist.selector"] == "static"
    assert attrs["shortlist.selected"] == ("tool_3", "tool_1") and attrs["shortlist.ranked"] == ("tool_3", "tool_1")
    assert attrs["shortlist.fallback"] == "" and attrs["shortlist.narrowed"] is True
    assert attrs["shortlist.candidates"] == 20
    assert attrs["shortlist.tokens_saved"] > 8 * attrs["shortlist.tokens_offered"] > 0
    assert "gen_ai.retrieval.query.text" not in attrs  # content is opt-in
    assert span.kind == SpanKind.INTERNAL


async def test_a_fallback_says_why_and_offers_everything(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    await anarrow(FailingSelector(), Query("anything", k=3), CANDS)
    attrs = dict(only(spans, "shortlist.select").attributes)
    assert attrs["shortlist.fallback"] == "error" and attrs["shortlist.selector"] == "failing"
    assert len(attrs["shortlist.selected"]) == 20 and attrs["shortlist.tokens_saved"] == 0
    assert attrs["gen_ai.retrieval.query.text"] == "anything"


def test_an_integration_turn_and_its_search_are_spans(spans: InMemorySpanExporter) -> None:
    narrower = ToolNarrower(selector="bm25", k=2)
    narrower.choose(CANDS, "thing number 7")
    narrower.find(CANDS, "thing number 9")
    names = [s.name for s in spans.get_finished_spans()]
    assert names == ["shortlist.select", "shortlist.select"]


def test_corpus_retrieval_and_reduction_spans(spans: InMemorySpanExporter) -> None:
    corpus = CorpusRetriever(
        [
            Document("visa", "Visa rules", "A visa is needed to enter the country for tourism."),
            Document("x", "Cats", "Cats purr."),
        ],
        scoring="lexical",
    )
    corpus.retrieve("do I need a visa for tourism?")
    attrs = dict(only(spans, "shortlist.retrieve").attributes)
    assert attrs["gen_ai.data_source.id"] == "corpus" and attrs["shortlist.documents"] == ("visa",)

    frags = [ContextFragment(id=f"m{i}", kind="user" if i % 2 else "assistant", text="word " * 200) for i in range(10)]
    ReductionStage.local("fit", max_tokens=500).reduce_sync(frags)
    attrs = dict(only(spans, "shortlist.reduce").attributes)
    assert attrs["shortlist.tokens_before"] > 1000 >= 500 >= attrs["shortlist.tokens_after"] > 0
    assert attrs["shortlist.fragments"] == 10 and attrs["shortlist.skipped"] is False


def test_a_reduction_over_budget_is_an_error_span(spans: InMemorySpanExporter) -> None:
    from shortlist.errors import ContextBudgetError

    frags = [
        ContextFragment(id="s", kind="system", text="rule " * 400),
        ContextFragment(id="u", kind="user", text="hi"),
    ]
    with pytest.raises(ContextBudgetError):
        ReductionStage.local("fit", max_tokens=50).reduce_sync(frags)
    span = only(spans, "shortlist.reduce")
    assert span.status.status_code == StatusCode.ERROR and span.attributes["error.type"] == "ContextBudgetError"


@pytest.mark.slow
def test_an_external_selector_call_is_a_client_span_inside_the_select_span(spans: InMemorySpanExporter) -> None:
    selector = ExecSelector("behave", sys.executable, [BEHAVE, "answer", "tool_2"])
    narrow(selector, Query("x", k=1), CANDS)
    exec_span, select_span = spans.get_finished_spans()  # type: Any, Any
    assert exec_span.name == "shortlist.exec" and exec_span.kind == SpanKind.CLIENT
    assert exec_span.parent is not None and exec_span.parent.span_id == select_span.context.span_id
    assert dict(exec_span.attributes)["shortlist.exec.mode"] == "spawn"
    assert dict(select_span.attributes)["shortlist.selected"] == ("tool_2",)

    failing = ExecSelector("behave", sys.executable, [BEHAVE, "bad_json"])
    narrow(failing, Query("x", k=1), CANDS)
    failed: Any = [s for s in spans.get_finished_spans() if s.name == "shortlist.exec"][-1]
    assert failed.attributes["error.type"] == "SelectorProtocolError"


@pytest.mark.slow  # a fresh interpreter process
def test_without_opentelemetry_everything_works_and_nothing_is_traced() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from shortlist import _telemetry as telemetry\n"
        "from shortlist.selection._narrowing import narrow\n"
        "from shortlist.testing import StaticSelector\n"
        "from shortlist._types import Candidate, Query\n"
        "turn = narrow(StaticSelector(['b']), Query('q', k=1), [Candidate('a'), Candidate('b')])\n"
        "assert turn.ids == ('b',) and not telemetry.enabled()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
