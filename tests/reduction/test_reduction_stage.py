"""The stage: seed rules (protected content, unknown ids, call budget, cancellation) and the ladder."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from reduction_doubles import ScriptedModel, WordCounter, agent_conversation, words

from shortlist._events import Event, event_hooks
from shortlist.errors import ConfigError, ContextBudgetError
from shortlist.reduction import ContextFragment, ReductionStage, create_context_compressor, newest_first_selector
from shortlist.reduction._contract import (
    CallBudgetExhausted,
    CancellationToken,
    ContextSelectionCall,
    ContextSelector,
    Diagnostics,
    ExecutionContext,
    ReductionCancelled,
)
from shortlist.reduction._events import (
    ReductionApplied,
    ReductionBudgetExceeded,
    ReductionCompressionDiscarded,
    ReductionModelCall,
    ReductionSelectionRejected,
    ReductionSkipped,
)
from shortlist.reduction._model_selector import create_context_selector


def recording_selector(answer: list[str] | None = None, *, max_calls: int = 0) -> tuple[ContextSelector, list]:
    seen: list[ContextSelectionCall] = []

    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        seen.append(call)
        return list(answer) if answer is not None else [c.step_id for c in call.candidates]

    return ContextSelector(id="rec", select=select, max_calls=max_calls), seen


def total(frags: list[ContextFragment] | tuple[ContextFragment, ...]) -> int:
    return sum(WordCounter().count(f.text) for f in frags)


async def test_within_budget_is_a_noop_with_no_model_call(counter: WordCounter) -> None:
    frags = agent_conversation(3)
    model = ScriptedModel()
    stage = ReductionStage(
        max_tokens=total(frags),
        counter=counter,
        selector=create_context_selector("m", max_output_tokens=50, max_excerpt_chars=100),
        transports={"selector-json": model},
    )
    result = await stage.reduce(frags)
    assert result.fragments == tuple(frags)
    assert result.skipped and result.calls_used == 0 and model.requests == []
    assert [type(e) for e in result.diagnostics] == [ReductionSkipped]
    assert result.tokens_before == result.tokens_after == total(frags)


async def test_protected_fragments_never_reach_the_selector(counter: WordCounter) -> None:
    frags = agent_conversation(6)
    frags[5] = frags[5].replace(protected=True)  # pin r1: its whole step s1 is protected
    selector, seen = recording_selector([])
    stage = ReductionStage(max_tokens=total(frags) - 30, counter=counter, selector=selector)
    result = await stage.reduce(frags)
    (call,) = seen
    passed = {f.id for f in call.fragments}
    assert not passed & {"sys", "u1", "c1", "r1"}
    assert {c.step_id for c in call.candidates} == {"u0", "s0", "s2", "s3", "s4", "s5"}
    kept = {f.id for f in result.fragments}
    assert {"sys", "u1", "c1", "r1"} <= kept
    assert call.current_tokens == total(frags)
    assert call.required_reduction_tokens == 30
    assert call.required_reduction_chars == 0  # no char budget


async def test_unknown_ids_reject_the_whole_answer_and_fall_back(counter: WordCounter) -> None:
    frags = agent_conversation(5)
    selector, _ = recording_selector(["s4", "s3", "invented", "u1"])  # u1 is protected: unknown too
    hooked: list[Event] = []
    diagnostics = Diagnostics()
    stage = ReductionStage(max_tokens=total(frags) - 40, counter=counter, selector=selector, hooks=[hooked.append])
    result = await stage.reduce(frags, ExecutionContext(diagnostics=diagnostics))
    rejected = [e for e in result.diagnostics if isinstance(e, ReductionSelectionRejected)]
    assert len(rejected) == 1
    assert rejected[0].reason == "unknown_ids" and rejected[0].unknown_ids == ("invented", "u1")
    applied = [e for e in result.diagnostics if isinstance(e, ReductionApplied)]
    assert [e.kind for e in applied] == ["drop"]  # the selection was not partially applied
    assert applied[0].step_ids == ("u0", "s0", "s1")  # oldest first until it fits
    assert rejected[0] in hooked and rejected[0] in diagnostics.events


async def test_selection_keeps_chosen_steps_in_original_order(counter: WordCounter) -> None:
    frags = agent_conversation(5)
    selector, _ = recording_selector(["s3", "s1"])
    stage = ReductionStage(max_tokens=total(frags) - 40, counter=counter, selector=selector)
    result = await stage.reduce(frags)
    assert [f.id for f in result.fragments] == ["sys", "c1", "r1", "c3", "r3", "u1"]
    (applied,) = [e for e in result.diagnostics if isinstance(e, ReductionApplied)]
    assert applied.kind == "select" and applied.saved_tokens == total(frags) - total(result.fragments)


async def test_selector_returning_a_string_is_rejected(counter: WordCounter) -> None:
    async def select(call: ContextSelectionCall, context: ExecutionContext) -> str:
        return "s1"

    selector = ContextSelector(id="bad", select=select, max_calls=0)  # type: ignore[arg-type]
    stage = ReductionStage(max_tokens=30, counter=counter, selector=selector)
    result = await stage.reduce(agent_conversation(3))
    (rejected,) = [e for e in result.diagnostics if isinstance(e, ReductionSelectionRejected)]
    assert rejected.reason == "invalid_answer"


def test_model_selector_with_zero_calls_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="max_calls=0"):
        create_context_selector("m", max_output_tokens=10, max_excerpt_chars=10, max_calls=0)
    model = create_context_selector("m", max_output_tokens=10, max_excerpt_chars=10)
    with pytest.raises(ConfigError, match="max_calls=0"):
        ReductionStage(max_tokens=10, selector=model, transports={"selector-json": ScriptedModel()}, max_calls=0)
    compressor = create_context_compressor("c", "summarise", max_output_tokens=10)
    with pytest.raises(ConfigError, match="max_calls=0"):
        ReductionStage(
            max_tokens=10, compressor=compressor, transports={"core:plain-text": ScriptedModel()}, max_calls=0
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "max_tokens, max_chars"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_chars": -5}, "max_chars"),
        ({"max_tokens": 10, "max_calls": -1}, "max_calls"),
        ({"max_tokens": 10, "max_calls": 1.5}, "max_calls"),
    ],
)
def test_bad_stage_configuration(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReductionStage(**kwargs)


def test_unregistered_transport_and_duplicate_ids_are_configuration_errors() -> None:
    model = create_context_selector("m", max_output_tokens=10, max_excerpt_chars=10)
    with pytest.raises(ConfigError, match="not registered"):
        ReductionStage(max_tokens=10, selector=model)
    compressor = create_context_compressor("m", "summarise", max_output_tokens=10)
    with pytest.raises(ConfigError, match="share the id"):
        ReductionStage(
            max_tokens=10,
            selector=model,
            compressor=compressor,
            transports={"selector-json": ScriptedModel(), "core:plain-text": ScriptedModel()},
        )


async def test_duplicate_fragment_ids_are_rejected(counter: WordCounter) -> None:
    frags = [ContextFragment(id="a", kind="user", text="x"), ContextFragment(id="a", kind="user", text="y")]
    with pytest.raises(ConfigError, match="duplicate"):
        await ReductionStage(max_tokens=1, counter=counter).reduce(frags)


async def test_remaining_calls_decreases_and_is_enforced(counter: WordCounter) -> None:
    observed: list[int] = []

    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        observed.append(call.remaining_calls)
        await call.call_model(instruction="i", input="x", transport="selector-json", max_output_tokens=5)
        observed.append(call.remaining_calls)
        await call.call_model(instruction="i", input="x", transport="selector-json", max_output_tokens=5)
        return []

    model = ScriptedModel({"step_ids": []}, {"step_ids": []})
    selector = ContextSelector(id="greedy", select=select, max_calls=1, transport="selector-json")
    stage = ReductionStage(
        max_tokens=30, counter=counter, selector=selector, transports={"selector-json": model}, max_calls=3
    )
    result = await stage.reduce(agent_conversation(4))
    assert observed == [1, 0]
    assert len(model.requests) == 1  # the second call never reached the model
    (rejected,) = [e for e in result.diagnostics if isinstance(e, ReductionSelectionRejected)]
    assert rejected.reason == "call_budget_exhausted"
    assert result.calls_used == 1


async def test_local_selector_cannot_call_the_model(counter: WordCounter) -> None:
    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        assert call.remaining_calls == 0
        with pytest.raises(CallBudgetExhausted):
            await call.call_model(instruction="i", input="x", transport="core:plain-text", max_output_tokens=5)
        return [c.step_id for c in call.candidates][-1:]

    model = ScriptedModel()
    stage = ReductionStage(
        max_tokens=40,
        counter=counter,
        selector=ContextSelector(id="local", select=select, max_calls=0),
        transports={"core:plain-text": model},
    )
    result = await stage.reduce(agent_conversation(4))
    assert model.requests == [] and result.calls_used == 0


async def test_the_call_budget_is_shared_between_selector_and_compressor(counter: WordCounter) -> None:
    frags = agent_conversation(8)
    selector_model = ScriptedModel({"step_ids": ["s5", "s6", "s7"]})
    summary_model = ScriptedModel("short summary")
    stage = ReductionStage(
        max_tokens=40,
        counter=counter,
        selector=create_context_selector("pick", max_output_tokens=50, max_excerpt_chars=40),
        compressor=create_context_compressor("sum", "summarise", max_output_tokens=20),
        transports={"selector-json": selector_model, "core:plain-text": summary_model},
        max_calls=1,
    )
    result = await stage.reduce(frags)
    assert len(selector_model.requests) == 1 and summary_model.requests == []
    (discarded,) = [e for e in result.diagnostics if isinstance(e, ReductionCompressionDiscarded)]
    assert discarded.reason == "call_budget_exhausted"
    assert result.calls_used == 1
    assert result.tokens_after is not None and result.tokens_after <= 40
    calls = [e for e in result.diagnostics if isinstance(e, ReductionModelCall)]
    assert [(c.reducer, c.ok) for c in calls] == [("pick", True)]


async def test_compressor_summary_replaces_oldest_steps_in_place(counter: WordCounter) -> None:
    frags = agent_conversation(6)
    model = ScriptedModel("the agent listed files and found config")
    stage = ReductionStage(
        max_tokens=total(frags) - 30,
        counter=counter,
        compressor=create_context_compressor("sum", "summarise", max_output_tokens=20),
        transports={"core:plain-text": model},
    )
    result = await stage.reduce(frags)
    ids = [f.id for f in result.fragments]
    assert ids[0] == "sys" and ids[1] == "sum:u0"  # the summary sits where the first replaced step was
    summary = result.fragments[1]
    assert summary.kind == "summary" and not summary.protected
    replaced = summary.meta["replaces"]
    assert replaced[0] == "u0" and all(f.step not in replaced for f in result.fragments[2:])
    (request,) = model.requests
    assert request.purpose == "sum" and request.transport == "core:plain-text" and request.max_output_tokens == 20
    assert "please start the task" in request.input and "you are an agent" not in request.input
    assert result.tokens_after is not None and result.tokens_after <= total(frags) - 30
    assert [e.kind for e in result.diagnostics if isinstance(e, ReductionApplied)] == ["compress"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (TypeError("not a summary"), "error"),  # raised by the model itself: a model failure
        ("", "parse_error"),  # the default parse rejects empty output with a TypeError
        (42, "parse_error"),
        (words(200), "too_long"),
    ],
)
async def test_compressor_failures_discard_the_summary_and_fall_back(
    counter: WordCounter, answer: object, reason: str
) -> None:
    frags = agent_conversation(6)
    stage = ReductionStage(
        max_tokens=total(frags) - 30,
        counter=counter,
        compressor=create_context_compressor("sum", "summarise", max_output_tokens=50),
        transports={"core:plain-text": ScriptedModel(answer)},
    )
    result = await stage.reduce(frags)
    (discarded,) = [e for e in result.diagnostics if isinstance(e, ReductionCompressionDiscarded)]
    assert discarded.reason == reason
    assert all(f.kind != "summary" for f in result.fragments)
    assert [e.kind for e in result.diagnostics if isinstance(e, ReductionApplied)] == ["drop"]


async def test_custom_parse_failure_discards_the_summary(counter: WordCounter) -> None:
    def parse(value: object) -> str:
        if not isinstance(value, str) or not value.startswith("SUMMARY:"):
            raise TypeError("expected a SUMMARY: line")
        return value.removeprefix("SUMMARY:")

    frags = agent_conversation(6)
    stage = ReductionStage(
        max_tokens=total(frags) - 30,
        counter=counter,
        compressor=create_context_compressor("sum", "summarise", max_output_tokens=50, parse=parse),
        transports={"core:plain-text": ScriptedModel("no prefix here")},
    )
    result = await stage.reduce(frags)
    (discarded,) = [e for e in result.diagnostics if isinstance(e, ReductionCompressionDiscarded)]
    assert discarded.reason == "parse_error" and "SUMMARY" in discarded.error


async def test_summary_that_is_not_smaller_is_discarded(counter: WordCounter) -> None:
    frags = [
        ContextFragment(id="sys", kind="system", text="sys"),
        ContextFragment(id="a", kind="assistant", text="one two"),
        ContextFragment(id="b", kind="assistant", text="three four"),
        ContextFragment(id="u", kind="user", text="question"),
    ]
    stage = ReductionStage(
        max_tokens=5,
        counter=counter,
        compressor=create_context_compressor("sum", "summarise", max_output_tokens=10),
        transports={"core:plain-text": ScriptedModel("a b c d e f")},
    )
    result = await stage.reduce(frags)
    (discarded,) = [e for e in result.diagnostics if isinstance(e, ReductionCompressionDiscarded)]
    assert discarded.reason == "no_gain"


async def test_budget_error_says_by_how_much_before_any_model_call(counter: WordCounter) -> None:
    frags = [
        ContextFragment(id="sys", kind="system", text=words(30)),
        ContextFragment(id="old", kind="assistant", text=words(10)),
        ContextFragment(id="u", kind="user", text=words(5)),
    ]
    model = ScriptedModel({"step_ids": []})
    stage = ReductionStage(
        max_tokens=20,
        max_chars=100,
        counter=counter,
        selector=create_context_selector("m", max_output_tokens=5, max_excerpt_chars=5),
        transports={"selector-json": model},
    )
    diagnostics = Diagnostics()
    with pytest.raises(ContextBudgetError) as info:
        await stage.reduce(frags, ExecutionContext(diagnostics=diagnostics))
    protected_chars = len(frags[0].text) + len(frags[2].text)
    assert info.value.over_tokens == 15
    assert info.value.over_chars == protected_chars - 100
    assert "15 tokens over max_tokens=20" in str(info.value)
    assert model.requests == []
    (event,) = [e for e in diagnostics.events if isinstance(e, ReductionBudgetExceeded)]
    assert (event.over_tokens, event.best_effort, event.reason) == (15, False, "protected_exceeds_budget")


async def test_best_effort_returns_flagged_result_with_only_protected_content(counter: WordCounter) -> None:
    frags = [
        ContextFragment(id="sys", kind="system", text=words(30)),
        ContextFragment(id="old", kind="assistant", text=words(10)),
        ContextFragment(id="u", kind="user", text=words(5)),
    ]
    result = await ReductionStage(max_tokens=20, counter=counter, best_effort=True).reduce(frags)
    assert result.over_budget and result.over_tokens == 15
    assert [f.id for f in result.fragments] == ["sys", "u"]


async def test_truncation_keeps_head_and_tail_and_runs_first(counter: WordCounter) -> None:
    big = words(400, "line")
    frags = [
        ContextFragment(id="sys", kind="system", text="sys"),
        ContextFragment(id="u0", kind="user", text="run it"),
        ContextFragment(id="c", step_id="s", kind="tool_call", text="run()"),
        ContextFragment(id="r", step_id="s", kind="tool_result", text=big),
        ContextFragment(id="a", kind="assistant", text="done"),
        ContextFragment(id="u1", kind="user", text="and now?"),
    ]
    selector, seen = recording_selector()
    stage = ReductionStage(max_tokens=200, counter=counter, selector=selector, max_tool_output_tokens=100)
    result = await stage.reduce(frags)
    assert seen == []  # truncation alone was enough: the selector was not consulted
    (r,) = [f for f in result.fragments if f.id == "r"]
    assert r.text.startswith("line0 line1") and r.text.endswith("line399")
    assert "[… truncated" in r.text and r.meta["truncated_from_chars"] == len(big)
    assert [f.id for f in result.fragments] == ["sys", "u0", "c", "r", "a", "u1"]
    (applied,) = [e for e in result.diagnostics if isinstance(e, ReductionApplied)]
    assert applied.kind == "truncate" and applied.step_ids == ("s",)
    assert applied.saved_tokens is not None and applied.saved_tokens > 0


async def test_char_budget_alone_is_met(counter: WordCounter) -> None:
    frags = agent_conversation(10)
    result = await ReductionStage(max_chars=400, selector=newest_first_selector()).reduce(frags)
    assert result.chars_after <= 400 and result.tokens_before is None and result.tokens_after is None
    assert result.fragments[-1].id == "u1" and result.fragments[0].id == "sys"


async def test_newest_step_is_protected_by_default(counter: WordCounter) -> None:
    frags = agent_conversation(5)[:-1]  # no trailing user turn: the in-flight tool step is newest
    selector, seen = recording_selector([])
    result = await ReductionStage(max_tokens=40, counter=counter, selector=selector).reduce(frags)
    assert "s4" not in {c.step_id for c in seen[0].candidates}
    assert {"c4", "r4"} <= {f.id for f in result.fragments}


async def test_cancelled_before_start_raises_without_result(counter: WordCounter) -> None:
    token = CancellationToken()
    token.cancel("user left")
    with pytest.raises(ReductionCancelled, match="user left"):
        await ReductionStage(max_tokens=10, counter=counter).reduce(agent_conversation(3), ExecutionContext(token))


async def test_cancellation_during_a_model_call_stops_the_stage(counter: WordCounter) -> None:
    token = CancellationToken()
    started = asyncio.Event()

    async def hang(request: object) -> None:
        started.set()
        await asyncio.sleep(3600)

    model = ScriptedModel({"step_ids": []}, on_call=hang)
    diagnostics = Diagnostics()
    stage = ReductionStage(
        max_tokens=20,
        counter=counter,
        selector=create_context_selector("m", max_output_tokens=5, max_excerpt_chars=5),
        compressor=create_context_compressor("c", "summarise", max_output_tokens=5),
        transports={"selector-json": model, "core:plain-text": ScriptedModel()},
        max_calls=2,
    )
    task = asyncio.create_task(stage.reduce(agent_conversation(6), ExecutionContext(token, diagnostics=diagnostics)))
    await asyncio.wait_for(started.wait(), 5)
    threading.Thread(target=token.cancel, args=("stop",)).start()  # from another thread
    with pytest.raises(ReductionCancelled):
        await asyncio.wait_for(task, 5)
    names = [e.name for e in diagnostics.events]
    assert "reduction.cancelled" in names and "reduction.completed" not in names
    (call,) = [e for e in diagnostics.events if isinstance(e, ReductionModelCall)]
    assert call.ok is False and call.error == "cancelled"


async def test_cancellation_between_rungs_prevents_the_next_model_call(counter: WordCounter) -> None:
    token = CancellationToken()

    async def select(call: ContextSelectionCall, context: ExecutionContext) -> list[str]:
        context.signal.cancel("enough")
        return [c.step_id for c in call.candidates]  # keeps everything: still over budget

    summary_model = ScriptedModel("summary")
    stage = ReductionStage(
        max_tokens=20,
        counter=counter,
        selector=ContextSelector(id="s", select=select, max_calls=0),
        compressor=create_context_compressor("c", "summarise", max_output_tokens=5),
        transports={"core:plain-text": summary_model},
    )
    with pytest.raises(ReductionCancelled):
        await stage.reduce(agent_conversation(6), ExecutionContext(token))
    assert summary_model.requests == []


async def test_model_receives_the_signal_and_failures_are_recorded(counter: WordCounter) -> None:
    token = CancellationToken()
    model = ScriptedModel(RuntimeError("boom"))
    stage = ReductionStage(
        max_tokens=30,
        counter=counter,
        selector=create_context_selector("m", max_output_tokens=5, max_excerpt_chars=5),
        transports={"selector-json": model},
    )
    result = await stage.reduce(agent_conversation(5), ExecutionContext(token))
    assert model.requests[0].signal is token
    (call,) = [e for e in result.diagnostics if isinstance(e, ReductionModelCall)]
    assert call.ok is False and "boom" in call.error and call.ms >= 0
    (rejected,) = [e for e in result.diagnostics if isinstance(e, ReductionSelectionRejected)]
    assert rejected.reason == "error"
    assert result.tokens_after is not None and result.tokens_after <= 30


async def test_events_reach_scoped_hooks_and_the_explicit_logger(
    counter: WordCounter, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[Event] = []
    logger = logging.getLogger("test.reduction.explicit")
    with caplog.at_level(logging.DEBUG, logger="test.reduction.explicit"), event_hooks(seen.append):
        await ReductionStage(max_tokens=30, counter=counter).reduce(
            agent_conversation(5), ExecutionContext(logger=logger)
        )
    assert [e.name for e in seen] == ["reduction.started", "reduction.applied", "reduction.completed"]
    assert any("reduction.applied" in r.getMessage() for r in caplog.records if r.name == logger.name)


def test_reduce_sync_matches_async_and_refuses_a_running_loop(counter: WordCounter) -> None:
    stage = ReductionStage(max_tokens=30, counter=counter)
    frags = agent_conversation(5)
    result = stage.reduce_sync(frags)
    assert result.fragments == asyncio.run(stage.reduce(frags)).fragments

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="event loop"):
            stage.reduce_sync(frags)

    asyncio.run(inside())


async def test_a_model_that_is_not_async_is_recorded_as_a_failed_call(counter: WordCounter) -> None:
    def not_async(request: object) -> dict[str, list[str]]:
        return {"step_ids": []}

    stage = ReductionStage(
        max_tokens=30,
        counter=counter,
        selector=create_context_selector("m", max_output_tokens=5, max_excerpt_chars=5),
        transports={"selector-json": not_async},  # type: ignore[dict-item]
    )
    result = await stage.reduce(agent_conversation(5))
    (call,) = [e for e in result.diagnostics if isinstance(e, ReductionModelCall)]
    assert call.ok is False and "TypeError" in call.error
    assert result.tokens_after is not None and result.tokens_after <= 30
