"""The optimised ONNX graph kept in the cache directory: its record, its checks, and sessions through it.

ONNX Runtime's graph optimisation (1-2.5 s of a session's creation) is done once and its result
kept (``models/`` in the cache directory) beside a record of its sha256 and of the model file it
was derived from; a graph that does not match its record is rejected (deleted, with a
:class:`ModelGraphRejected` event) and made again. Used by
:class:`shortlist.embeddings._default.DefaultEmbedder`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from shortlist._events import Event, emit
from shortlist.embeddings._model_files import file_sha256

__all__ = ["ModelGraphRejected", "graph_checks", "open_session", "session_options", "write_record"]

logger = logging.getLogger("shortlist.embeddings")


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


def reject_graph(graph: Path, reason: str, error: str = "") -> None:
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


def write_record(graph: Path, entry: dict[str, Any]) -> None:
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


def graph_checks(graph: Path, source_sha256: str) -> bool:
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
        reject_graph(graph, "no_record", str(exc))
        return False
    if not isinstance(record, dict) or record.get("source_sha256") != source_sha256:
        reject_graph(
            graph, "source", f"derived from {record.get('source_sha256') if isinstance(record, dict) else '?'}"
        )
        return False
    try:
        before = _stamp(graph)
    except OSError:
        return False
    if record.get("stat") == before:
        return True
    actual = file_sha256(graph)
    if record.get("sha256") != actual:
        reject_graph(graph, "checksum", f"sha256 {actual}, recorded {record.get('sha256')}")
        return False
    with contextlib.suppress(OSError):  # a read-only cache directory: hashed again next time
        if _stamp(graph) == before:
            write_record(graph, {**record, "stat": before})
    return True


def session_options(ort: Any, threads: int, level: Any = None) -> Any:
    """ONNX Runtime options for a session on ``threads`` threads (sequential, quiet) at optimisation ``level``
    (None: every optimisation)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if level is None else level
    return opts


def open_session(
    ort: Any,
    model_path: Path,
    threads: int,
    optimized: Path | None,
    source_sha256: Callable[[], str],
    verify_model: Callable[[], None],
) -> Any:
    """An inference session on ``threads`` threads; through the optimised graph ``optimized`` (made first
    when missing) unless None. ``source_sha256``: the model file's sha256 (recorded with a new graph);
    ``verify_model``: checks the model file before it is loaded in place of a graph that failed."""

    def options(level: Any) -> Any:
        return session_options(ort, threads, level)

    full = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
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
                "sha256": file_sha256(tmp),
                "source_sha256": source_sha256(),
                "onnxruntime": ort.__version__,
            }
            write_record(optimized, entry)
            os.replace(tmp, optimized)  # atomic: a concurrent process sees all of it or nothing
        except Exception as exc:  # a read-only or full cache directory: load the original
            logger.debug("default embedder: cannot keep the optimised graph in %s: %s", optimized, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return ort.InferenceSession(str(model_path), options(full), providers=["CPUExecutionProvider"])
    try:
        return ort.InferenceSession(str(optimized), options(full), providers=["CPUExecutionProvider"])
    except Exception as exc:  # a damaged file: drop it, load the (verified) original
        reject_graph(optimized, "unloadable", str(exc))
        verify_model()
        return ort.InferenceSession(str(model_path), options(full), providers=["CPUExecutionProvider"])
