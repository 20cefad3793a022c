"""The query adapter: closed-form fit, gated to the tools it saw, saved and loaded, and `feedback train`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shortlist._types import Candidate, Query
from shortlist.cli import main
from shortlist.errors import ConfigError
from shortlist.rankers._adapter import QueryAdapter, train_adapter
from shortlist.rankers._hybrid import HybridRanker
from shortlist.testing import HashEmbedder

CATALOG = [
    Candidate("weather", "get_weather", "current weather and forecast for a city"),
    Candidate("email", "send_email", "send an email message to a recipient"),
    Candidate("calendar", "create_event", "create a calendar event or meeting"),
    Candidate("stocks", "stock_quote", "latest stock price quote for a ticker"),
]
PAIRS = [
    ("will it rain in oslo", "weather"),
    ("umbrella tomorrow in paris?", "weather"),
    ("mail anna the report", "email"),
    ("write to bob about friday", "email"),
]


def test_the_fit_maps_queries_toward_their_tools() -> None:
    emb = HashEmbedder(dim=64)
    adapter = train_adapter(PAIRS, CATALOG, emb, ridge=0.01)
    assert adapter.tools == {"weather", "email"} and adapter.pairs == 4 and adapter.matrix.shape == (64, 64)
    q = emb.embed(["umbrella tomorrow in paris?"])
    target = emb.embed(["get_weather: current weather and forecast for a city"])[0]
    before = float(q[0] @ target)
    after = float(adapter.transform(q)[0] @ target)
    assert after > before
    np.testing.assert_allclose(np.linalg.norm(adapter.transform(q), axis=1), 1.0, rtol=1e-5)
    # A strong ridge keeps the identity.
    stiff = train_adapter(PAIRS, CATALOG, emb, ridge=1e6)
    np.testing.assert_allclose(stiff.matrix, np.eye(64), atol=1e-3)


def test_bad_training_input_is_refused() -> None:
    emb = HashEmbedder(dim=16)
    with pytest.raises(ValueError):
        train_adapter([("hello", "ghost")], CATALOG, emb)
    with pytest.raises(ValueError):
        train_adapter(PAIRS, CATALOG, emb, ridge=0)


def test_the_hybrid_applies_it_only_to_the_tools_it_saw(tmp_path: Path) -> None:
    emb = HashEmbedder(dim=64)
    pairs = [*PAIRS, ("book the team sync on monday", "calendar"), ("meeting with the dentist", "calendar")]
    adapter = train_adapter(pairs, CATALOG, emb, ridge=0.01)
    plain = HybridRanker(embedder=emb, decompose=False, fusion="score", bm25_weight=0)
    adapted = HybridRanker(embedder=emb, decompose=False, fusion="score", bm25_weight=0, adapter=adapter)
    query = Query("umbrella tomorrow in paris?")
    a, b = plain.score(query, CATALOG), adapted.score(query, CATALOG)
    assert not np.allclose(a[:3], b[:3])  # trained on: re-ordered by the adapter
    assert b[:3].max() <= a.max() + 1e-6  # never lifted above the turn's best plain cosine
    np.testing.assert_allclose(a[3:], b[3:])  # never trained on: untouched
    path = adapter.save(tmp_path / "adapter.npz")
    again = HybridRanker(embedder=emb, decompose=False, fusion="score", bm25_weight=0, adapter=str(path))
    np.testing.assert_allclose(again.score(query, CATALOG), b, atol=1e-6)
    assert again.adapter is not None and again.adapter.tools == {"weather", "email", "calendar"}


def test_a_wrong_file_or_dimension_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such adapter"):
        QueryAdapter.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="not a query adapter"):
        QueryAdapter.load(junk)
    small = train_adapter(PAIRS, CATALOG, HashEmbedder(dim=16))
    ranker = HybridRanker(embedder=HashEmbedder(dim=64), adapter=small)
    with pytest.raises(ConfigError, match="16-d"):
        ranker.score(Query("rain"), CATALOG)
    with pytest.raises(ValueError):
        HybridRanker(adapter_weight=1.5)


def test_feedback_train_writes_an_adapter_the_ranker_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = tmp_path / "tools.jsonl"
    catalog.write_text(
        "".join(json.dumps({"id": c.id, "name": c.name, "description": c.description}) + "\n" for c in CATALOG)
    )
    db, out = tmp_path / "feedback.db", tmp_path / "adapter.npz"
    for text, tool in PAIRS:
        assert main(["feedback", "add", "--db", str(db), "--query", text, "--used", tool]) == 0
    capsys.readouterr()
    assert main(["feedback", "train", "--db", str(db), "--catalog", str(catalog), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 4 and summary["tools"] == 2
    adapter = QueryAdapter.load(out)
    assert adapter.tools == {"weather", "email"}
    assert adapter.query_prefix == HybridRanker().query_prefix  # trained on the query the default ranker embeds
    assert (
        main(["feedback", "train", "--db", str(tmp_path / "none.db"), "--catalog", str(catalog), "--out", str(out)])
        == 2
    )
    assert "no such feedback database" in capsys.readouterr().err
