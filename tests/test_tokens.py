"""Offline token counting: tiktoken encodings from bpe-openai, hash check, per-model choice, cache."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import tiktoken.load

from shortlist import _tokens as counting
from shortlist._tokens import (
    CachedCounter,
    HeuristicCounter,
    TiktokenCounter,
    counter_for_model,
    register_model_counter,
)
from shortlist.errors import ConfigError, MissingDependencyError


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("tiktoken tried to fetch a file")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)


@pytest.mark.parametrize(
    ("encoding", "text", "expected"),
    [
        ("cl100k_base", "hello world", [15339, 1917]),
        ("o200k_base", "hello world", [24912, 2375]),
    ],
)
def test_offline_encodings_give_the_reference_token_ids(encoding: str, text: str, expected: list[int]) -> None:
    enc = counting._encoding(encoding)
    assert enc.encode_ordinary(text) == expected
    assert TiktokenCounter(encoding).count(text) == len(expected)
    assert TiktokenCounter(encoding).count("<|endoftext|>") > 1  # special tokens are plain text here


def test_unknown_encoding_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="unknown offline encoding"):
        TiktokenCounter("r50k_base")


def test_a_bpe_file_with_the_wrong_hash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bogus = tmp_path / "cl100k_base.tiktoken.gz"
    bogus.write_bytes(gzip.compress(b"aGVsbG8= 0\n"))
    monkeypatch.setattr(counting, "_bpe_path", lambda name: bogus)
    with pytest.raises(MissingDependencyError, match="sha256"):
        counting._read_ranks("cl100k_base", "0" * 64)


def test_counter_for_model_picks_the_encoding() -> None:
    assert counter_for_model("gpt-4o-mini").name == "tiktoken:o200k_base"
    assert counter_for_model("gpt-4-turbo").name == "tiktoken:cl100k_base"
    assert counter_for_model("gpt-3.5-turbo").name == "tiktoken:cl100k_base"
    assert counter_for_model("gpt-4.1").name == "tiktoken:o200k_base"
    assert counter_for_model(None).name == "tiktoken:o200k_base"
    assert isinstance(counter_for_model("o3"), CachedCounter)


def test_registered_model_counters_win() -> None:
    register_model_counter("test-model-", lambda: HeuristicCounter(2))
    assert counter_for_model("Test-Model-7").name == "chars/2"
    with pytest.raises(ConfigError):
        register_model_counter("", lambda: HeuristicCounter())


def test_cached_counter_counts_each_text_once() -> None:
    calls: list[str] = []

    class Spy:
        name = "spy"

        def count(self, text: str) -> int:
            calls.append(text)
            return len(text)

    cached = CachedCounter(Spy(), max_entries=2)
    assert [cached.count(t) for t in ("ab", "ab", "abc", "ab")] == [2, 2, 3, 2]
    assert calls == ["ab", "abc"] and cached.hits == 2 and cached.name == "spy"
    cached.count("abcd")  # full: the cache is cleared, then refilled
    cached.count("ab")
    assert calls[-1] == "ab"


def test_heuristic_counter() -> None:
    assert HeuristicCounter().count("abcdefghi") == 3
    with pytest.raises(ConfigError):
        HeuristicCounter(0)


def test_estimate_is_ceil_of_chars_over_four() -> None:
    from shortlist._tokens import estimate_tokens

    assert [estimate_tokens("a" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]
    assert estimate_tokens(9) == 3 == HeuristicCounter().count("x" * 9)


def test_every_surface_reports_the_same_tool_tokens(tmp_path: Path) -> None:
    """The evaluation, the service's decision log and the framework engine count one way."""
    import json

    from shortlist._tokens import count_tokens, definition_text, tool_tokens
    from shortlist._types import Candidate, Query, TurnSelection
    from shortlist.eval._datasets import load_dataset
    from shortlist.eval._runner import run_eval
    from shortlist.integrations._core import ToolNarrower
    from shortlist.rankers._lexical import LexicalSelector
    from shortlist.server._decisions import DecisionLog

    tools = (
        Candidate("get_weather", "get_weather", "Weather for a city", parameters={"type": "object"}),
        Candidate("book_flight", "book_flight", "Book a flight — with émojis ✈ and long text " * 5),
    )
    want = sum(count_tokens(definition_text(c)) for c in tools)
    assert tool_tokens(tools) == want > 0
    with (tmp_path / "tools.jsonl").open("w") as f:
        for c in tools:
            f.write(json.dumps({"id": c.id, "name": c.name, "description": c.description}) + "\n")
    (tmp_path / "queries.jsonl").write_text(json.dumps({"qid": "q", "text": "weather", "gold": ["get_weather"]}) + "\n")
    report = run_eval(LexicalSelector(), load_dataset(tmp_path), k=1, progress=False)
    plain = tuple(Candidate(c.id, c.name, c.description) for c in tools)
    assert report["tokens"]["all"] == tool_tokens(plain)
    decision = DecisionLog().record("/v1/select", "q", tools, TurnSelection(Query("q", "tool", 1), tools[:1]))
    assert decision.tokens_all == want and decision.tokens_selected == tool_tokens(tools[:1])
    assert ToolNarrower.definition_tokens(tools) == want
