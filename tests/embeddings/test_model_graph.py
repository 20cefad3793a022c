"""The optimised model graph kept in the cache directory is checked as the shipped weights are (issue 27, item 16).

Before the fix a graph file swapped in ``models/`` (another model's graph under this model's name)
was loaded without a check and silently changed every score. The swap here is real: the fine-tuned
tools model's optimised graph copied over the default model's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from shortlist._events import Event, event_hooks
from shortlist.embeddings._cache import ENV_CACHE_DIR
from shortlist.embeddings._default import TOOLS_MODEL_NAME, DefaultEmbedder, ModelGraphRejected

TEXTS = ["send an email to my manager", "what is the weather in Paris tomorrow"]


def _embedder(model: str | None = None) -> DefaultEmbedder:
    return DefaultEmbedder(model=model, vector_cache=None, query_batch_size=1)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A cache directory holding both embedded models' graphs and records, and the default model's vectors."""
    cache = tmp_path_factory.mktemp("graphs") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_CACHE_DIR, str(cache))
        plain = DefaultEmbedder(vector_cache=None, optimized_model_cache=False).embed(TEXTS)
        np.testing.assert_array_equal(_embedder().embed(TEXTS), plain)  # made the graph and its record
        _embedder(TOOLS_MODEL_NAME).embed(TEXTS)
    return cache, plain


@pytest.fixture
def graphs(
    made: tuple[Path, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, np.ndarray]:
    """(the default model's graph, the tools model's graph, the default model's vectors) in a cache of this test."""
    cache, plain = made
    shutil.copytree(cache, tmp_path / "cache")
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "cache"))
    graphs = sorted((tmp_path / "cache" / "models").glob("*.onnx"))
    assert len(graphs) == 2 and all(_record(m).is_file() for m in graphs)
    default = next(m for m in graphs if DefaultEmbedder().model_identity.split("@")[1][:16] in m.name)
    tools = next(m for m in graphs if m != default)
    record = json.loads(_record(default).read_text())
    assert {"sha256", "source_sha256", "onnxruntime"} <= set(record) and len(record["sha256"]) == 64
    np.testing.assert_array_equal(_embedder().embed(TEXTS), plain)  # hashed, then its stamp recorded
    assert "stat" in json.loads(_record(default).read_text())  # the next process skips the hash
    return default, tools, plain


def _record(graph: Path) -> Path:
    return graph.parent / (graph.name + ".sha256")


@pytest.mark.slow  # each case makes the optimised ONNX graph again: 1.3-2.6 s of CPU, over the fast loop's 2 s loaded
@pytest.mark.parametrize("swap", ["graph", "graph_and_record", "no_record", "garbage"])
def test_a_swapped_graph_is_rejected_and_made_again(graphs: tuple[Path, Path, np.ndarray], swap: str) -> None:
    default, tools, plain = graphs
    expected = {"graph": "checksum", "graph_and_record": "source", "no_record": "no_record", "garbage": "checksum"}
    if swap in ("graph", "graph_and_record"):
        shutil.copyfile(tools, default)  # a valid graph of another model under this model's name
        assert not np.array_equal(_embedder_without_checks(default).embed(TEXTS), plain)
    if swap == "graph_and_record":
        shutil.copyfile(_record(tools), _record(default))
    if swap == "no_record":
        _record(default).unlink()
    if swap == "garbage":
        default.write_bytes(b"not an onnx graph")
    seen: list[Event] = []
    with event_hooks(seen.append):
        out = _embedder().embed(TEXTS)
    np.testing.assert_array_equal(out, plain)  # the shipped weights' vectors, never the swapped graph's
    rejected = [e for e in seen if isinstance(e, ModelGraphRejected)]
    assert [(e.reason, e.path) for e in rejected] == [(expected[swap], str(default))]
    # made again, with its record: the next process loads it without an event
    assert default.is_file() and _record(default).is_file()
    seen.clear()
    with event_hooks(seen.append):
        np.testing.assert_array_equal(_embedder().embed(TEXTS), plain)
    assert not [e for e in seen if isinstance(e, ModelGraphRejected)]


def _embedder_without_checks(graph: Path) -> DefaultEmbedder:
    """The swapped graph loaded as a model file of its own: what scores became before the fix."""
    return DefaultEmbedder(
        model_path=graph, model_sha256=None, vector_cache=None, optimized_model_cache=False, query_batch_size=1
    )
