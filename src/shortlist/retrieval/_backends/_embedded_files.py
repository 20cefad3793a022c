"""The embedded index's folder: its manifest, its generations, their integrity, and durable writes.

Layout of an index folder::

    INDEX/manifest.json         points at the current generation; replaced atomically
    INDEX/gen-000007/           chunks.json, vectors.npy, bm25/ (bm25s files)

A generation is written complete into a temporary folder, fsynced, renamed into place, and only
then does ``manifest.json`` point at it (a temporary file, fsync, ``os.replace``). The manifest
records each file's size and sha256, and the text analyser's signature. Used by
:class:`shortlist.retrieval._backends.embedded.EmbeddedBackend` and its ``verify_index``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import bm25s
import numpy as np

from shortlist._text import Analyser, analyser
from shortlist.embeddings._base import Vectors
from shortlist.errors import REBUILD_INDEX_HINT, CatalogError, IndexIntegrityError, IndexProblem, ShortlistError
from shortlist.retrieval._document import Chunk, Chunker

__all__ = [
    "FORMAT_VERSION",
    "MANIFEST",
    "Generation",
    "IndexVerification",
    "analyser_problem",
    "file_problems",
    "read_generation",
    "read_manifest",
    "remove_old_generations",
    "verify_index",
    "write_generation",
]

# bm25s sets its own logger to DEBUG on import, which floods any host that logs at DEBUG or
# shows "Building index from tokens" on the CLI's stderr; its messages are not ours to show.
logging.getLogger("bm25s").setLevel(logging.WARNING)

#: Version of the on-disk layout.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: The only generation names a manifest may point to (a folder directly inside the index).
_GENERATION = re.compile(r"gen-\d{1,12}")
_REBUILD = REBUILD_INDEX_HINT


@dataclass(frozen=True, slots=True)
class IndexVerification:
    """What :func:`verify_index` found.

    Attributes:
        path: the index folder.
        generation: the generation the manifest points to ("" when unreadable).
        files: how many files were checked.
        checksums: whether the manifest holds checksums (an index built before them has none).
        documents: documents in the index (0 when it could not be read).
        problems: everything wrong, empty when the index is sound.
    """

    path: str
    generation: str = ""
    files: int = 0
    checksums: bool = False
    documents: int = 0
    problems: tuple[IndexProblem, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (an index without checksums is not ok: it cannot be verified)."""
        return not self.problems


