"""Per-turn narrowing: the selection-core scenarios of spec §9 (1-18) and the fallback events."""

from __future__ import annotations

import asyncio
import fnmatch
import threading
import time
from collections.abc import Sequence

import pytest

from shortlist._events import Event, SelectionFallback, SelectorRejectedIds, event_hooks
from shortlist._types import Candidate, Query, Selection
from shortlist.selection._base import FunctionSelector, Selector
from shortlist.selection._narrowing import NarrowingPolicy, PinPolicy, anarrow, narrow
from shortlist.selection._query import last_user_text
from shortlist.testing import FailingSelector

ABC = [Candidate("alpha", description="a"), Candidate("beta", description="b"), Candidate("gamma", description="c")]


class Recording(Selector):
    """A selector that records its calls and answers a fixed list."""

    def __init__(self, answer: Selection | list[str] | Exception | None, name: str = "rec") -> None:
        self.name = name
        self.answer = answer
        self.calls: list[tuple[Query, tuple[str, ...]]] = []

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.calls.append((query, tuple(c.id for c in candidates)))
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is None:
            return None  # type: ignore[return-value]  # a badly behaved selector
        return self.answer if isinstance(self.answer, Selection) else Selection(tuple(self.answer))


def collect() -> tuple[list[Event], object]:
    events: list[Event] = []
    return events, event_hooks(events.append)


def test_no_selector_surfaces_everything_without_a_call() -> None:
    turn = narrow(None, Query("hello"), ABC)
    assert turn.ids == ("alpha", "beta", "gamma")
    assert turn.fallback == "no_selector"


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_query_surfaces_everything_and_does_not_call(text: str) -> None:
    sel = Recording(["alpha"])
    turn = narrow(sel, Query(text), ABC)
    assert sel.calls == []
    assert turn.ids == ("alpha", "beta", "gamma")
    assert turn.fallback == "empty_query"


def test_subset_in_source_order_when_asked() -> None:
    turn = narrow(Recording(["gamma", "alpha"]), Query("x"), ABC, NarrowingPolicy(order="source"))
    assert turn.ids == ("alpha", "gamma")
    assert turn.narrowed


def test_subset_in_ranking_order_by_default() -> None:
    turn = narrow(Recording(["gamma", "alpha"]), Query("x"), ABC)
    assert turn.ids == ("gamma", "alpha")
    assert turn.ranked == ("gamma", "alpha")


def test_selector_error_falls_back_with_a_warning_event() -> None:
    events: list[Event] = []
    with event_hooks(events.append):
        turn = narrow(Recording(RuntimeError("rerank service down")), Query("x"), ABC)
    assert turn.ids == ("alpha", "beta", "gamma")
    assert turn.fallback == "error"
    fb = [e for e in events if isinstance(e, SelectionFallback)]
    assert len(fb) == 1 and fb[0].reason == "error" and "rerank service down" in fb[0].error
    assert fb[0].selector == "rec"


@pytest.mark.parametrize("answer", [[], None, Selection(())])
def test_empty_or_null_answer_falls_back(answer: list[str] | Selection | None) -> None:
    turn = narrow(Recording(answer), Query("x"), ABC)
    assert turn.ids == ("alpha", "beta", "gamma")
    assert turn.fallback == "empty"


def test_only_unknown_ids_fall_back() -> None:
    events: list[Event] = []
    with event_hooks(events.append):
        turn = narrow(Recording(["ghost"]), Query("x"), ABC)
    assert turn.fallback == "unknown_ids"
    assert turn.ids == ("alpha", "beta", "gamma")
    assert turn.rejected == ("ghost",)
    assert any(isinstance(e, SelectorRejectedIds) and e.ids == ("ghost",) for e in events)


def test_mixed_known_and_unknown_keeps_known() -> None:
    turn = narrow(Recording(["ghost", "beta"]), Query("x"), ABC)
    assert turn.ids == ("beta",)
    assert turn.rejected == ("ghost",)
    assert turn.narrowed


