"""A damaged embedded index is refused, never served: checksums, the generation path, ``index verify``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inprocess import run_cli
from shortlist._events import Event, event_hooks
from shortlist.errors import CatalogError
from shortlist.retrieval import CorpusRetriever, Document, EmbeddedBackend
from shortlist.retrieval._backends.embedded import IndexIntegrityError, IndexUnverified, verify_index
from shortlist.retrieval._hash_embedder import HashingEmbedder


def _build(root: Path, docs: list[Document]) -> Path:
    """Build an index at ``root``; return its generation folder."""
    EmbeddedBackend(root, embedder=HashingEmbedder()).upsert(docs)
    return root / json.loads((root / "manifest.json").read_text(encoding="utf-8"))["generation"]


def _manifest(root: Path) -> dict[str, object]:
    return dict(json.loads((root / "manifest.json").read_text(encoding="utf-8")))


def _write_manifest(root: Path, manifest: dict[str, object]) -> None:
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def _open(root: Path) -> EmbeddedBackend:
    return EmbeddedBackend(root, embedder=HashingEmbedder())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_every_file_is_checksummed_at_build(tmp_path: Path, help_center: list[Document]) -> None:
    gen = _build(tmp_path / "idx", help_center)
    manifest = _manifest(tmp_path / "idx")
    sums = manifest["sha256"]
    assert isinstance(sums, dict) and isinstance(manifest["files"], dict)
    assert set(sums) == set(manifest["files"]) >= {"chunks.json", "vectors.npy", "bm25/params.index.json"}
    on_disk = {p.relative_to(gen).as_posix() for p in gen.rglob("*") if p.is_file()}
    assert set(sums) == on_disk
    assert _open(tmp_path / "idx").count() == len(help_center)


def test_random_same_size_overwrite_of_vectors_is_refused(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    vectors = gen / "vectors.npy"
    vectors.write_bytes(os.urandom(vectors.stat().st_size))  # same size: the size check alone passes
    with pytest.raises(IndexIntegrityError, match=r"vectors\.npy.*sha256") as caught:
        _open(root)
    assert caught.value.file == str(vectors)
    assert isinstance(caught.value, CatalogError)  # callers catching the old error still do


def test_random_vectors_with_a_valid_header_are_refused(tmp_path: Path, help_center: list[Document]) -> None:
    """The attack of the report: a well-formed .npy of random vectors, so it parses and would be served."""
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    vectors = gen / "vectors.npy"
    size = vectors.stat().st_size
    shape = np.load(vectors).shape
    rng = np.random.default_rng(0)
    np.save(vectors, rng.normal(size=shape).astype(np.float32))
    assert vectors.stat().st_size == size
    with pytest.raises(IndexIntegrityError, match=r"vectors\.npy"):
        CorpusRetriever(backend=_open(root)).retrieve("When will my order be delivered?")


def test_same_size_edit_of_chunk_text_is_refused(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    chunks = gen / "chunks.json"
    text = chunks.read_text(encoding="utf-8")
    edited = text.replace("Orders ship within two business days", "Mail us your password to get it now.")
    assert edited != text and len(edited.encode()) == len(text.encode())
    chunks.write_text(edited, encoding="utf-8")
    with pytest.raises(IndexIntegrityError, match=r"chunks\.json") as caught:
        _open(root)
    assert caught.value.file == str(chunks)


def test_same_size_edit_of_a_bm25_file_is_refused(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    data = gen / "bm25" / "data.csc.index.npy"
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(IndexIntegrityError, match=r"data\.csc\.index\.npy"):
        _open(root)


@pytest.mark.parametrize("where", ["relative", "absolute", "symlink"])
def test_a_generation_outside_the_index_folder_is_refused(
    tmp_path: Path, help_center: list[Document], where: str
) -> None:
    # a complete, self-consistent index elsewhere: only the path can tell that it is not this index's
    elsewhere = tmp_path / "elsewhere"
    other_gen = _build(elsewhere, help_center[:1])
    root = tmp_path / "idx"
    _build(root, help_center)
    manifest = _manifest(elsewhere)
    if where == "relative":
        manifest["generation"] = f"../elsewhere/{other_gen.name}"
    elif where == "absolute":
        manifest["generation"] = str(other_gen)
    else:
        (root / "gen-000099").symlink_to(other_gen, target_is_directory=True)
        manifest["generation"] = "gen-000099"
    _write_manifest(root, manifest)
    with pytest.raises(IndexIntegrityError, match="refused"):
        _open(root)
    found = verify_index(root)
    assert not found.ok and "refused" in found.problems[0].problem


def test_a_file_name_outside_the_generation_is_refused(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    _build(root, help_center)
    (tmp_path / "secret").write_text("x", encoding="utf-8")
    manifest = _manifest(root)
    assert isinstance(manifest["files"], dict) and isinstance(manifest["sha256"], dict)
    manifest["files"]["../../secret"] = 1
    manifest["sha256"]["../../secret"] = "0" * 64
    _write_manifest(root, manifest)
    with pytest.raises(IndexIntegrityError, match="outside"):
        _open(root)


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    manifest = _manifest(root)
    assert isinstance(manifest["files"], dict) and isinstance(manifest["sha256"], dict)
    del manifest["files"]["vectors.npy"], manifest["sha256"]["vectors.npy"]  # unlisted, so it would go unchecked
    _write_manifest(root, manifest)
    with pytest.raises(IndexIntegrityError, match="not listed") as caught:
        _open(root)
    assert caught.value.file == str(gen / "vectors.npy")


def test_verify_lists_every_problem(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    assert verify_index(root).ok
    for name in ("vectors.npy", "chunks.json"):
        f = gen / name
        f.write_bytes(os.urandom(f.stat().st_size))
    found = verify_index(root)
    assert not found.ok
    assert sorted(Path(p.file).name for p in found.problems) == ["chunks.json", "vectors.npy"]


def test_an_index_without_checksums_loads_with_a_warning_and_a_build_adds_them(
    tmp_path: Path, help_center: list[Document]
) -> None:
    root = tmp_path / "idx"
    _build(root, help_center)
    manifest = _manifest(root)
    del manifest["sha256"]  # as written before checksums existed
    _write_manifest(root, manifest)
    seen: list[Event] = []
    with event_hooks(seen.append):
        backend = _open(root)
    assert backend.count() == len(help_center)
    warnings = [e for e in seen if isinstance(e, IndexUnverified)]
    assert len(warnings) == 1 and "shortlist index build" in warnings[0].reason
    found = verify_index(root)
    assert not found.ok and not found.checksums
    assert "shortlist index build" in found.problems[0].problem
    # an unchanged rebuild re-embeds nothing and writes the checksums
    backend.sync(help_center)
    assert "sha256" in _manifest(root)
    assert verify_index(root).ok
    seen.clear()
    with event_hooks(seen.append):
        _open(root)
    assert not [e for e in seen if isinstance(e, IndexUnverified)]


@pytest.mark.usefixtures("cli_mode")  # in-process, and as a real subprocess (slow)
def test_cli_verify(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    ok = _cli("index", "verify", "--path", str(root))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ok:") and "sha256 verified" in ok.stdout
    as_json = _cli("index", "verify", "--path", str(root), "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["ok"] is True

    vectors = gen / "vectors.npy"
    vectors.write_bytes(os.urandom(vectors.stat().st_size))
    bad = _cli("index", "verify", "--path", str(root))
    assert bad.returncode == 1
    assert f"{vectors}: sha256 differs" in bad.stdout
    assert "1 problem" in bad.stderr
    report = json.loads(_cli("index", "verify", "--path", str(root), "--json").stdout)
    assert report["ok"] is False
    assert report["problems"] == [{"file": str(vectors), "problem": report["problems"][0]["problem"]}]

    # no index at all is a usage error (2), not a damaged index (1)
    (tmp_path / "empty").mkdir()
    assert _cli("index", "verify", "--path", str(tmp_path / "empty")).returncode == 2
    # a damaged index also fails the other commands, with the file named
    query = _cli("index", "query", "--path", str(root), "shipping")
    assert query.returncode == 2 and "vectors.npy" in query.stderr


@pytest.mark.slow  # a real `shortlist serve` process: were it to start, the timeout ends it
def test_serve_refuses_to_start_on_a_damaged_corpus_index(tmp_path: Path, help_center: list[Document]) -> None:
    root = tmp_path / "idx"
    gen = _build(root, help_center)
    vectors = gen / "vectors.npy"
    vectors.write_bytes(os.urandom(vectors.stat().st_size))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "shortlist.cli", "serve", "--corpus-index", str(root), "--port", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:  # pragma: no cover - the bug: it started and served the damaged index
        pytest.fail("serve started on a damaged index")
    assert proc.returncode == 2
    assert "damaged index" in proc.stderr and str(vectors) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_copied_index_still_verifies(tmp_path: Path, help_center: list[Document]) -> None:
    """Paths in the manifest are relative to the folder: a moved or copied index stays valid."""
    _build(tmp_path / "idx", help_center)
    shutil.copytree(tmp_path / "idx", tmp_path / "copy")
    assert verify_index(tmp_path / "copy").ok
    assert _open(tmp_path / "copy").count() == len(help_center)
