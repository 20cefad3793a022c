"""CorpusRetriever: the latest user turn in, relevant passages (type "document") or nothing out."""

from __future__ import annotations

import pytest

from shortlist._events import Event, event_hooks
from shortlist.embeddings._base import Embedder
from shortlist.errors import ConfigError
from shortlist.retrieval import CorpusRetriever, Document
from shortlist.retrieval._corpus import GroundingRetrieved, Relevance
from shortlist.retrieval._document import Chunker

OFF_TOPIC = [
    "What is the meaning of the last stanza of Keats's Ode to a Nightingale?",
    "How often should I water tomato seedlings?",
    "Who won the rugby world cup in 1995?",
    "Explain Plato's allegory of the cave.",
]


@pytest.fixture(scope="module")
def retriever(minilm: Embedder, help_center: list[Document]) -> CorpusRetriever:
    return CorpusRetriever(help_center, embedder=minilm, k=3)


def _user(text: str) -> list[dict[str, object]]:
    return [{"role": "system", "content": "You are support."}, {"role": "user", "content": text}]


@pytest.mark.parametrize(
    ("question", "doc_id"),
    [
        ("I forgot my password, how do I change it?", "pw-reset"),
        ("how long until my parcel arrives", "shipping"),
        ("can I get my money back for a jacket I bought last week?", "refunds"),
        ("where do I find the PDF invoice of my order", "invoices"),
    ],
)
def test_relevant_document_comes_first(retriever: CorpusRetriever, question: str, doc_id: str) -> None:
    found = retriever.retrieve_context({"user_id": "u"}, _user(question))
    assert found, question
    assert found[0].metadata["document_id"] == doc_id
    assert all(m.type == "document" for m in found)


def test_results_carry_id_title_position_and_confidence(retriever: CorpusRetriever) -> None:
    (first, *_) = retriever.retrieve_context({"user_id": "u"}, _user("reset my password"))
    md = first.metadata
    assert md["document_id"] == "pw-reset" and md["citation_id"] == "pw-reset#0"
    assert md["title"] == "Reset your password"
    assert (md["chunk_index"], md["chunk_count"]) == (0, 1)
    assert md["document_metadata"] == {"section": "account"}
    assert 0.0 < first.confidence <= 1.0
    assert first.scope == {"user_id": "u"}


@pytest.mark.parametrize("question", OFF_TOPIC)
def test_nothing_relevant_returns_nothing(retriever: CorpusRetriever, question: str) -> None:
    assert retriever.retrieve_context({}, _user(question)) == []


def test_without_the_gate_the_nearest_unrelated_document_would_come_back(
    minilm: Embedder, help_center: list[Document]
) -> None:
    ungated = CorpusRetriever(help_center, embedder=minilm, relevance=None)
    assert ungated.retrieve(OFF_TOPIC[0])  # so the empty answer above is the gate's doing


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "system", "content": "reset password"}],
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
        [
            {"role": "user", "content": "reset my password"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": ""},
        ],
    ],
)
def test_a_turn_without_user_text_returns_nothing(
    retriever: CorpusRetriever, messages: list[dict[str, object]]
) -> None:
    assert retriever.retrieve_context({}, messages) == []


def test_openai_parts_and_anthropic_blocks_are_read(retriever: CorpusRetriever) -> None:
    openai = [{"role": "user", "content": [{"type": "text", "text": "how do I reset my password"}]}]
    anthropic = [{"role": "user", "content": [{"type": "text", "text": "how do I reset my password"}]}]
    for messages in (openai, anthropic):
        assert retriever.retrieve_context({}, messages)[0].metadata["document_id"] == "pw-reset"


def test_the_latest_user_turn_is_the_query(retriever: CorpusRetriever) -> None:
    messages = [
        {"role": "user", "content": "how do I reset my password"},
        {"role": "assistant", "content": "Open Settings."},
        {"role": "user", "content": "and how long does shipping take?"},
    ]
    assert retriever.retrieve_context({}, messages)[0].metadata["document_id"] == "shipping"


def test_long_documents_are_chunked_with_positions(minilm: Embedder) -> None:
    filler = " ".join(f"Paragraph about warehouse logistics number {i}." for i in range(60))
    doc = Document("manual", "Operations manual", filler + " The emergency exit code for the loading dock is 4471.")
    r = CorpusRetriever([doc], embedder=minilm, chunker=Chunker(max_words=80, overlap=10))
    (hit,) = r.retrieve("what is the emergency exit code for the loading dock?")
    md = hit.metadata
    assert md["chunk_count"] > 3 and md["chunk_index"] == md["chunk_count"] - 1
    assert "4471" in hit.content
    assert doc.text[md["char_start"] : md["char_end"]] == hit.content


def test_overlap_scoring_is_the_reference_term_overlap(help_center: list[Document]) -> None:
    r = CorpusRetriever(help_center, scoring="overlap", relevance=None)
    found = r.retrieve("invoice PDF order")
    assert found[0].metadata["document_id"] == "invoices"
    assert all(m.type == "document" and m.confidence > 0 for m in found)
    assert r.retrieve("sonnet nightingale stanza") == []  # zero overlap is dropped


def test_lexical_scoring_needs_no_embedder(help_center: list[Document]) -> None:
    r = CorpusRetriever(help_center, scoring="lexical")
    assert r.retrieve("refund policy")[0].metadata["document_id"] == "refunds"
    assert r.retrieve("nightingale stanza") == []


def test_max_chunks_per_document_and_k(minilm: Embedder) -> None:
    text = " ".join(["Refunds are paid to the original card within five days."] * 40)
    r = CorpusRetriever([Document("r", "Refunds", text)], embedder=minilm, chunker=Chunker(50, 5), k=5)
    assert len(r.retrieve("when is my refund paid")) == 1
    r2 = CorpusRetriever(backend=r.backend, k=2, max_chunks_per_document=3)
    assert len(r2.retrieve("when is my refund paid")) == 2


def test_filters_restrict_the_corpus(minilm: Embedder, help_center: list[Document]) -> None:
    r = CorpusRetriever(help_center, embedder=minilm, filters={"section": "orders"})
    assert {m.metadata["document_id"] for m in r.retrieve("reset password refund")} <= {"shipping", "refunds"}


def test_retrieval_is_an_event(retriever: CorpusRetriever) -> None:
    seen: list[Event] = []
    with event_hooks(seen.append):
        retriever.retrieve("reset password")
        retriever.retrieve(OFF_TOPIC[0])
    events = [e for e in seen if isinstance(e, GroundingRetrieved)]
    assert [e.abstained for e in events] == [False, True]


def test_relevance_gate_rules() -> None:
    gate = Relevance()
    assert gate.answers(0.5, 0.0)
    assert gate.answers(0.3, 0.5) and not gate.answers(0.3, 0.0)
    assert not gate.answers(0.1, 1.0)
    assert gate.answers(None, 0.5, 4) and not gate.answers(None, 0.25, 4)  # 2 of 4 terms, not 1
    assert gate.answers(None, 1.0, 1) and not gate.answers(None, 0.05, 40)
    assert gate.keeps(0.21, 0.0) and not gate.keeps(0.1, 0.0)


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError):
        CorpusRetriever()
    with pytest.raises(ConfigError):
        CorpusRetriever([], scoring="fuzzy")  # type: ignore[arg-type]