def test_duplicates_collapse() -> None:
    turn = narrow(Recording(["beta", "beta", "alpha", "beta"]), Query("x"), ABC)
    assert turn.ids == ("beta", "alpha")


def test_duplicate_candidates_first_wins() -> None:
    cands = [Candidate("a", description="first"), Candidate("a", description="second")]
    turn = narrow(None, Query("x"), cands)
    assert [c.description for c in turn.surfaced] == ["first"]


def test_no_candidates_does_not_call() -> None:
    sel = Recording(["alpha"])
    turn = narrow(sel, Query("x"), [])
    assert sel.calls == [] and turn.ids == () and turn.fallback == "no_candidates"


def test_query_forwarded_with_kind_and_k() -> None:
    sel = Recording(["alpha"])
    narrow(sel, Query("find it", kind="skill", k=3, pack_id="p", agent_id="a"), ABC)
    q, ids = sel.calls[0]
    assert (q.text, q.kind, q.k, q.pack_id, q.agent_id) == ("find it", "skill", 3, "p", "a")
    assert ids == ("alpha", "beta", "gamma")


def test_last_user_text() -> None:
    assert last_user_text([{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]) == "second"
    assert last_user_text([{"role": "system", "content": "sys"}]) == ""
    parts = [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "look"}]
    assert last_user_text([{"role": "user", "content": parts}, {"role": "assistant", "content": "ok"}]) == "look"
    assert last_user_text([{"role": "user", "content": [{"type": "image", "source": {}}]}]) == ""


SYSTEM = [
    "skill__activate",
    "memory__recall",
    "workflow__next",
    "a2a__call",
    "image__gen",
    "video__gen",
    "mcp__fs__read",
]


def test_system_namespaces_are_never_narrowed_away_nor_sent() -> None:
    cands = [Candidate(i) for i in [*SYSTEM, "search", "email"]]
    sel = Recording(["email"])
    turn = narrow(sel, Query("x"), cands)
    assert sel.calls[0][1] == ("search", "email")  # pins are not ranked
    assert set(turn.ids) == {*SYSTEM, "email"}
    assert turn.ids[0] == "email"


def test_wildcard_entries_survive_narrowing() -> None:
    cands = [Candidate("mcp__srv__*"), Candidate("search"), Candidate("email")]
    turn = narrow(Recording(["search"]), Query("x"), cands, NarrowingPolicy(pins=PinPolicy(namespaces=())))
    assert set(turn.ids) == {"mcp__srv__*", "search"}


def test_always_include_and_custom_namespaces() -> None:
    cands = [Candidate(i) for i in ["ops__a", "help", "x1", "x2", "memory__recall"]]
    policy = NarrowingPolicy(pins=PinPolicy(namespaces=("ops",), always_include=("help",)))
    turn = narrow(Recording(["x2"]), Query("q"), cands, policy)
    assert set(turn.ids) == {"ops__a", "help", "x2"}  # memory is not pinned under this policy


def test_k_caps_the_answer_and_larger_k_is_harmless() -> None:
    turn = narrow(Recording(["alpha", "beta", "gamma"]), Query("x", k=2), ABC)
    assert turn.ids == ("alpha", "beta")
    turn = narrow(Recording(["alpha"]), Query("x", k=50), ABC)
    assert turn.ids == ("alpha",)


def test_abstention_surfaces_pins_only_under_the_pins_policy() -> None:
    cands = [*ABC, Candidate("memory__recall")]
    abstain = Selection(abstained=True, reason="nothing fits")
    pins_only = narrow(Recording(abstain), Query("x"), cands, NarrowingPolicy(on_abstain="pins"))
    assert pins_only.ids == ("memory__recall",) and pins_only.narrowed and pins_only.abstained
    safe = narrow(Recording(abstain), Query("x"), cands)
    assert safe.fallback == "empty" and len(safe.ids) == 4


