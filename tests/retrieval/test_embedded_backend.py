"""EmbeddedBackend: hybrid queries, incremental upserts by hash, persistence and crash safety."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from shortlist.embeddings._base import Embedder, Vectors
from shortlist.errors import CatalogError, ConfigError
from shortlist.retrieval import Document, EmbeddedBackend
from shortlist.retrieval._hash_embedder import HashingEmbedder


class CountingEmbedder(Embedder):
    """Wraps an embedder and counts the texts it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.texts = 0

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        self.texts += len(texts)
        return self.inner.embed_batch(texts)


def _docs(n: int, prefix: str = "doc") -> list[Document]:
    topics = ["invoice billing", "password security", "shipping delivery", "refund return", "api key developer"]
    return [
        Document(f"{prefix}{i}", f"Title {i}", f"{topics[i % 5]} article {i} with details", {"n": i % 3})
        for i in range(n)
    ]


def test_hybrid_query_returns_both_leg_scores(help_center: list[Document], minilm: Embedder) -> None:
    b = EmbeddedBackend(embedder=minilm)
    b.upsert(help_center)
    hits = b.query("reset my password", k=3)
    assert hits[0].chunk.document_id == "pw-reset"
    assert hits[0].dense is not None and hits[0].dense > 0.3 and hits[0].lexical > 0
    assert hits[0].score == pytest.approx(2 / 60)  # first on both legs: 1/60 + 1/60
    lexical_only = b.query("reset my password", k=3, use_embedder=False)
    assert lexical_only[0].dense is None and lexical_only[0].chunk.document_id == "pw-reset"
    dense_only = b.query(vector=minilm.embed(["reset my password"])[0], k=1)
    assert dense_only[0].chunk.document_id == "pw-reset" and dense_only[0].lexical == 0.0


def test_filters(help_center: list[Document], minilm: Embedder) -> None:
    b = EmbeddedBackend(embedder=minilm)
    b.upsert(help_center)
    hits = b.query("password", k=10, filters={"section": ["orders", "billing"]})
    assert hits and {h.chunk.metadata["section"] for h in hits} <= {"orders", "billing"}


def test_incremental_upsert_embeds_only_changes(tmp_path: Path) -> None:
    emb = CountingEmbedder(HashingEmbedder())
    b = EmbeddedBackend(tmp_path / "idx", embedder=emb)
    docs = _docs(20)
    assert b.upsert(docs).to_dict() == {"added": 20, "updated": 0, "unchanged": 0, "deleted": 0}
    assert emb.texts == 20
    changed = [*docs[:19], Document("doc19", "Title 19", "completely new text about llamas")]
    report = b.sync([*changed, Document("new", "New", "brand new")])
    assert (report.added, report.updated, report.unchanged, report.deleted) == (1, 1, 19, 0)
    assert emb.texts == 22
    assert b.sync(changed[:10]).deleted == 11
    assert b.count() == 10
    assert all(h.chunk.document_id != "doc19" for h in b.query("llamas", k=20))  # deleted with the others


def test_reload_after_restart_does_not_reembed(tmp_path: Path) -> None:
    emb = CountingEmbedder(HashingEmbedder())
    b = EmbeddedBackend(tmp_path / "idx", embedder=emb)
    b.upsert(_docs(50))
    before = [(h.chunk.id, h.score) for h in b.query("refund return article", k=5)]
    emb2 = CountingEmbedder(HashingEmbedder())
    b2 = EmbeddedBackend(tmp_path / "idx", embedder=emb2)
    assert b2.count() == 50 and b2.hashes() == b.hashes()
    assert emb2.texts == 0
    assert [(h.chunk.id, h.score) for h in b2.query("refund return article", k=5)] == before
    assert emb2.texts == 1  # the query only
    assert b2.upsert(_docs(50)).unchanged == 50 and emb2.texts == 1
    b2.upsert([Document("extra", "Extra", "refund return policy for extra items")])
    assert emb2.texts == 2 and b2.count() == 51


