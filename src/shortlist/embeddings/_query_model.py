"""The int8 query model: the float model with int8 activations, derived once per machine for the query path.

A query is one text, embedded while a user waits; a catalog is thousands, embedded once. With
``DefaultEmbedder(query_precision="int8")`` the query path
(:meth:`~shortlist.embeddings._default.DefaultEmbedder.embed_queries`) runs a copy of the model
whose matrix products take int8 activations (ONNX Runtime's dynamic quantisation,
``MatMulInteger``): about twice as fast on one core (a turn at 10,000 tools 3.1-3.3 / 9.1-9.7 ms
p50 / p99 instead of 6.5-7.4 / 22-23), vectors at cosine 0.9965 (mean; 0.992 at worst) to the float
model's. Catalogs keep the float model, so their vectors, the vector cache and a shared PostgreSQL
cache are unchanged. It is not the default: its rankings are a few thousandths of nDCG from the float
model's (LiveMCPBench 0.006 below), and a conversation costs up to 0.5% more (``docs/evaluation.md``,
"The int8 query model").

The copy is derived from the verified model file: its ``Cast``/``Mul`` dequantisation folded into
float weights by ONNX Runtime's basic optimisation; each matrix product's input smoothed
(:mod:`shortlist.embeddings._smoothing`: its outlier channels divided down and the weights' rows
multiplied up, read on a fixed calibration; it halves the int8 model's error); then ``quantize_dynamic``
with 8-bit weights per output column, kept to 7 bits (``reduce_range``) so that no product saturates on
AVX2 machines without VNNI. The result is the same bytes for the same model file, calibration and
versions; it is kept in the cache directory (``models/``, about 23 MB, its name carrying the
calibration's digest) with a record as the optimised graph is (:mod:`shortlist.embeddings._model_graph`),
and made again (about 5 s) where there is none.

Deriving needs the ``onnx`` package (the ``int8`` extra): without it, and with no derived model kept,
:func:`query_model` raises :class:`~shortlist.errors.MissingDependencyError` naming the extra (a
deployment that asked for int8 learns it at start-up, from the warm-up). When deriving fails otherwise
(the quantiser refuses the graph), it emits :class:`QueryModelFallback` and the query path runs the
float model: slower, never broken.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from shortlist._events import Event, emit
from shortlist.embeddings._model_files import file_sha256
from shortlist.embeddings._model_graph import graph_checks, session_options, write_record
from shortlist.embeddings._smoothing import calibration_inputs, calibration_key, smooth_activations
from shortlist.errors import MissingDependencyError

__all__ = ["QUERY_PRECISIONS", "QUERY_SESSION_DISABLED_OPTIMIZERS", "QueryModelFallback", "query_model"]

#: The query path's precisions: ``float32`` (the model itself, the default) or ``int8`` (the derived model).
QUERY_PRECISIONS = ("float32", "int8")

#: ONNX Runtime fusions left out of the int8 model's session: its fused SkipLayerNormalization runs about
#: 170 us a layer on an 82-token query (the float graph's LayerNormalization 20 us), so without them a query
#: costs 15-18% less (5.2 -> 4.3 ms at 82 tokens), its vectors as close to the float model's (cosine 0.993).
QUERY_SESSION_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion", "GeluFusion", "BiasGeluFusion")

logger = logging.getLogger("shortlist.embeddings")


@dataclass(frozen=True, kw_only=True)
class QueryModelFallback(Event):
    """The int8 query model could not be derived; queries run on the float model (slower, the float ranking).

    ``reason``: ``derive_failed`` (quantising the model failed: ``error`` says why). Emitted once per
    embedder and model.
    """

    name: ClassVar[str] = "embeddings.query_model_fallback"
    area: ClassVar[str] = "embeddings"
    level: int = logging.WARNING
    model: str = ""
    reason: str = ""
    error: str = ""


class _QuietQuantizer(logging.Filter):
    """Drops the quantiser's advice to pre-process the model (logged on the root logger at every call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname or "quantization" not in record.pathname