def test_exception_of_any_kind_is_contained() -> None:
    boom = FailingSelector(ZeroDivisionError("panic"), name="boom")
    assert narrow(boom, Query("x"), ABC).fallback == "error"
    assert boom.calls == 1


@pytest.mark.parametrize("raised", [TimeoutError("upstream too slow"), TimeoutError()])
async def test_a_timeout_the_selector_raises_is_a_timeout_sync_and_async(raised: TimeoutError) -> None:
    events: list[Event] = []
    turns = [
        narrow(Recording(raised), Query("x"), ABC, hooks=(events.append,)),
        await anarrow(Recording(raised), Query("x"), ABC, hooks=(events.append,)),
    ]
    for turn in turns:
        assert turn.fallback == "timeout" and turn.ids == ("alpha", "beta", "gamma")
    fallbacks = [e for e in events if isinstance(e, SelectionFallback)]
    assert [e.reason for e in fallbacks] == ["timeout", "timeout"]
    assert all("SelectorTimeout: selector raised TimeoutError" in e.error for e in fallbacks)
    assert narrow(Recording(ValueError("x")), Query("x"), ABC).fallback == "error"  # anything else stays an error


def test_wrong_return_type_is_an_error_fallback() -> None:
    sel = FunctionSelector(lambda q, c: "alpha")  # a string, not a list
    assert narrow(sel, Query("x"), ABC).fallback == "error"


def test_in_process_timeout_falls_back_in_time() -> None:
    release = threading.Event()
    order: list[str] = []

    def slow(q: Query, c: Sequence[Candidate]) -> list[str]:
        release.wait(30)
        order.append("selector answered")
        return ["alpha"]

    turn = narrow(FunctionSelector(slow, name="slow"), Query("x"), ABC, NarrowingPolicy(timeout_s=0.1))
    order.append("turn returned")
    release.set()
    assert turn.fallback == "timeout"
    for _ in range(500):  # let the abandoned call finish
        if len(order) == 2:
            break
        time.sleep(0.01)
    assert order == ["turn returned", "selector answered"]  # the turn did not wait for the selector


async def test_async_narrowing_and_timeout() -> None:
    turn = await anarrow(Recording(["beta"]), Query("x"), ABC)
    assert turn.ids == ("beta",)

    class Slow(Selector):
        name = "slow"

        def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
            raise AssertionError("aselect is used")

        async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
            await asyncio.sleep(2)
            return Selection(("alpha",))

    turn = await anarrow(Slow(), Query("x"), ABC, NarrowingPolicy(timeout_s=0.05))
    assert turn.fallback == "timeout"
    turn = await anarrow(Recording(ValueError("x")), Query("x"), ABC)
    assert turn.fallback == "error"


def test_concurrent_turns_each_see_their_own_narrowing() -> None:
    barrier = threading.Barrier(2)

    def by_query(q: Query, c: Sequence[Candidate]) -> list[str]:
        barrier.wait(timeout=5)  # both turns are inside the selector at once
        return [q.text]

    sel = FunctionSelector(by_query)
    results: dict[str, tuple[str, ...]] = {}

    def turn(text: str) -> None:
        results[text] = narrow(sel, Query(text), ABC).ids

    threads = [threading.Thread(target=turn, args=(t,)) for t in ("alpha", "gamma")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"alpha": ("alpha",), "gamma": ("gamma",)}


def test_scores_are_reported_per_ranked_id() -> None:
    sel = Recording(Selection(("beta", "ghost", "alpha"), scores=(0.9, 0.5, 0.1), reason="why"))
    turn = narrow(sel, Query("x"), ABC)
    assert turn.scores == {"beta": 0.9, "alpha": 0.1}
    d = turn.to_dict()
    assert d["scores"] == [0.9, 0.1] and d["reason"] == "why" and d["fallback"] is None


def test_a_broken_event_hook_does_not_break_the_turn() -> None:
    def bad(e: Event) -> None:
        raise RuntimeError("hook bug")

    with event_hooks(bad):
        assert narrow(Recording(RuntimeError("x")), Query("x"), ABC).fallback == "error"


