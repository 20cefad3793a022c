"""``EmbeddedBackend``: the in-process default index (bm25s + a numpy matrix), persisted to a folder.

Layout of an index folder::

    INDEX/manifest.json         points at the current generation; replaced atomically
    INDEX/gen-000007/           chunks.json, vectors.npy, bm25/ (bm25s files)

A save writes a complete new generation into a temporary folder, fsyncs it, renames it into
place and only then replaces ``manifest.json`` (write to a temporary file, fsync, ``os.replace``).
A crash at any point leaves the previous manifest pointing at the previous complete generation,
so a half-written index is never loaded. The manifest also records each file's size and sha256;
a load checks that the generation is a folder of the index, that it holds exactly the files the
manifest lists, and their sizes and checksums, and refuses the index otherwise
(:class:`IndexIntegrityError`). An index written before checksums existed loads with an
:class:`IndexUnverified` warning event (sizes are still checked); the next ``shortlist index build``
(or any save) adds them without re-embedding. The manifest also records the signature of the text
analyser that made the BM25 terms (:mod:`shortlist.text`'s ``corpus`` preset); an index made with
another analyser is refused (:class:`~shortlist.errors.ConfigError`: rebuild it), one written before
signatures existed loads with an :class:`IndexUnverified` event and gets it at the next save.
:func:`verify_index` checks a whole index and lists every problem. A reload reads the vectors and
the BM25 matrices back: nothing is re-embedded.
One writer at a time per folder (readers may open it while a writer saves).

Checksums detect damage (a bad disk, a partial copy, a stray write), not tampering: whoever can
write the files can also write the manifest.
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Literal

import bm25s
import numpy as np

from shortlist.embeddings.base import Embedder, Vectors
from shortlist.errors import (
    REBUILD_INDEX_HINT,
    CatalogError,
    ConfigError,
    IndexIntegrityError,
    IndexProblem,
    ShortlistError,
)
from shortlist.events import Event, emit
from shortlist.retrieval.backends.base import (
    PREFETCH,
    Hit,
    IndexBackend,
    Progress,
    UpsertReport,
    matches_filters,
    rrf,
)
from shortlist.retrieval.document import Chunk, Chunker, Document
from shortlist.text import Analyser, analyser

__all__ = [
    "FORMAT_VERSION",
    "EmbeddedBackend",
    "IndexIntegrityError",
    "IndexProblem",
    "IndexUnverified",
    "IndexVerification",
    "verify_index",
]

# bm25s sets its own logger to DEBUG on import, which floods any host that logs at DEBUG or
# shows "Building index from tokens" on the CLI's stderr; its messages are not ours to show.
logging.getLogger("bm25s").setLevel(logging.WARNING)

#: Version of the on-disk layout.
FORMAT_VERSION = 1
_MANIFEST = "manifest.json"
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


@dataclass(frozen=True, kw_only=True)
class IndexUnverified(Event):
    """An index was loaded without a check its manifest cannot support: it was written before checksums
    (or the analyser signature) existed; ``reason`` says which."""

    name: ClassVar[str] = "retrieval.index_unverified"
    area: ClassVar[str] = "retrieval"
    level: int = logging.WARNING
    path: str = ""
    reason: str = ""


def _analyser_problem(manifest: Mapping[str, Any], current: Analyser) -> str:
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


def _read_manifest(root: Path) -> tuple[dict[str, Any], Path]:
    """The manifest of ``root`` and the generation folder it points to.

    Raises:
        IndexIntegrityError: the generation is not a ``gen-N`` folder inside ``root``.
        CatalogError: the manifest is unreadable.
    """
    where = root / _MANIFEST
    try:
        manifest = json.loads(where.read_text(encoding="utf-8"))
        generation = manifest["generation"]
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CatalogError(f"{root}: not a readable shortlist index ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(files, dict):
        raise CatalogError(f"{root}: not a readable shortlist index (malformed {_MANIFEST})")
    if not isinstance(generation, str) or not _GENERATION.fullmatch(generation):
        raise IndexIntegrityError(
            [IndexProblem(str(where), f"generation {generation!r} is not a gen-N folder of the index; refused")]
        )
    gen_dir = root / generation
    with contextlib.suppress(OSError):  # a missing folder is reported with its files
        if not gen_dir.resolve().is_relative_to(root.resolve()):
            raise IndexIntegrityError([IndexProblem(str(gen_dir), "leads outside the index folder; refused")])
    return manifest, gen_dir


def _file_problems(gen_dir: Path, manifest: Mapping[str, Any]) -> list[IndexProblem]:
    """Check that ``gen_dir`` holds exactly the manifest's files, with their sizes and sha256."""
    problems: list[IndexProblem] = []
    sizes: Mapping[str, Any] = manifest["files"]
    sums = manifest.get("sha256")
    if sums is not None and (not isinstance(sums, dict) or set(sums) != set(sizes)):
        problems.append(IndexProblem(str(gen_dir.parent / _MANIFEST), "its checksums do not list its files"))
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


