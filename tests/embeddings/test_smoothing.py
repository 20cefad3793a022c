"""Activation smoothing of the int8 query model: the same float products, int8 vectors nearer the float
model's than without it, a calibration that is the same every time and names the kept file."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

from shortlist.embeddings import _query_model, _smoothing
from shortlist.embeddings._cache import ENV_CACHE_DIR
from shortlist.embeddings._default import TOOLS_MODEL_NAME, DefaultEmbedder
from shortlist.embeddings._model_files import default_model_files, import_runtime

# Not calibration texts: requests of other kinds, short and long.
TEXTS = [
    "rename the branch and push it to the remote",
    "what time does the pharmacy on King Street close today",
    "I need the minutes of Tuesday's meeting sent to everyone who missed it, and a reminder for the follow-up",
    "convert this recipe from cups to grams",
    "show my steps for the last seven days as a chart",
    "find a quiet cafe with wifi near the central station that is open after 9pm on weekdays",
    "turn the volume down",
    "who directed the film that won best picture in 1998",
    "scan the attached contract for clauses about early termination and summarise the penalties",
    "add a column for the due date and sort the table by it",
    "order a large pepperoni pizza for delivery",
    "list the virtual machines that have been idle for more than a week and stop them",
    "how do I say thank you very much in Korean",
    "book a haircut for Saturday morning",
    "translate the error message and tell me what it means",
    "get the quarterly revenue figures from the finance dashboard and compare them with last year",
]


def _tokenizer():  # type: ignore[no-untyped-def]
    _, tokenizer_cls = import_runtime()
    tok = tokenizer_cls.from_file(str(default_model_files(TOOLS_MODEL_NAME)[1]))
    tok.enable_truncation(256)
    return tok


def _run(session: object, rows: list[np.ndarray]) -> np.ndarray:
    out = []
    for row in rows:
        ids = row[None, :]
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed)[0][0].mean(axis=0)  # type: ignore[attr-defined]
        out.append(hidden / np.linalg.norm(hidden))
    return np.asarray(out)


def test_the_calibration_is_the_shipped_texts_then_drawn_ids_the_same_every_time() -> None:
    tok = _tokenizer()
    rows = _smoothing.calibration_inputs(tok)
    texts = _smoothing.calibration_texts()
    assert len(texts) >= 100 and len(rows) == len(texts) + _smoothing.RANDOM_SEQUENCES
    vocab = tok.get_vocab_size()
    cls, sep = tok.encode("").ids[:2]
    for row in rows:
        assert row.dtype == np.int64 and row[0] == cls and row[-1] == sep and row.min() >= 0 and row.max() < vocab
    again = _smoothing.calibration_inputs(tok)
    assert all(np.array_equal(a, b) for a, b in zip(rows, again, strict=True))
    key = _smoothing.calibration_key(rows)
    assert key == _smoothing.calibration_key(again) != _smoothing.calibration_key(rows[:-1])
    assert key != _smoothing.calibration_key(rows, alpha=0.5)


@pytest.fixture(scope="module")
def float_and_smoothed(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, np.ndarray]:
    """TEXTS through the folded float model and through it smoothed (made once: not charged to one test)."""
    tmp = tmp_path_factory.mktemp("graphs")
    ort, _ = import_runtime()
    folded = tmp / "float.onnx"
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(default_model_files(TOOLS_MODEL_NAME)[0]), opts, providers=["CPUExecutionProvider"])
    tok = _tokenizer()
    smoothed = tmp / "smoothed.onnx"
    assert _smoothing.smooth_activations(folded, smoothed, _smoothing.calibration_inputs(tok)) == 24  # 4 a layer
    rows = [np.asarray(_smoothing._unpadded(tok, t), dtype=np.int64) for t in TEXTS]
    before = _run(ort.InferenceSession(str(folded), providers=["CPUExecutionProvider"]), rows)
    after = _run(ort.InferenceSession(str(smoothed), providers=["CPUExecutionProvider"]), rows)
    return before, after


@pytest.fixture(scope="module")
def int8_cosines(tmp_path_factory: pytest.TempPathFactory) -> tuple[np.ndarray, np.ndarray]:
    """Per text, the int8 query model's cosine to the float model's vector: smoothed, and derived without it."""
    tmp = tmp_path_factory.mktemp("derived")

    def embedder(precision: str) -> DefaultEmbedder:
        return DefaultEmbedder(model=TOOLS_MODEL_NAME, vector_cache=None, query_cache_size=0, query_precision=precision)  # type: ignore[arg-type]

    def unsmoothed(source: Path, out: Path, rows: object, **_: object) -> int:
        shutil.copyfile(source, out)
        return 0

    floats = embedder("float32").embed_queries(TEXTS)
    with pytest.MonkeyPatch.context() as m:
        m.setenv(ENV_CACHE_DIR, str(tmp / "smoothed"))
        smoothed = np.sum(embedder("int8").embed_queries(TEXTS) * floats, axis=1)
        m.setattr(_query_model, "smooth_activations", unsmoothed)
        m.setenv(ENV_CACHE_DIR, str(tmp / "plain"))
        plain = np.sum(embedder("int8").embed_queries(TEXTS) * floats, axis=1)
    return smoothed, plain


def test_smoothing_keeps_the_float_models_vectors(float_and_smoothed: tuple[np.ndarray, np.ndarray]) -> None:
    # Each product's input divided by its scale, the weights' rows multiplied by it: the same products.
    before, after = float_and_smoothed
    np.testing.assert_allclose(after, before, atol=2e-5)


def test_smoothing_brings_the_int8_vectors_nearer_the_float_models(
    int8_cosines: tuple[np.ndarray, np.ndarray],
) -> None:
    smoothed, plain = int8_cosines
    # the error (1 - cosine) about halves: 0.0074 -> 0.0035 on 300 MetaTool and BFCL queries
    assert 1 - smoothed.mean() < 0.7 * (1 - plain.mean()), (smoothed.mean(), plain.mean())
    assert smoothed.mean() > 0.995 and smoothed.min() > plain.min(), (smoothed, plain)


def test_a_graph_without_constant_weight_products_is_written_unchanged(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])
    products = helper.make_node("MatMul", ["x", "x"], ["y"])  # both inputs activations: nothing to smooth
    graph = helper.make_graph([products], "no-weights", [x], [y])
    source, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph), str(source))
    assert _smoothing.smooth_activations(source, out, []) == 0
    assert onnx.load(str(out)).graph == onnx.load(str(source)).graph
