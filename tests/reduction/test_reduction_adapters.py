"""OpenAI and Anthropic adapters: round trips, tool-call/result pairs never split, bad input."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from reduction_doubles import ScriptedModel, WordCounter

from shortlist.reduction import (
    ReductionStage,
    anthropic_from_fragments,
    anthropic_to_fragments,
    create_context_compressor,
    newest_first_selector,
    openai_from_fragments,
    openai_to_fragments,
    relevance_selector,
)
from shortlist.reduction._adapters import (
    SUMMARY_PREFIX,
    MessageFormatError,
    check_anthropic_tool_pairs,
    check_openai_tool_pairs,
)


def openai_trace(rng: random.Random, turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "be useful"}]
    call = 0
    for t in range(turns):
        msgs.append({"role": "user", "content": f"question {t} about topic{rng.randint(0, 5)}"})
        for _ in range(rng.randint(0, 3)):
            ids = [f"call_{call + k}" for k in range(rng.randint(1, 3))]  # parallel calls
            call += len(ids)
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}}
                        for i in ids
                    ],
                }
            )
            for i in ids:
                msgs.append({"role": "tool", "tool_call_id": i, "content": "hit " * rng.randint(1, 60)})
        msgs.append({"role": "assistant", "content": f"answer {t}"})
    msgs.append({"role": "user", "content": "final question about topic3"})
    return msgs


def to_anthropic(msgs: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    system = msgs[0]["content"]
    out: list[dict[str, Any]] = []
    for m in msgs[1:]:
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            out.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "let me look"}]
                    + [
                        {"type": "tool_use", "id": c["id"], "name": "grep", "input": {"q": "x"}}
                        for c in m["tool_calls"]
                    ],
                }
            )
        elif out and out[-1]["role"] == m["role"]:
            out[-1]["content"].append({"type": "text", "text": m["content"]})
        else:
            out.append({"role": m["role"], "content": [{"type": "text", "text": m["content"]}]})
    return system, out


def test_openai_round_trip_is_identity() -> None:
    msgs = openai_trace(random.Random(1), 4)
    assert openai_from_fragments(openai_to_fragments(msgs)) == msgs
    assert check_openai_tool_pairs(msgs) == []


def test_anthropic_round_trip_is_identity() -> None:
    system, msgs = to_anthropic(openai_trace(random.Random(2), 4))
    got_system, got = anthropic_from_fragments(anthropic_to_fragments(msgs, system))
    assert got_system == system and got == msgs
    assert check_anthropic_tool_pairs(msgs) == []


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("selector_name", ["newest", "relevance"])
def test_pairs_are_never_split_in_either_format(seed: int, selector_name: str) -> None:
    rng = random.Random(seed)
    msgs = openai_trace(rng, rng.randint(3, 8))
    selector = newest_first_selector() if selector_name == "newest" else relevance_selector()
    counter = WordCounter()
    for fraction in (0.2, 0.5, 0.8):
        frags = openai_to_fragments(msgs)
        budget = max(1, int(sum(counter.count(f.text) for f in frags) * fraction))
        stage = ReductionStage(max_tokens=budget, counter=counter, selector=selector, best_effort=True)
        reduced = openai_from_fragments(stage.reduce_sync(frags).fragments)
        assert check_openai_tool_pairs(reduced) == []
        assert reduced[0]["role"] == "system" and reduced[-1] == msgs[-1]

        system, amsgs = to_anthropic(msgs)
        afrags = anthropic_to_fragments(amsgs, system)
        budget = max(1, int(sum(counter.count(f.text) for f in afrags) * fraction))
        stage = ReductionStage(max_tokens=budget, counter=counter, selector=selector, best_effort=True)
        got_system, areduced = anthropic_from_fragments(stage.reduce_sync(afrags).fragments)
        assert got_system == system
        assert check_anthropic_tool_pairs(areduced) == []
        roles = [m["role"] for m in areduced]
        assert all(a != b for a, b in itertools.pairwise(roles))  # roles alternate


def test_check_functions_detect_broken_pairs() -> None:
    msgs = openai_trace(random.Random(3), 3)
    broken = [m for m in msgs if m["role"] != "tool"]
    assert check_openai_tool_pairs(broken)
    orphan = [msgs[0], {"role": "tool", "tool_call_id": "nope", "content": "x"}]
    assert check_openai_tool_pairs(orphan)
    _, amsgs = to_anthropic(msgs)
    no_results = [
        m for m in amsgs if not (isinstance(m["content"], list) and m["content"][0].get("type") == "tool_result")
    ]
    assert check_anthropic_tool_pairs(no_results)


def test_truncated_tool_results_carry_the_truncated_text() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "x " * 500}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    stage = ReductionStage(max_tokens=200, counter=WordCounter(), max_tool_output_tokens=50)
    out = openai_from_fragments(stage.reduce_sync(openai_to_fragments(msgs)).fragments)
    assert isinstance(out[3]["content"], str) and "[… truncated" in out[3]["content"]
    assert out[3]["tool_call_id"] == "c1" and out[2] == msgs[2]

    system, amsgs = to_anthropic(msgs)
    afrags = anthropic_to_fragments(amsgs, system)
    _, aout = anthropic_from_fragments(stage.reduce_sync(afrags).fragments)
    result_block = aout[2]["content"][0]
    assert result_block["type"] == "tool_result" and "[… truncated" in result_block["content"]


def test_anthropic_user_message_with_results_and_text_is_split() -> None:
    msgs = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a b c"},
                {"type": "text", "text": "and summarise"},
            ],
        },
    ]
    frags = anthropic_to_fragments(msgs)
    assert [(f.id, f.step, f.kind) for f in frags] == [
        ("m0", "m0", "user"),
        ("m1", "s1", "tool_call"),
        ("m2.0", "s1", "tool_result"),
        ("m2.1", "m2.1", "user"),
    ]
    assert anthropic_from_fragments(frags) == (None, msgs)  # string content stays a string


def test_summaries_become_messages_where_the_replaced_steps_were() -> None:
    msgs = openai_trace(random.Random(5), 5)
    frags = openai_to_fragments(msgs)
    counter = WordCounter()
    stage = ReductionStage(
        max_tokens=sum(counter.count(f.text) for f in frags) // 2,
        counter=counter,
        compressor=create_context_compressor("sum", "summarise", max_output_tokens=30),
        transports={"core:plain-text": ScriptedModel("earlier: grep hits on topics")},
    )
    result = stage.reduce_sync(frags)
    out = openai_from_fragments(result.fragments)
    assert out[1] == {"role": "system", "content": SUMMARY_PREFIX + "earlier: grep hits on topics"}
    assert check_openai_tool_pairs(out) == []
    with pytest.raises(MessageFormatError, match="no original Anthropic"):
        anthropic_from_fragments(result.fragments)  # OpenAI tool fragments cannot become Anthropic blocks


@pytest.mark.parametrize(
    "bad",
    [
        "not a list",
        [1],
        [{"content": "no role"}],
        [{"role": "wizard", "content": "x"}],
        [{"role": "user", "content": 5}],
        [{"role": "assistant", "tool_calls": [{"type": "function"}]}],
    ],
)
def test_bad_openai_input_raises_message_format_error(bad: Any) -> None:
    with pytest.raises(MessageFormatError):
        openai_to_fragments(bad)


@pytest.mark.parametrize("bad", [[{"role": "system", "content": "x"}], [{"role": "user", "content": 3}], [7]])
def test_bad_anthropic_input_raises_message_format_error(bad: Any) -> None:
    with pytest.raises(MessageFormatError):
        anthropic_to_fragments(bad)
