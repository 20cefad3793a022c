"""Model-backed selector and compressor factories: validation, prompts, answer parsing."""

from __future__ import annotations

import pytest
from reduction_doubles import ScriptedModel, WordCounter, agent_conversation

from shortlist.errors import ConfigError, SelectorProtocolError
from shortlist.reduction import ReductionStage, create_context_compressor
from shortlist.reduction._events import ReductionApplied, ReductionSelectionRejected
from shortlist.reduction._model_selector import create_context_selector, parse_step_ids


def test_parse_step_ids_accepts_both_spellings_and_dedupes() -> None:
    assert parse_step_ids({"step_ids": ["a", "b", "a"]}) == ["a", "b"]
    assert parse_step_ids({"stepIds": ["x"]}) == ["x"]
    assert parse_step_ids({"step_ids": []}) == []


@pytest.mark.parametrize(
    "value",
    ['{"step_ids": ["a"]}', b"{}", ["a"], {"step_ids": "a"}, {"step_ids": [1]}, {"ids": ["a"]}, None],
)
def test_parse_step_ids_rejects_anything_else(value: object) -> None:
    with pytest.raises(SelectorProtocolError):
        parse_step_ids(value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transport": "core:plain-text"}, "transport must be"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_excerpt_chars": -1}, "max_excerpt_chars"),
        ({"instruction": "  "}, "instruction"),
        ({"max_calls": 0}, "max_calls=0"),
        ({"max_calls": -1}, "max_calls"),
    ],
)
def test_create_context_selector_validates(kwargs: dict, message: str) -> None:
    args: dict = {"max_output_tokens": 10, "max_excerpt_chars": 10, **kwargs}
    with pytest.raises(ConfigError, match=message):
        create_context_selector("sel", **args)
    with pytest.raises(ConfigError, match="non-empty id"):
        create_context_selector("", max_output_tokens=10, max_excerpt_chars=10)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("", "x"), {"max_output_tokens": 5}, "non-empty id"),
        (("c", ""), {"max_output_tokens": 5}, "instruction"),
        (("c", "x"), {"max_output_tokens": 0}, "max_output_tokens"),
        (("c", "x"), {"max_output_tokens": True}, "max_output_tokens"),
        (("c", "x"), {"max_output_tokens": 5, "transport": ""}, "transport"),
    ],
)
def test_create_context_compressor_validates(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        create_context_compressor(*args, **kwargs)


async def test_model_selector_prompt_caps_excerpts_and_its_answer_is_applied() -> None:
    frags = agent_conversation(6, result_words=200)
    model = ScriptedModel({"stepIds": ["s5", "s2"]})
    stage = ReductionStage(
        max_tokens=500,
        counter=WordCounter(),
        selector=create_context_selector("pick", max_output_tokens=64, max_excerpt_chars=80),
        transports={"selector-json": model},
        max_tool_output_tokens=10_000,  # keep the truncate rung out of the way
    )
    result = await stage.reduce(frags)
    (request,) = model.requests
    assert request.purpose == "pick" and request.transport == "selector-json" and request.max_output_tokens == 64
    assert "what did you find" in request.input  # the current turn is shown
    assert "you are an agent" not in request.input  # protected content never is
    for block in request.input.split("\n[")[1:]:
        excerpt = block.split("\n", 1)[1].rstrip("\n")
        assert len(excerpt) <= 80
    assert [f.id for f in result.fragments] == ["sys", "c2", "r2", "c5", "r5", "u1"]
    (applied,) = [e for e in result.diagnostics if isinstance(e, ReductionApplied)]
    assert applied.reducer == "pick" and applied.kind == "select"


async def test_plain_text_answer_from_selector_transport_is_rejected() -> None:
    model = ScriptedModel('{"step_ids": ["s1"]}')  # text, not an already parsed object
    stage = ReductionStage(
        max_tokens=40,
        counter=WordCounter(),
        selector=create_context_selector("pick", max_output_tokens=64, max_excerpt_chars=80),
        transports={"selector-json": model},
    )
    result = await stage.reduce(agent_conversation(5))
    (rejected,) = [e for e in result.diagnostics if isinstance(e, ReductionSelectionRejected)]
    assert rejected.reason == "invalid_answer" and "text" in rejected.error
    assert result.tokens_after is not None and result.tokens_after <= 40
