"""Activation smoothing for the int8 query model: each matrix product's outlier channels moved into its weights.

The int8 query model (:mod:`shortlist.embeddings._query_model`) quantises a matrix product's input
with one scale over the whole tensor. A transformer's activations have a few channels tens of
times larger than the rest (after each layer norm, and into each feed-forward output), so that one
scale leaves the other channels a handful of levels and most of the int8 model's error comes from
them. Smoothing (SmoothQuant, Xiao et al. 2023) divides each input channel ``j`` of a product by
``s_j = max|x_j| ** alpha / max|w_j| ** (1 - alpha)`` and multiplies the weights' row ``j`` by it:
the same product in exact arithmetic, with activations of similar ranges and weights that still
quantise per output column. Here the division is a ``Mul`` node before the products that share an
input (a layer norm's output feeds the residual too, so it cannot be folded into the norm).

``max|x_j|`` is read off the float model on :func:`calibration_inputs`: the request-like texts
shipped beside the model (``data/query-calibration.txt``, written for this, no dataset's) and
token sequences drawn from a fixed seed, which widen the ranges to channels those texts do not
reach. Same model file, same texts, same versions: the same graph. Measured on 300 queries (MetaTool
and BFCL messages, none of them calibration texts), the int8 vectors' cosine to the float model's
goes from 0.9926 (mean; 0.984 at worst) to 0.9965 (0.992), at the same speed (``docs/evaluation.md``,
"The int8 query model").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SMOOTHING_ALPHA", "calibration_inputs", "calibration_key", "smooth_activations"]

#: How much of an activation's range moves into the weights (0: none, 1: all). 0.75 measured best of
#: 0.5-0.95 (0.5: cosine 0.987; 0.85: 0.995, on the calibration described above).
SMOOTHING_ALPHA = 0.75
#: Token sequences drawn for the calibration besides the texts, their lengths and the seed.
RANDOM_SEQUENCES = 100
RANDOM_LENGTHS = (8, 48)
RANDOM_SEED = 0
#: Token ids drawn start here: below are a BERT vocabulary's special and unused entries.
FIRST_DRAWN_ID = 999
#: Calibration rows run together (padded to the longest of them, the padding's activations left out).
CALIBRATION_BATCH = 16
_CALIBRATION_FILE = "query-calibration.txt"

_IdRow = np.ndarray[Any, np.dtype[np.int64]]


def calibration_texts() -> list[str]:
    """The shipped calibration texts: requests and tool descriptions of many kinds, one a line."""
    text = resources.files("shortlist.embeddings").joinpath("data", _CALIBRATION_FILE).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def calibration_inputs(tokenizer: Any) -> list[_IdRow]:
    """Token-id rows the activation ranges are read on: :func:`calibration_texts` through ``tokenizer``,
    then :data:`RANDOM_SEQUENCES` drawn ids between the tokenizer's opening and closing tokens."""
    rows = [np.asarray(_unpadded(tokenizer, t), dtype=np.int64) for t in calibration_texts()]
    frame = _unpadded(tokenizer, "")  # [CLS] [SEP] for BERT's tokenizer
    head, tail = frame[:1], frame[1:]
    vocab = int(tokenizer.get_vocab_size())
    low = FIRST_DRAWN_ID if vocab > 2 * FIRST_DRAWN_ID else 0
    rng = np.random.default_rng(RANDOM_SEED)
    for _ in range(RANDOM_SEQUENCES):
        drawn = rng.integers(low, vocab, size=int(rng.integers(*RANDOM_LENGTHS)))
        rows.append(np.asarray([*head, *drawn.tolist(), *tail], dtype=np.int64))
    return rows


def _unpadded(tokenizer: Any, text: str) -> list[int]:
    """``text``'s token ids without padding, however ``tokenizer`` is set to pad."""
    encoding = tokenizer.encode(text)
    return [i for i, keep in zip(encoding.ids, encoding.attention_mask, strict=True) if keep]


def calibration_key(rows: Sequence[_IdRow], alpha: float = SMOOTHING_ALPHA) -> str:
    """A short digest of the calibration rows and ``alpha``: a derived model made on other ones is another file."""
    digest = hashlib.sha256(repr(float(alpha)).encode())
    for row in rows:
        digest.update(row.astype("<i8").tobytes())
        digest.update(b"|")
    return digest.hexdigest()[:12]


def smooth_activations(source: Path, out: Path, rows: Sequence[_IdRow], *, alpha: float = SMOOTHING_ALPHA) -> int:
    """Write ``source`` (a float ONNX encoder) to ``out`` with each constant-weight ``MatMul``'s input smoothed.

    The products that share an input share one scale (the weights' row maxima taken over all of them).
    Returns how many inputs were smoothed. Needs the ``onnx`` package; the activations are read by
    ONNX Runtime on one thread.
    """
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    groups: dict[str, list[Any]] = {}
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in weights:
            groups.setdefault(node.input[0], []).append(node)
    if not groups:
        onnx.save(model, str(out))
        return 0
    peaks = _activation_peaks(ort, onnx, helper, model, list(groups), rows)
    placed: list[tuple[Any, Any]] = []
    for name, nodes in groups.items():
        matrices = [numpy_helper.to_array(weights[n.input[1]]) for n in nodes]
        weight_peak = np.max(np.stack([np.abs(m).max(axis=1) for m in matrices]), axis=0)
        scale = np.maximum(peaks[name], 1e-5) ** alpha / np.maximum(weight_peak, 1e-5) ** (1 - alpha)
        scale = scale.astype(np.float32)
        for node, matrix in zip(nodes, matrices, strict=True):
            scaled = (matrix * scale[:, None]).astype(matrix.dtype)
            weights[node.input[1]].CopyFrom(numpy_helper.from_array(scaled, node.input[1]))
        inverse, smoothed = f"{name}/smoothing", f"{name}/smoothed"
        graph.initializer.append(numpy_helper.from_array((1.0 / scale).astype(np.float32), inverse))
        placed.append((nodes[0], helper.make_node("Mul", [name, inverse], [smoothed], name=f"{name}/smooth")))
        for node in nodes:
            node.input[0] = smoothed
    order = list(graph.node)
    for first, mul in placed:  # right before the first product that reads it: the order stays topological
        order.insert(order.index(first), mul)
    del graph.node[:]
    graph.node.extend(order)
    onnx.save(model, str(out))
    return len(placed)


def _activation_peaks(
    ort: Any, onnx: Any, helper: Any, model: Any, names: list[str], rows: Sequence[_IdRow]
) -> dict[str, np.ndarray[Any, np.dtype[np.float32]]]:
    """Each named tensor's largest magnitude per channel (its last axis) over ``rows``' real tokens."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for name in names:
        if name not in known:
            probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    wanted = set(names)
    peaks: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}
    ordered = sorted(rows, key=len)  # rows of similar lengths run together: little padding
    for start in range(0, len(ordered), CALIBRATION_BATCH):
        batch = ordered[start : start + CALIBRATION_BATCH]
        ids = np.zeros((len(batch), max(len(r) for r in batch)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for i, row in enumerate(batch):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        results = session.run(outputs, {k: v for k, v in feed.items() if k in inputs})
        real = mask.reshape(-1).astype(bool)  # the padded positions' activations are not the texts'
        for name, value in zip(outputs, results, strict=True):
            if name in wanted:
                flat = np.abs(np.asarray(value, dtype=np.float32)).reshape(-1, value.shape[-1])
                peak = flat[real].max(axis=0) if len(flat) == len(real) else flat.max(axis=0)
                peaks[name] = peak if name not in peaks else np.maximum(peaks[name], peak)
    return peaks