def test_only_one_generation_is_kept(tmp_path: Path) -> None:
    b = EmbeddedBackend(tmp_path / "idx", embedder=HashingEmbedder())
    for i in range(3):
        b.upsert(_docs(5, prefix=f"g{i}-"))
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["gen-000003", "manifest.json"]


def test_a_half_written_generation_is_never_loaded(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    EmbeddedBackend(root, embedder=HashingEmbedder()).upsert(_docs(10))
    # a crashed writer's leftovers: a temporary generation, a renamed but unreferenced one, a temp manifest
    (root / ".gen-000002.tmp-999-abc").mkdir()
    (root / ".gen-000002.tmp-999-abc" / "chunks.json").write_text("[[", encoding="utf-8")
    (root / "gen-000002").mkdir()
    (root / "gen-000002" / "chunks.json").write_text("[]", encoding="utf-8")
    (root / ".manifest.tmp-999-abc").write_text("{", encoding="utf-8")
    b = EmbeddedBackend(root, embedder=HashingEmbedder())
    assert b.count() == 10
    b.upsert([Document("x", "X", "another")])  # the next save replaces the leftovers
    assert EmbeddedBackend(root, embedder=HashingEmbedder()).count() == 11


@pytest.mark.slow  # a build process killed midway
def test_a_build_killed_midway_leaves_the_previous_index(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    EmbeddedBackend(root, embedder=HashingEmbedder()).upsert(_docs(30))
    # a fast random "embedder" named like the index's, and bulky metadata: the run reaches the
    # write phase quickly and spends its time writing, which is where the kill should land
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from shortlist.embeddings._base import FunctionEmbedder
        from shortlist.retrieval import Document, EmbeddedBackend
        rng = np.random.default_rng(0)
        emb = FunctionEmbedder(lambda texts: rng.normal(size=(len(texts), 384)), model_name="hashing-384")
        b = EmbeddedBackend(sys.argv[1], embedder=emb)
        docs = [Document(f"big{i}", "", f"w{i}", {"blob": "x" * 3000}) for i in range(20000)]
        print("start", flush=True)
        b.upsert(docs)
        print("done", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "start"
    # kill it while it is embedding or writing the new generation
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(p.name.startswith(".gen-") for p in root.iterdir()):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stdout.close()
    b = EmbeddedBackend(root, embedder=HashingEmbedder())
    assert b.count() in (30, 20030)  # the old index, or (if the kill came after the switch) the new one
    assert b.query("refund return", k=1)


def test_a_damaged_file_is_refused_not_half_loaded(tmp_path: Path) -> None:
    root = tmp_path / "idx"
    EmbeddedBackend(root, embedder=HashingEmbedder()).upsert(_docs(5))
    gen = json.loads((root / "manifest.json").read_text())["generation"]
    with (root / gen / "vectors.npy").open("ab") as f:
        f.write(b"junk")
    with pytest.raises(CatalogError):
        EmbeddedBackend(root, embedder=HashingEmbedder())


def test_opening_with_another_embedder_is_an_error(tmp_path: Path) -> None:
    EmbeddedBackend(tmp_path / "idx", embedder=HashingEmbedder()).upsert(_docs(3))
    with pytest.raises(ConfigError):
        EmbeddedBackend(tmp_path / "idx", embedder=HashingEmbedder(dim=64))


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(CatalogError):
        EmbeddedBackend(embedder=HashingEmbedder()).upsert([Document("a", text="x"), Document("a", text="y")])


def test_vectors_are_unit_float32(tmp_path: Path) -> None:
    b = EmbeddedBackend(tmp_path / "idx", embedder=HashingEmbedder())
    b.upsert(_docs(5))
    gen = json.loads((tmp_path / "idx" / "manifest.json").read_text())["generation"]
    v = np.load(tmp_path / "idx" / gen / "vectors.npy")
    assert v.dtype == np.float32 and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