def analyser_problem(manifest: Mapping[str, Any], current: Analyser) -> str:
    """Why the index's terms do not match ``current``'s ("" when they do or nothing is recorded)."""
    recorded = manifest.get("analyser")
    if recorded is None:
        return ""
    if isinstance(recorded, Mapping) and current.same_terms(recorded):
        return ""
    return (
        f"built with text analyser {json.dumps(recorded, sort_keys=True)}, this version analyses with "
        f"{json.dumps(current.signature, sort_keys=True)}: its BM25 terms would not match; {_REBUILD}"
    )


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_manifest(root: Path) -> tuple[dict[str, Any], Path]:
    """The manifest of ``root`` and the generation folder it points to.

    Raises:
        IndexIntegrityError: the generation is not a ``gen-N`` folder inside ``root``.
        CatalogError: the manifest is unreadable.
    """
    where = root / MANIFEST
    try:
        manifest = json.loads(where.read_text(encoding="utf-8"))
        generation = manifest["generation"]
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CatalogError(f"{root}: not a readable shortlist index ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(files, dict):
        raise CatalogError(f"{root}: not a readable shortlist index (malformed {MANIFEST})")
    if not isinstance(generation, str) or not _GENERATION.fullmatch(generation):
        raise IndexIntegrityError(
            [IndexProblem(str(where), f"generation {generation!r} is not a gen-N folder of the index; refused")]
        )
    gen_dir = root / generation
    with contextlib.suppress(OSError):  # a missing folder is reported with its files
        if not gen_dir.resolve().is_relative_to(root.resolve()):
            raise IndexIntegrityError([IndexProblem(str(gen_dir), "leads outside the index folder; refused")])
    return manifest, gen_dir


def file_problems(gen_dir: Path, manifest: Mapping[str, Any]) -> list[IndexProblem]:
    """Check that ``gen_dir`` holds exactly the manifest's files, with their sizes and sha256."""
    problems: list[IndexProblem] = []
    sizes: Mapping[str, Any] = manifest["files"]
    sums = manifest.get("sha256")
    if sums is not None and (not isinstance(sums, dict) or set(sums) != set(sizes)):
        problems.append(IndexProblem(str(gen_dir.parent / MANIFEST), "its checksums do not list its files"))
        sums = None
    if not gen_dir.is_dir():
        return [*problems, IndexProblem(str(gen_dir), "missing generation folder")]
    root = gen_dir.resolve()
    for name, size in sizes.items():
        rel = PurePosixPath(str(name))
        target = gen_dir / rel
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            problems.append(IndexProblem(str(name), "file name outside the generation folder; refused"))
            continue
        try:
            if not target.resolve().is_relative_to(root):
                problems.append(IndexProblem(str(target), "leads outside the index folder; refused"))
            elif not target.is_file():
                problems.append(IndexProblem(str(target), "missing"))
            elif target.stat().st_size != int(size):
                problems.append(IndexProblem(str(target), f"{target.stat().st_size} bytes, the manifest says {size}"))
            elif sums is not None and _sha256(target) != sums[name]:
                problems.append(IndexProblem(str(target), "sha256 differs from the manifest (the file is damaged)"))
        except (OSError, ValueError, TypeError) as exc:
            problems.append(IndexProblem(str(target), f"unreadable ({exc})"))
    listed = {PurePosixPath(str(n)).as_posix() for n in sizes}
    for p in sorted(gen_dir.rglob("*")):
        if p.is_file() and p.relative_to(gen_dir).as_posix() not in listed:
            problems.append(IndexProblem(str(p), "not listed in the manifest"))
    return problems


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
        _fsync_file(path)


def write_generation(root: Path, gen: int, write: Callable[[Path], None], fields: Mapping[str, Any]) -> None:
    """Write generation ``gen`` of the index in ``root`` and switch the manifest to it atomically.

    ``write`` fills the generation's (temporary) folder; ``fields`` are the manifest's entries
    besides the format, the generation and the files' sizes and checksums."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".gen-{gen:06d}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    files: dict[str, int] = {}
    sums: dict[str, str] = {}
    write(tmp)
    for p in sorted(tmp.rglob("*")):
        if p.is_file():
            _fsync_file(p)
            name = p.relative_to(tmp).as_posix()
            files[name] = p.stat().st_size
            sums[name] = _sha256(p)
    _fsync_dir(tmp)
    final = root / f"gen-{gen:06d}"
    if final.exists():  # left by a crashed writer after its rename, never referenced
        shutil.rmtree(final)
    os.rename(tmp, final)
    manifest = {"format": FORMAT_VERSION, "generation": final.name, **fields, "files": files, "sha256": sums}
    mtmp = root / f".manifest.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    mtmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    _fsync_file(mtmp)
    os.replace(mtmp, root / MANIFEST)
    _fsync_dir(root)


def remove_old_generations(root: Path, gen: int) -> None:
    """Remove every generation but ``gen``, and the leftovers of crashed writers."""
    keep = f"gen-{gen:06d}"
    for old in root.iterdir():  # older generations and leftovers of crashed writers
        if old.name != keep and (old.name.startswith(("gen-", ".gen-", ".manifest.tmp"))):
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class Generation:
    """What a generation holds, read back: its settings, chunks, vectors and BM25 matrices."""

    embedder: str
    chunker: Chunker
    k1: float
    b: float
    chunks: list[Chunk]
    vectors: Vectors | None
    bm25: bm25s.BM25 | None
    number: int


def read_generation(manifest: Mapping[str, Any], gen_dir: Path) -> Generation:
    """Read the chunks, vectors and BM25 matrices of a checked generation.

    Raises:
        CatalogError: a file does not parse, or the counts disagree.
    """
    try:
        if int(manifest.get("format", 0)) != FORMAT_VERSION:
            raise CatalogError(f"{gen_dir}: index format {manifest.get('format')} is not {FORMAT_VERSION}")
        rows = json.loads((gen_dir / "chunks.json").read_bytes())
        embedder = str(manifest.get("embedder") or "")
        chunker = Chunker(**manifest["chunking"])
        k1, b = float(manifest["bm25"]["k1"]), float(manifest["bm25"]["b"])
        chunks = [Chunk(r[0], r[1], r[2], r[3], int(r[4]), int(r[5]), int(r[6]), int(r[7]), r[8], r[9]) for r in rows]
        vectors = None
        if (gen_dir / "vectors.npy").is_file():
            vectors = np.ascontiguousarray(np.load(gen_dir / "vectors.npy"), dtype=np.float32)
        bm25 = bm25s.BM25.load(str(gen_dir / "bm25")) if (gen_dir / "bm25").is_dir() else None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise CatalogError(f"{gen_dir}: not a readable shortlist index ({exc})") from exc
    if manifest.get("chunks") is not None and int(manifest["chunks"]) != len(chunks):
        raise CatalogError(f"{gen_dir}: {len(chunks)} chunks, the manifest says {manifest['chunks']}")
    if vectors is not None and (vectors.ndim != 2 or vectors.shape[0] != len(chunks)):
        raise CatalogError(f"{gen_dir}: {vectors.shape[0]} vectors for {len(chunks)} chunks")
    if vectors is not None and manifest.get("dim") is not None and vectors.shape[1] != int(manifest["dim"]):
        raise CatalogError(f"{gen_dir}: vectors of {vectors.shape[1]} dimensions, the manifest says {manifest['dim']}")
    return Generation(embedder, chunker, k1, b, chunks, vectors, bm25, int(gen_dir.name.split("-")[-1]))


def verify_index(path: str | os.PathLike[str]) -> IndexVerification:
    """Check a whole embedded index and list every problem (nothing is raised for a damaged index).

    Checks the manifest, that its generation is a folder of the index, that the folder holds exactly
    the listed files with their sizes and sha256, then reads the index (chunks, vectors, BM25) and
    checks the counts agree. An index without checksums is reported as a problem (it loads, with an
    :class:`~shortlist.retrieval._backends.embedded.IndexUnverified` event, but cannot be verified).

    Raises:
        CatalogError: ``path`` holds no embedded index (no ``manifest.json``).
    """
    root = Path(path)
    if not (root / MANIFEST).is_file():
        raise CatalogError(f"{root}: no embedded index here (no {MANIFEST})")
    try:
        manifest, gen_dir = read_manifest(root)
    except IndexIntegrityError as exc:
        return IndexVerification(str(root), problems=exc.problems)
    except CatalogError as exc:
        return IndexVerification(str(root), problems=(IndexProblem(str(root / MANIFEST), str(exc)),))
    problems = file_problems(gen_dir, manifest)
    mismatch = analyser_problem(manifest, analyser("corpus"))
    if mismatch:
        problems.append(IndexProblem(str(root / MANIFEST), mismatch))
    checksums = isinstance(manifest.get("sha256"), dict)
    documents = 0
    if not problems:
        try:
            documents = len({c.document_id for c in read_generation(manifest, gen_dir).chunks})
        except ShortlistError as exc:
            problems.append(IndexProblem(str(gen_dir), str(exc)))
    if not checksums:
        problems.append(IndexProblem(str(root / MANIFEST), f"no checksums (built by an older version): {_REBUILD}"))
    return IndexVerification(
        str(root),
        generation=gen_dir.name,
        files=len(manifest["files"]),
        checksums=checksums,
        documents=documents,
        problems=tuple(problems),
    )
