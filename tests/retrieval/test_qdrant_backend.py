"""QdrantBackend in local mode, and congruence with the embedded backend on the same data."""

from __future__ import annotations

from pathlib import Path

import pytest

from shortlist.embeddings._base import Embedder
from shortlist.errors import ConfigError
from shortlist.retrieval import CorpusRetriever, Document, EmbeddedBackend
from shortlist.retrieval._hash_embedder import HashingEmbedder

qdrant = pytest.importorskip("shortlist.retrieval._backends.qdrant", reason="needs the qdrant extra")
QdrantBackend = qdrant.QdrantBackend

QUERIES = [
    "I forgot my password",
    "how long does delivery take to Germany",
    "return an item for a refund",
    "where are my invoices",
    "secure my account with an authenticator app",
    "rotate my API key",
]


@pytest.fixture(scope="module")
def both(minilm: Embedder, help_center: list[Document]) -> tuple[EmbeddedBackend, object]:
    emb = EmbeddedBackend(embedder=minilm)
    emb.upsert(help_center)
    qd = QdrantBackend(":memory:", embedder=minilm)
    qd.upsert(help_center)
    return emb, qd


@pytest.mark.parametrize("query", QUERIES)
def test_same_top_results_as_the_embedded_backend(both: tuple[EmbeddedBackend, object], query: str) -> None:
    emb, qd = both
    a = emb.query(query, k=3)
    b = qd.query(query, k=3)  # type: ignore[attr-defined]
    assert [h.chunk.id for h in a] == [h.chunk.id for h in b]
    for x, y in zip(a, b, strict=True):
        assert x.score == pytest.approx(y.score)
        assert x.dense == pytest.approx(y.dense, abs=1e-4)
    assert a[0].lexical == pytest.approx(b[0].lexical, rel=1e-3)  # same BM25 formula and statistics


@pytest.mark.parametrize("query", [*QUERIES, "Explain Plato's allegory of the cave."])
def test_corpus_retriever_answers_the_same_on_both(both: tuple[EmbeddedBackend, object], query: str) -> None:
    emb, qd = both
    a = CorpusRetriever(backend=emb).retrieve(query)
    b = CorpusRetriever(backend=qd).retrieve(query)  # type: ignore[arg-type]
    assert [m.id for m in a] == [m.id for m in b]


def test_filters_count_and_hashes(both: tuple[EmbeddedBackend, object], help_center: list[Document]) -> None:
    _, qd = both
    hits = qd.query("password refund", k=10, filters={"section": "orders"})  # type: ignore[attr-defined]
    assert hits and {h.chunk.metadata["section"] for h in hits} == {"orders"}
    assert qd.count() == len(help_center)  # type: ignore[attr-defined]
    assert qd.hashes() == {d.id: d.content_hash() for d in help_center}  # type: ignore[attr-defined]


def test_incremental_sync_and_delete() -> None:
    qd = QdrantBackend(":memory:", embedder=HashingEmbedder(), collection="inc")
    docs = [Document(f"d{i}", f"T{i}", f"text number {i} about topic {i % 3}") for i in range(12)]
    assert qd.upsert(docs).added == 12
    changed = [*docs[:11], Document("d11", "T11", "now about llamas")]
    report = qd.sync(changed[:6] + changed[11:])
    assert (report.added, report.updated, report.unchanged, report.deleted) == (0, 1, 6, 5)
    assert qd.count() == 7
    assert qd.query("llamas", k=1)[0].chunk.document_id == "d11"
    assert qd.delete(["d0", "missing"]) == 1 and qd.count() == 6


def test_local_path_survives_a_restart(tmp_path: Path) -> None:
    docs = [Document("a", "Alpha", "alpha text about cats"), Document("b", "Beta", "beta text about dogs")]
    qd = QdrantBackend(path=str(tmp_path / "q"), embedder=HashingEmbedder())
    qd.upsert(docs)
    qd.close()
    again = QdrantBackend(path=str(tmp_path / "q"), embedder=HashingEmbedder())
    try:
        assert again.count() == 2
        assert again.upsert(docs).unchanged == 2
        assert again.query("dogs", k=1)[0].chunk.document_id == "b"
    finally:
        again.close()
    with pytest.raises(ConfigError):
        QdrantBackend(path=str(tmp_path / "q"), embedder=HashingEmbedder(dim=64))


def test_one_location_only() -> None:
    with pytest.raises(ConfigError):
        QdrantBackend(":memory:", url="http://127.0.0.1:6333", embedder=HashingEmbedder())
    with pytest.raises(ConfigError):
        QdrantBackend(":memory:")


def test_a_server_that_cannot_be_reached_is_an_operational_error_that_may_pass() -> None:
    """Nothing listens on the port: the refused connection is the index server being down (503 in the
    service), not a qdrant-client exception (a 500) or a caller's mistake."""
    from loopback import free_port
    from shortlist.errors import OperationalError, UsageError

    with pytest.raises(OperationalError, match="index server unavailable") as caught:
        QdrantBackend(
            url=f"http://127.0.0.1:{free_port()}",
            embedder=HashingEmbedder(16),
            client_options={"check_compatibility": False},  # no version probe on a thread of its own
        )
    assert caught.value.retry_after == 1.0 and not isinstance(caught.value, UsageError)