def verify_index(path: str | os.PathLike[str]) -> IndexVerification:
    """Check a whole embedded index and list every problem (nothing is raised for a damaged index).

    Checks the manifest, that its generation is a folder of the index, that the folder holds exactly
    the listed files with their sizes and sha256, then reads the index (chunks, vectors, BM25) and
    checks the counts agree. An index without checksums is reported as a problem (it loads, with an
    :class:`IndexUnverified` event, but cannot be verified).

    Raises:
        CatalogError: ``path`` holds no embedded index (no ``manifest.json``).
    """
    root = Path(path)
    if not (root / _MANIFEST).is_file():
        raise CatalogError(f"{root}: no embedded index here (no {_MANIFEST})")
    try:
        manifest, gen_dir = _read_manifest(root)
    except IndexIntegrityError as exc:
        return IndexVerification(str(root), problems=exc.problems)
    except CatalogError as exc:
        return IndexVerification(str(root), problems=(IndexProblem(str(root / _MANIFEST), str(exc)),))
    problems = _file_problems(gen_dir, manifest)
    mismatch = _analyser_problem(manifest, analyser("corpus"))
    if mismatch:
        problems.append(IndexProblem(str(root / _MANIFEST), mismatch))
    checksums = isinstance(manifest.get("sha256"), dict)
    documents = 0
    if not problems:
        try:
            reader = EmbeddedBackend()
            reader._read_generation(manifest, gen_dir)
            documents = reader.count()
        except ShortlistError as exc:
            problems.append(IndexProblem(str(gen_dir), str(exc)))
    if not checksums:
        problems.append(IndexProblem(str(root / _MANIFEST), f"no checksums (built by an older version): {_REBUILD}"))
    return IndexVerification(
        str(root),
        generation=gen_dir.name,
        files=len(manifest["files"]),
        checksums=checksums,
        documents=documents,
        problems=tuple(problems),
    )


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a directory be fsynced
        _fsync_file(path)


def _top(scores: np.ndarray[Any, Any], n: int, positive_only: bool) -> list[int]:
    """Row numbers of the ``n`` best scores, best first, ties broken by row number."""
    if positive_only:
        rows = np.flatnonzero(scores > 0)
        if rows.size > n:
            rows = rows[np.argpartition(-scores[rows], n - 1)[:n]]
    else:
        rows = np.arange(scores.size) if scores.size <= n else np.argpartition(-scores, n - 1)[:n]
        rows = rows[np.isfinite(scores[rows])]
    order = np.lexsort((rows, -scores[rows]))
    return [int(r) for r in rows[order]]