def test_value_types_validate() -> None:
    with pytest.raises(ValueError):
        Candidate("")
    with pytest.raises(ValueError):
        Query("x", k=-1)
    with pytest.raises(ValueError):
        Selection(("a",), scores=(1.0, 2.0))
    with pytest.raises(ValueError):
        NarrowingPolicy(order="random")  # type: ignore[arg-type]


def test_a_reused_catalog_tuple_follows_the_pin_policy_of_each_call() -> None:
    cands = (Candidate("ops__a"), Candidate("x1"), Candidate("x2"))
    sel = Recording(["x1"])
    first = narrow(sel, Query("q"), cands, NarrowingPolicy(pins=PinPolicy(namespaces=("ops",))))
    second = narrow(sel, Query("q"), cands, NarrowingPolicy(pins=PinPolicy(namespaces=())))
    assert first.ids == ("x1", "ops__a") and second.ids == ("x1",)
    assert sel.calls[0][1] == ("x1", "x2") and sel.calls[1][1] == ("ops__a", "x1", "x2")
    rebuilt = tuple(Candidate(c.id, description="changed") for c in cands)  # a new catalog object
    third = narrow(None, Query("q"), rebuilt, NarrowingPolicy(pins=PinPolicy(namespaces=("ops",))))
    assert [c.description for c in third.surfaced] == ["changed"] * 3


@pytest.mark.slow  # imports every module of the package: seconds when it runs first
def test_event_to_dict_is_every_field_but_the_level() -> None:
    import dataclasses
    import importlib
    import pkgutil

    import shortlist
    from shortlist._events import Event

    for info in pkgutil.walk_packages(shortlist.__path__, "shortlist."):
        if not info.name.endswith("__main__"):
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional extra that is not installed
                continue

    def subclasses(cls: type[Event]) -> list[type[Event]]:
        out = []
        for sub in cls.__subclasses__():
            out += [sub, *subclasses(sub)]
        return out

    classes = subclasses(Event)
    assert len(classes) >= 10
    for cls in classes:
        event = cls()
        expected = {"name": cls.name, "area": cls.area, **dataclasses.asdict(event)}  # name/area: class constants
        expected.pop("level")
        assert event.to_dict() == expected, cls.__name__


def _pinned_by_definition(policy: PinPolicy, candidate_id: str) -> bool:
    """A wildcard, an id whose text before its first ``__`` is a namespace, or an ``always_include`` match."""
    head, sep, _ = candidate_id.partition("__")
    return (
        (policy.pin_wildcards and any(ch in candidate_id for ch in "*?["))
        or bool(sep and head in policy.namespaces)
        or any(candidate_id == p or fnmatch.fnmatchcase(candidate_id, p) for p in policy.always_include)
    )


def test_the_split_pins_exactly_what_the_policy_pins() -> None:
    # A search splits a new pool of the catalog each time, by a prefix test per id: the definition's answer.
    from hypothesis import example, given
    from hypothesis import strategies as st

    ids = st.text(alphabet="ab_*?[", max_size=8)
    policies = st.builds(
        PinPolicy,
        namespaces=st.tuples(st.text(alphabet="ab_", max_size=3)),
        always_include=st.sampled_from(((), ("a*",), ("ab",))),
        pin_wildcards=st.booleans(),
    )

    @given(policies, st.lists(ids, max_size=20))
    @example(PinPolicy(namespaces=("a_",)), ["a___b", "a__b"])  # a namespace ending in _ opens no id
    @example(PinPolicy(namespaces=("_",)), ["____", "___a"])
    @example(PinPolicy(namespaces=("a__b",)), ["a__b__c"])  # nor one holding __
    def same(policy: PinPolicy, names: list[str]) -> None:
        test = policy.is_pinned
        assert [test(i) for i in names] == [_pinned_by_definition(policy, i) for i in names]

    same()
    assert PinPolicy().is_pinned("mcp__srv__read") and not PinPolicy().is_pinned("mcpx__read")