def _derive(ort: Any, model_path: Path, out: Path, rows: Sequence[Any]) -> None:
    """Write the int8 query model of the ONNX file ``model_path`` to ``out``, in a scratch folder of its own
    (the folded and the smoothed float models are written beside it); ``rows`` are the calibration's token
    ids (:func:`~shortlist.embeddings._smoothing.calibration_inputs`).

    Raises:
        ImportError: ``onnx`` (which ONNX Runtime's quantiser needs) is not installed.
        Exception: ONNX Runtime refused the model or the quantiser failed.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded = out.with_name("float.onnx")
    opts = session_options(ort, 1, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    opts.optimized_model_filepath = str(folded)
    # the basic level folds the weights' dequantisation into float constants, which the quantiser needs
    ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    smoothed = out.with_name("smoothed.onnx")
    smooth_activations(folded, smoothed, rows)
    quiet = _QuietQuantizer()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        quantize_dynamic(smoothed, out, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
    finally:
        root.removeFilter(quiet)


def _keep(made: Path, kept: Path, source_sha256: str, ort_version: str, onnx_version: str) -> bool:
    """Move the derived model ``made`` (a scratch file beside ``kept``) to ``kept`` with its record (False:
    the cache directory refused it)."""
    try:
        entry = {
            "sha256": file_sha256(made),
            "source_sha256": source_sha256,
            "onnxruntime": ort_version,
            "onnx": onnx_version,
        }
        # its record first, then the file, each atomically: the file is never seen without one
        write_record(kept, entry)
        os.replace(made, kept)
        return True
    except OSError as exc:  # a read-only or full cache directory: the caller loads the bytes
        logger.debug("default embedder: cannot keep the int8 query model in %s: %s", kept, exc)
        return False


def query_model(
    ort: Any,
    model_path: Path,
    source_sha256: str,
    directory: Path | None,
    verify_model: Callable[[], None],
    *,
    model_name: str,
    tokenizer: Any,
) -> Path | bytes | None:
    """The int8 query model of ``model_path``: a file kept in ``directory`` or, without one, its bytes.

    ``source_sha256`` is the model file's sha256 (the kept file's record; a file derived from
    another model is rejected and made again); ``verify_model`` checks the model file before it is
    quantised; ``tokenizer`` (the model's) makes the calibration's token ids, whose digest names the
    kept file too. None when it cannot be derived (a :class:`QueryModelFallback` event says why): the
    caller runs the float model.

    Raises:
        MissingDependencyError: ``onnx`` is not installed and no derived model is kept.
    """
    rows = calibration_inputs(tokenizer)
    # the quantiser is ONNX Runtime's: its version names the file (a kept file loads without onnx installed),
    # as the calibration's digest does (a model smoothed on other texts is another file)
    name = f"minilm-{source_sha256[:16]}-query-int8-{calibration_key(rows)}-ort{ort.__version__}.onnx"
    kept = directory / name if directory else None
    if kept is not None and graph_checks(kept, source_sha256):
        return kept
    try:
        import onnx
    except ImportError as exc:
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"query_precision int8 derives its model with the onnx package ({exc}); {pip_install('int8')}, "
            "or use query_precision float32"
        ) from exc
    try:
        verify_model()
        if kept is not None:
            with contextlib.suppress(OSError):
                kept.parent.mkdir(parents=True, exist_ok=True)
        parent = kept.parent if kept is not None and kept.parent.is_dir() else None
        scratch = Path(tempfile.mkdtemp(prefix="shortlist-query-model-", dir=parent))
        try:
            made = scratch / "query-int8.onnx"
            _derive(ort, model_path, made, rows)
            if kept is not None and _keep(made, kept, source_sha256, ort.__version__, onnx.__version__):
                return kept
            return made.read_bytes()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except Exception as exc:  # any failure here only costs speed: the float model answers
        logger.debug("default embedder: cannot derive the int8 query model of %s: %s", model_path, exc)
        emit(QueryModelFallback(model=model_name, reason="derive_failed", error=f"{type(exc).__name__}: {exc}"))
        return None
