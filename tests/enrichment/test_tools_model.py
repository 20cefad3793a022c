"""The fine-tuned tool embedder shipped in the package: pinned, selectable by name, same IO as the old model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from shortlist._config_sections import EmbeddingProviderConfig
from shortlist.embeddings._default import (
    DEFAULT_MODEL_NAME,
    EMBEDDED_MODELS,
    TOOLS_MODEL_NAME,
    TOOLS_MODEL_SHA256,
    DefaultEmbedder,
    default_model_files,
)
from shortlist.embeddings._factory import build_embedder
from shortlist.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "src" / "shortlist" / "embeddings" / "data" / TOOLS_MODEL_NAME


def test_the_packaged_file_is_the_pinned_one_and_documented() -> None:
    model, tokenizer = default_model_files(TOOLS_MODEL_NAME)
    assert model == MODEL_DIR / "model.onnx"
    assert hashlib.sha256(model.read_bytes()).hexdigest() == TOOLS_MODEL_SHA256
    assert tokenizer == default_model_files()[1]  # MiniLM's tokenizer, unchanged by the fine-tune
    readme = (MODEL_DIR / "README.md").read_text()
    assert TOOLS_MODEL_SHA256 in readme and "Apache-2.0" in readme and "MIT" in readme
    assert (MODEL_DIR / "LICENSE-MetaTool").is_file()


def test_the_held_out_tools_are_recorded_and_reproducible() -> None:
    record = json.loads((ROOT / "scripts" / "train_embedder_heldout.json").read_text())
    tools = record["tools"]
    assert record["count"] == len(tools) == 40 and tools == sorted(set(tools))
    assert all(t in (MODEL_DIR / "README.md").read_text() for t in tools[:3])


def test_embeds_like_the_old_model_but_differently() -> None:
    new = DefaultEmbedder(model=TOOLS_MODEL_NAME, vector_cache=None, optimized_model_cache=False)
    old = DefaultEmbedder(vector_cache=None, optimized_model_cache=False)
    texts = ["what's the weather in Paris tomorrow", "book a flight to Lima", "x"]
    a, b = new.embed_batch(texts), old.embed_batch(texts)
    assert a.shape == b.shape == (3, 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(a, b, atol=1e-3)
    assert float((a * b).sum(axis=1).min()) > 0.5  # a fine-tune, not another model
    assert new.model_name == TOOLS_MODEL_NAME and old.model_name == DEFAULT_MODEL_NAME
    assert new.model_identity != old.model_identity and TOOLS_MODEL_SHA256[:16] in new.model_identity
    # a row does not depend on its batch-mates (weights int8, activations float32)
    alone = new.embed_batch(["book a flight to Lima", "a much longer text that pads the batch more"])[0]
    assert np.array_equal(alone, new.embed_batch(["book a flight to Lima"])[0])


def test_selectable_by_name_in_the_config() -> None:
    emb = build_embedder(
        EmbeddingProviderConfig(type="default", model=TOOLS_MODEL_NAME, additional_config={"vector_cache": "off"})
    )
    assert isinstance(emb, DefaultEmbedder) and emb.model_name == TOOLS_MODEL_NAME
    old = build_embedder(
        EmbeddingProviderConfig(type="default", model=DEFAULT_MODEL_NAME, additional_config={"vector_cache": "off"})
    )
    assert isinstance(old, DefaultEmbedder) and old.model_name == DEFAULT_MODEL_NAME
    assert set(EMBEDDED_MODELS) == {DEFAULT_MODEL_NAME, TOOLS_MODEL_NAME}
    with pytest.raises(ConfigError, match="embedded model"):
        build_embedder(EmbeddingProviderConfig(type="default", model="bge-large"))


def test_an_unknown_embedded_model() -> None:
    with pytest.raises(ValueError, match="unknown embedded model"):
        DefaultEmbedder(model="nope")