def _matvec(matrix: np.ndarray[Any, Any], vector: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``matrix @ vector`` on one thread: BLAS threads waking up for a matrix-vector product
    cost more than they save on a small, busy machine (10-30 ms against 0.2 ms measured)."""
    return np.asarray(np.einsum("ij,j->i", matrix, vector), dtype=np.float32)


def _pack(vectors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Sign bits of each row, packed into uint64 words (rows padded to a multiple of 64 bits)."""
    v = np.atleast_2d(vectors)
    packed = np.packbits(v > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    out = np.ascontiguousarray(packed).view(np.uint64)
    return out if vectors.ndim == 2 else out[0]


class EmbeddedBackend(IndexBackend):
    """BM25 (bm25s, Lucene variant) and brute-force cosine over float32 vectors, in process.

    Args:
        path: the index folder; None keeps everything in memory. An existing index there is
            loaded (its chunking settings win over ``chunker``).
        embedder: embeds chunks and queries; must be the model the index was built with.
        chunker: chunking for new indexes.
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
        autosave: save after every upsert/delete when ``path`` is set (else call :meth:`save`).
        dense_search: ``"exact"`` (brute-force cosine over all vectors), ``"binary"`` (sign-bit
            Hamming prefilter of ``rescore`` candidates, then exact cosine on them) or ``"auto"``
            (exact up to ``exact_limit`` chunks, binary above). Returned dense scores are exact.
        exact_limit: the largest index searched exactly under ``"auto"``.
        rescore: candidates the binary prefilter keeps (at least 2% of the chunks and 4 x the
            prefetch). Measured with all-MiniLM-L6-v2 on 4,000 MetaTool queries: keeping 2% finds
            98.8% of the exact top 10 (1%: 95.6%, 5%: 99.8%).

    Raises:
        ConfigError: the folder holds an index built with another embedding model.
        IndexIntegrityError: the folder holds a damaged index (a file missing, unexpected, of the
            wrong size or checksum) or its manifest points outside the folder.
        CatalogError: the folder holds an unreadable index.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        embedder: Embedder | None = None,
        chunker: Chunker | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        autosave: bool = True,
        dense_search: Literal["auto", "exact", "binary"] = "auto",
        exact_limit: int = 20_000,
        rescore: int = 2_000,
    ) -> None:
        super().__init__(embedder=embedder, chunker=chunker)
        if dense_search not in ("auto", "exact", "binary"):
            raise ConfigError(f"dense_search must be 'auto', 'exact' or 'binary', not {dense_search!r}")
        self.dense_search = dense_search
        self.exact_limit = exact_limit
        self.rescore = rescore
        self._bits: np.ndarray[Any, Any] | None = None
        self._mean: Vectors | None = None
        self.path = Path(path) if path is not None else None
        self.k1, self.b, self.autosave = k1, b, autosave
        self._chunks: list[Chunk] = []
        self._vectors: Vectors | None = None
        self._doc_hash: dict[str, str] = {}
        self._tokens: list[list[str]] | None = []
        self._bm25: bm25s.BM25 | None = None
        self._masks: dict[str, np.ndarray[Any, Any]] = {}
        self._generation = 0
        self._unverified = False  # loaded from a manifest without checksums: the next save adds them
        #: Turns chunks and queries into BM25 terms (its signature is stored in the manifest).
        self.analyser: Analyser = analyser("corpus")
        self.model_name = embedder.model_name if embedder is not None else ""
        if self.path is not None and (self.path / _MANIFEST).is_file():
            self._load()

    # -- contract ------------------------------------------------------------------------------

    def upsert(self, documents: Sequence[Document], *, progress: Progress | None = None) -> UpsertReport:
        """See :meth:`IndexBackend.upsert`."""
        todo, added, updated, unchanged = self._plan(documents)
        if progress is not None and unchanged:
            progress(unchanged)
        if todo:
            chunks, vectors = self._embed_chunks(todo, progress)
            self._remove({d.id for d in todo})
            self._append(chunks, vectors)
            for doc in todo:
                self._doc_hash[doc.id] = doc.content_hash()
            self._rebuild_bm25()
            if self.autosave and self.path is not None:
                self.save()
        elif self._unverified and self.autosave and self.path is not None:
            self.save()  # an index from before checksums: rewrite it with them (nothing is re-embedded)
        return UpsertReport(added=added, updated=updated, unchanged=unchanged)

    def delete(self, document_ids: Iterable[str]) -> int:
        """See :meth:`IndexBackend.delete`."""
        ids = {i for i in document_ids if i in self._doc_hash}
        if not ids:
            return 0
        self._remove(ids)
        for doc_id in ids:
            del self._doc_hash[doc_id]
        self._rebuild_bm25()
        if self.autosave and self.path is not None:
            self.save()
        return len(ids)

    def count(self) -> int:
        """See :meth:`IndexBackend.count`."""
        return len(self._doc_hash)

    def hashes(self) -> dict[str, str]:
        """See :meth:`IndexBackend.hashes`."""
        return dict(self._doc_hash)

    def query(
        self,
        text: str = "",
        *,
        vector: Vectors | None = None,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        use_embedder: bool = True,
    ) -> list[Hit]:
        """See :meth:`IndexBackend.query`."""
        if k <= 0 or not self._chunks:
            return []
        n = max(k, PREFETCH)
        mask = self._mask(filters)
        lexical: np.ndarray[Any, Any] | None = None
        qterms = list(dict.fromkeys(self.analyser.tokens(text))) if text else []
        if qterms and self._bm25 is not None:
            lexical = np.asarray(self._bm25.get_scores(qterms), dtype=np.float32)
        qv = self._query_vector(text, vector, use_embedder) if self._vectors is not None else None
        if qv is not None and self._vectors is not None and qv.shape[0] != self._vectors.shape[1]:
            raise ConfigError(f"query vector has {qv.shape[0]} dimensions, the index {self._vectors.shape[1]}")
        legs: list[list[int]] = []
        if lexical is not None:
            lex = lexical if mask is None else np.where(mask, lexical, 0.0)
            legs.append(_top(lex, n, positive_only=True))
        if qv is not None:
            legs.append(self._dense_top(qv, n, mask))
        if not legs:
            return []
        if len(legs) == 2:
            ranked = sorted(rrf(legs).items(), key=lambda kv: -kv[1])[:k]
        elif lexical is not None:
            ranked = [(row, float(lexical[row])) for row in legs[0][:k]]
        else:
            ranked = [(row, 0.0) for row in legs[0][:k]]
        rows = [row for row, _ in ranked]
        dense = self._dot(rows, qv) if qv is not None else None
        if dense is not None and len(legs) == 1 and lexical is None:  # cosine only: the score is the cosine
            ranked = [(row, float(dense[i])) for i, row in enumerate(rows)]
        return [
            Hit(
                self._chunks[row],
                score=float(score),
                dense=None if dense is None else float(dense[i]),
                lexical=0.0 if lexical is None else float(lexical[row]),
            )
            for i, (row, score) in enumerate(ranked)
        ]

    def _dot(self, rows: Sequence[int], qv: Vectors) -> np.ndarray[Any, Any]:
        assert self._vectors is not None
        return _matvec(self._vectors[np.asarray(rows, dtype=np.int64)], qv)

    def _dense_top(self, qv: Vectors, n: int, mask: np.ndarray[Any, Any] | None) -> list[int]:
        """Rows of the ``n`` nearest vectors: exact, or binary-quantised prefilter + exact rescoring."""
        assert self._vectors is not None
        total = self._vectors.shape[0]
        binary = self.dense_search == "binary" or (self.dense_search == "auto" and total > self.exact_limit)
        if not binary:
            dense = _matvec(self._vectors, qv)
            if mask is not None:
                dense = np.where(mask, dense, -np.inf)
            return _top(dense, n, positive_only=False)
        bits, mean = self._binary()
        qbits = _pack(qv - mean)
        ham = np.bitwise_count(bits[0] ^ qbits[0]).astype(np.uint16)
        for j in range(1, bits.shape[0]):
            ham += np.bitwise_count(bits[j] ^ qbits[j])
        if mask is not None:
            ham = np.where(mask, ham, np.uint16(65535))
        m = min(total, max(self.rescore, total // 50, 4 * n))
        cand = np.arange(total) if m >= total else np.argpartition(ham, m - 1)[:m]
        if mask is not None:
            cand = cand[mask[cand]]
        exact = np.full(total, -np.inf, dtype=np.float32)
        exact[cand] = _matvec(self._vectors[cand], qv)
        return _top(exact, n, positive_only=False)

    def _binary(self) -> tuple[np.ndarray[Any, Any], Vectors]:
        if self._bits is None:
            assert self._vectors is not None
            self._mean = np.asarray(self._vectors.mean(axis=0), dtype=np.float32)
            self._bits = np.ascontiguousarray(_pack(self._vectors - self._mean).T)
        assert self._mean is not None
        return self._bits, self._mean

    # -- state changes -------------------------------------------------------------------------

    def _remove(self, doc_ids: set[str]) -> None:
        if not doc_ids or not self._chunks:
            return
        keep = [i for i, c in enumerate(self._chunks) if c.document_id not in doc_ids]
        if len(keep) == len(self._chunks):
            return
        self._chunks = [self._chunks[i] for i in keep]
        if self._vectors is not None:
            self._vectors = np.ascontiguousarray(self._vectors[keep])
        if self._tokens is not None:
            self._tokens = [self._tokens[i] for i in keep]

    def _append(self, chunks: list[Chunk], vectors: Vectors | None) -> None:
        if self._tokens is None:  # loaded from disk: tokens are rebuilt only when needed
            self._tokens = [self.analyser.tokens(c.index_text) for c in self._chunks]
        self._tokens.extend(self.analyser.tokens(c.index_text) for c in chunks)
        if vectors is not None:
            if self._vectors is not None and self._vectors.shape[1] != vectors.shape[1]:
                raise ConfigError("the embedder's dimension differs from the index's")
            base = self._vectors if self._vectors is not None else np.zeros((0, vectors.shape[1]), np.float32)
            if base.shape[0] != len(self._chunks):
                raise ConfigError("this index has no vectors for some chunks: rebuild it with one embedder")
            self._vectors = np.ascontiguousarray(np.vstack([base, vectors]), dtype=np.float32)
        elif self._vectors is not None and chunks:
            raise ConfigError("this index holds vectors: upsert into it with an embedder")
        self._chunks.extend(chunks)

    def _rebuild_bm25(self) -> None:
        self._masks.clear()
        self._bits = None
        if not self._chunks:
            self._bm25 = None
            return
        if self._tokens is None:
            self._tokens = [self.analyser.tokens(c.index_text) for c in self._chunks]
        model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        model.index(self._tokens, show_progress=False)
        self._bm25 = model

    def _mask(self, filters: Mapping[str, Any] | None) -> np.ndarray[Any, Any] | None:
        if not filters:
            return None
        key = json.dumps(filters, sort_keys=True, default=str)
        mask = self._masks.get(key)
        if mask is None:
            mask = np.fromiter((matches_filters(c.metadata, filters) for c in self._chunks), bool, len(self._chunks))
            if len(self._masks) > 64:
                self._masks.clear()
            self._masks[key] = mask
        return mask

    # -- persistence ---------------------------------------------------------------------------

    def save(self) -> None:
        """Write the index as a new generation and switch the manifest to it atomically.

        Raises:
            ConfigError: the backend has no ``path``.
        """
        if self.path is None:
            raise ConfigError("this EmbeddedBackend has no path to save to")
        root = self.path
        root.mkdir(parents=True, exist_ok=True)
        gen = self._generation + 1
        tmp = root / f".gen-{gen:06d}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        files: dict[str, int] = {}
        sums: dict[str, str] = {}
        chunks_path = tmp / "chunks.json"
        rows = [
            [
                c.id,
                c.document_id,
                c.title,
                c.text,
                c.position,
                c.count,
                c.char_start,
                c.char_end,
                dict(c.metadata),
                c.doc_hash,
            ]
            for c in self._chunks
        ]
        chunks_path.write_text(json.dumps(rows, ensure_ascii=False, default=str), encoding="utf-8")
        if self._vectors is not None:
            np.save(tmp / "vectors.npy", self._vectors)
        if self._bm25 is not None:
            self._bm25.save(str(tmp / "bm25"))
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
        manifest = {
            "format": FORMAT_VERSION,
            "generation": final.name,
            "embedder": self.model_name,
            "dim": None if self._vectors is None else int(self._vectors.shape[1]),
            "chunking": self.chunker.to_dict(),
            "bm25": {"k1": self.k1, "b": self.b},
            "analyser": self.analyser.signature,
            "documents": len(self._doc_hash),
            "chunks": len(self._chunks),
            "files": files,
            "sha256": sums,
        }
        mtmp = root / f".manifest.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        mtmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        _fsync_file(mtmp)
        os.replace(mtmp, root / _MANIFEST)
        _fsync_dir(root)
        self._generation = gen
        self._unverified = False
        for old in root.iterdir():  # older generations and leftovers of crashed writers
            if old.name != final.name and (old.name.startswith(("gen-", ".gen-", ".manifest.tmp"))):
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink(missing_ok=True)

    def _load(self) -> None:
        assert self.path is not None
        manifest, gen_dir = _read_manifest(self.path)
        try:
            problems = _file_problems(gen_dir, manifest)
        except (ValueError, TypeError, AttributeError) as exc:
            raise CatalogError(f"{self.path}: not a readable shortlist index ({exc})") from exc
        if problems:
            raise IndexIntegrityError(problems)
        built_with = str(manifest.get("embedder") or "")
        if self.embedder is not None and built_with and built_with != self.embedder.model_name:
            raise ConfigError(
                f"index built with embedder {built_with!r}, opened with {self.embedder.model_name!r}",
                source=str(self.path),
            )
        mismatch = _analyser_problem(manifest, self.analyser)
        if mismatch:
            raise ConfigError(f"index {mismatch}", source=str(self.path))
        self._read_generation(manifest, gen_dir)
        self._unverified = not isinstance(manifest.get("sha256"), dict)
        if self._unverified:
            emit(IndexUnverified(path=str(self.path), reason=f"built without checksums; {_REBUILD} to add them"))
        if manifest.get("analyser") is None:
            self._unverified = True  # the next save records the analyser
            emit(
                IndexUnverified(
                    path=str(self.path),
                    reason=f"built before the text analyser was recorded; its terms are assumed to be the "
                    f"'corpus' preset's ({_REBUILD} to record it)",
                )
            )

    def _read_generation(self, manifest: Mapping[str, Any], gen_dir: Path) -> None:
        """Read the chunks, vectors and BM25 matrices of a checked generation into this backend.

        Raises:
            CatalogError: a file does not parse, or the counts disagree.
        """
        try:
            if int(manifest.get("format", 0)) != FORMAT_VERSION:
                raise CatalogError(f"{gen_dir}: index format {manifest.get('format')} is not {FORMAT_VERSION}")
            rows = json.loads((gen_dir / "chunks.json").read_bytes())
            self.model_name = str(manifest.get("embedder") or "") or self.model_name
            self.chunker = Chunker(**manifest["chunking"])
            self.k1, self.b = float(manifest["bm25"]["k1"]), float(manifest["bm25"]["b"])
            chunks = [
                Chunk(r[0], r[1], r[2], r[3], int(r[4]), int(r[5]), int(r[6]), int(r[7]), r[8], r[9]) for r in rows
            ]
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
            raise CatalogError(
                f"{gen_dir}: vectors of {vectors.shape[1]} dimensions, the manifest says {manifest['dim']}"
            )
        self._chunks = chunks
        self._doc_hash = {c.document_id: c.doc_hash for c in chunks}
        self._vectors = vectors
        self._bm25 = bm25
        self._tokens = None
        self._masks.clear()
        self._bits = None
        self._generation = int(gen_dir.name.split("-")[-1])
