"""Golden outputs of shortlist's text analysis: no token, score or vector moves unless meant to.

``tests/data/text_goldens.json`` was recorded by ``tests/data/make_text_goldens.py`` from the
tokenisers, BM25 paths and hashing embedders as they were before the single analyser; every
entry is recomputed here and compared exactly (floats bit for bit).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

_DATA = Path(__file__).parent / "data"


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_text_goldens", _DATA / "make_text_goldens.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REC = _recorder()
GOLDEN: dict[str, Any] = json.loads((_DATA / "text_goldens.json").read_text(encoding="utf-8"))


def _cases(section: str) -> list[str]:
    return sorted(GOLDEN[section])


def test_the_corpus_is_the_recorded_one() -> None:
    assert GOLDEN["corpus"] == REC.CORPUS
    assert GOLDEN["queries"] == REC.QUERIES


@pytest.fixture(scope="module")
def tokens() -> dict[str, Any]:
    return dict(REC.tokenisers())


@pytest.fixture(scope="module")
def bm25() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(REC.bm25_scores()))
    return out


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    return dict(REC.embeddings())


@pytest.mark.parametrize("name", _cases("tokenisers"))
def test_tokens_are_unchanged(name: str, tokens: dict[str, Any]) -> None:
    assert tokens[name] == GOLDEN["tokenisers"][name]


@pytest.mark.parametrize("name", _cases("bm25"))
def test_bm25_scores_are_unchanged(name: str, bm25: dict[str, Any]) -> None:
    assert bm25[name] == GOLDEN["bm25"][name]  # exact floats: json round-trips them


@pytest.mark.parametrize("name", _cases("embeddings"))
def test_hashing_vectors_are_unchanged(name: str, vectors: dict[str, Any]) -> None:
    assert vectors[name] == GOLDEN["embeddings"][name]


def test_every_recorded_entry_is_still_computed(
    tokens: dict[str, Any], bm25: dict[str, Any], vectors: dict[str, Any]
) -> None:
    assert set(tokens) == set(GOLDEN["tokenisers"])
    assert set(bm25) == set(GOLDEN["bm25"])
    assert set(vectors) == set(GOLDEN["embeddings"])
