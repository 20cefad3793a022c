"""Persistent worker mode: one process reused, restarted after a crash, a timeout or broken framing."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
from exec_helpers import BEHAVE, PYTHON, RERANK, process_gone

from shortlist._events import Event
from shortlist._types import Candidate, Query
from shortlist.errors import SelectorProcessError, SelectorProtocolError, SelectorTimeout
from shortlist.exec._events import ExecKilled, ExecNotAWorker, ExecSpawned, ExecWorkerRestarted
from shortlist.offer import ToolSession
from shortlist.offer._search import VARIANT_PAGES
from shortlist.rankers._exec_client import SUBSET_SLACK, ExecSelector, left_out_of
from shortlist.selection._facade import Shortlist
from shortlist.selection._narrowing import narrow

pytestmark = pytest.mark.slow  # exec worker processes

CANDS = [Candidate("a"), Candidate("b"), Candidate("c")]


def worker(*args: str, timeout_ms: int = 3000) -> ExecSelector:
    return ExecSelector("w", PYTHON, [BEHAVE, *args], worker=True, timeout_ms=timeout_ms)


def pid_of(sel: ExecSelector, text: str = "hello") -> int:
    return int(sel.select(Query(text, k=1), CANDS).reason)


def test_one_process_serves_many_calls_and_close_stops_it(events: list[Event]) -> None:
    sel = worker("worker_pid")
    pids = {pid_of(sel) for _ in range(5)}
    assert len(pids) == 1
    assert sum(isinstance(e, ExecSpawned) and e.worker for e in events) == 1
    sel.close()
    assert process_gone(pids.pop())
    sel.close()  # idempotent


def test_first_k_answer_and_request_ids() -> None:
    with worker("worker") as sel:
        for k in (1, 2, 3):
            assert sel.select(Query("x", k=k), CANDS).selected == ("a", "b", "c")[:k]


def test_crashed_worker_is_restarted(events: list[Event]) -> None:
    with worker("worker_crash", "boom") as sel:
        assert sel.select(Query("fine", k=1), CANDS).selected == ("a",)
        with pytest.raises(SelectorProcessError, match="exited with status 7") as info:
            sel.select(Query("boom now", k=1), CANDS)
        assert "crashing on purpose" in info.value.stderr_tail
        assert sel.select(Query("fine again", k=2), CANDS).selected == ("a", "b")
    (restart,) = [e for e in events if isinstance(e, ExecWorkerRestarted)]
    assert restart.reason == "crashed" and restart.restarts == 1 and restart.pid != restart.old_pid


def test_worker_that_died_between_calls_is_restarted_transparently(events: list[Event]) -> None:
    with worker("worker_pid") as sel:
        first = pid_of(sel)
        os.kill(first, signal.SIGKILL)
        assert process_gone(first)
        second = pid_of(sel)  # this call succeeds on a fresh worker
        assert second != first
    assert [e.reason for e in events if isinstance(e, ExecWorkerRestarted)] == ["exited"]


def test_worker_timeout_kills_and_restarts(events: list[Event]) -> None:
    with worker("worker_sleep", "slow", timeout_ms=400) as sel:
        assert sel.select(Query("quick", k=1), CANDS).selected == ("a",)
        turn = narrow(sel, Query("slow please", k=1), CANDS)
        assert turn.fallback == "timeout"
        # the worker (asleep for 30 s) was killed before the turn returned, not waited for
        assert [e.reason for e in events if isinstance(e, ExecKilled)] == ["timeout"]
        assert sel.select(Query("quick", k=1), CANDS).selected == ("a",)
    killed = [e for e in events if isinstance(e, ExecKilled)]
    assert [k.reason for k in killed] == ["timeout"] and killed[0].worker
    assert process_gone(killed[0].pid)
    assert [e.reason for e in events if isinstance(e, ExecWorkerRestarted)] == ["timeout"]


def test_worker_protocol_error_restarts(events: list[Event]) -> None:
    with worker("worker_garbage", "junk") as sel:
        with pytest.raises(SelectorProtocolError, match="not exactly one JSON document"):
            sel.select(Query("junk", k=1), CANDS)
        assert sel.select(Query("ok", k=1), CANDS).selected == ("a",)
    assert [e.reason for e in events if isinstance(e, ExecWorkerRestarted)] == ["protocol_error"]


def test_worker_missing_binary_is_a_spawn_error() -> None:
    sel = ExecSelector("w", "/nonexistent/worker", worker=True)
    with pytest.raises(SelectorProcessError, match="cannot start"):
        sel.select(Query("x"), CANDS)
    assert narrow(sel, Query("x"), CANDS).fallback == "error"


def test_concurrent_calls_are_serialised() -> None:
    results: list[tuple[str, ...]] = []
    errors: list[BaseException] = []
    with worker("worker") as sel:

        def call(k: int) -> None:
            try:
                results.append(sel.select(Query(f"q{k}", k=k), CANDS).selected)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call, args=(1 + i % 3,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert sorted(results) == sorted(("a", "b", "c")[: 1 + i % 3] for i in range(12))


def test_unchanged_candidates_are_sent_once_to_a_worker_that_keeps_them() -> None:
    other = [Candidate("x"), Candidate("y")]
    with worker("worker_ref") as sel:
        reasons = [sel.select(Query("q", k=1), cands).reason for cands in (CANDS, CANDS, CANDS, other, other, CANDS)]
        assert reasons == ["full", "ref", "ref", "full", "ref", "full"]
        assert sel.select(Query("q", k=2), other).selected == ("x", "y")


def test_a_search_pool_goes_as_the_acknowledged_catalog_asked_deeper() -> None:
    catalog = [Candidate(f"t{i}") for i in range(100)]
    loaded = {"t0", "t2", "t5"}
    pool = [c for c in catalog if c.id not in loaded]  # what find_tools ranks: the catalog less the loaded
    with worker("worker_ref") as sel:
        assert sel.select(Query("q", k=4), catalog).reason == "full"
        found = sel.select(Query("q", k=4), pool)
        assert found.reason == "ref" and found.selected == ("t1", "t3", "t4", "t6")  # the pool's first 4
        assert sel.select(Query("q", k=0), pool).selected == tuple(c.id for c in pool)  # k 0: all it chose
        # still the catalog's list: the turn after a search is not resent either
        assert sel.select(Query("q", k=2), catalog).reason == "ref"
        # not a small subset of the acknowledged list, in its order, of the same objects: sent in full
        too_many = catalog[: 100 - SUBSET_SLACK - 1]
        reordered = [catalog[1], catalog[0], *catalog[3:]]
        copies = [Candidate(c.id) for c in pool]
        for other in (too_many, reordered, copies):
            assert sel.select(Query("q", k=3), other).reason == "full"
            assert sel.select(Query("q", k=3), catalog).reason == "full"  # acknowledged again


def test_a_conversations_searches_reach_the_worker_as_the_catalogs_ref(tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    firsts = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    seconds = ["india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
    catalog = [Candidate(f"{a}_{b}", description=f"does {a} with {b}") for a in firsts for b in seconds]
    sel = ExecSelector("w", PYTHON, [BEHAVE, "worker_ref"], worker=True, timeout_ms=3000, env=[f"BEHAVE_LOG={log}"])
    with sel:
        session = ToolSession(Shortlist(catalog, selector=sel), k=3, prefetch=2)
        offer = session.offer("do alpha with juliet")
        found = session.search("bravo with kilo")
        session.offer("and charlie with lima")
    assert offer.prefetched and len(found) == 5  # search_k
    assert not {c.id for c in found} & set(offer.prefetched)  # the pool: the catalog less what was loaded
    lines = log.read_text().splitlines()
    assert lines[0].startswith("full 64 k=") and lines[1].startswith("ref 64 k=")  # the pool as the catalog
    assert lines[1] == f"ref 64 k={5 * VARIANT_PAGES + len(offer.prefetched)}"  # a search's depth + the loaded
    assert all(line.startswith("ref 64") for line in lines[1:]), lines  # the search and the next turn


def test_a_pool_whose_answer_was_all_left_out_is_asked_again_as_it_is() -> None:
    catalog = [Candidate(f"t{i}") for i in range(10)]
    with worker("worker_ref_one") as sel:
        assert sel.select(Query("q", k=3), catalog).reason == "full k=3"
        found = sel.select(Query("q", k=3), catalog[2:])  # two left out: asked for 5
        assert (found.selected, found.reason) == (("t2",), "full k=3")  # it chose t0, so it is asked about the pool
        assert sel.select(Query("q", k=3), catalog).reason == "full k=3"  # the pool was acknowledged since
        assert sel.select(Query("q", k=3), catalog[:9]).reason == "ref k=4"  # t9 left out, t0 kept


def test_left_out_of_needs_the_same_objects_in_order() -> None:
    a, b, c = Candidate("a"), Candidate("b"), Candidate("c")
    assert left_out_of((a, b, c), (a, c)) == frozenset({"b"})
    assert left_out_of((a, b, c), (b, c)) == frozenset({"a"})
    assert left_out_of((a, b, c), (a, b)) == frozenset({"c"})
    for other in ((a, b, c), (c, a), (Candidate("a"), c), (), (a, b, c, Candidate("d"))):
        assert left_out_of((a, b, c), other) is None, other


def test_candidates_are_resent_when_the_worker_forgot_them() -> None:
    with worker("worker_forgetful") as sel:
        for _ in range(3):
            selection = sel.select(Query("q", k=2), CANDS)
            assert selection.selected == ("a", "b") and selection.reason == "full"


def test_a_worker_that_does_not_acknowledge_always_gets_the_candidates() -> None:
    with worker("worker") as sel:  # never echoes candidates_ref
        for k in (1, 2, 3, 1):
            assert sel.select(Query("q", k=k), CANDS).selected == ("a", "b", "c")[:k]


def test_worker_env_is_isolated_like_spawn_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORTLIST_TEST_SECRET", "s3cr3t")
    monkeypatch.setenv("GRANTED_FROM_HOST", "host-value")
    sel = ExecSelector("w", PYTHON, [BEHAVE, "worker_env"], worker=True, env=["GRANTED_FROM_HOST", "LIT=1"])
    with sel:
        env = json.loads(sel.select(Query("x"), CANDS).reason)
    assert env["GRANTED_FROM_HOST"] == "host-value" and env["LIT"] == "1"
    assert "SHORTLIST_TEST_SECRET" not in env
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_CTYPE", "GRANTED_FROM_HOST", "LIT"}


@pytest.mark.slow
def test_a_program_that_reads_stdin_to_its_end_is_named_as_maybe_not_a_worker(events: list[Event]) -> None:
    # issue 27, item 30: PromptKit's rerank.py under `worker: true` waits for an EOF a worker never gets
    sel = ExecSelector("rerank", PYTHON, [RERANK], worker=True, timeout_ms=800)
    with sel, pytest.raises(SelectorTimeout, match="may not be a line-protocol worker") as info:
        sel.select(Query("refund my order", k=1), CANDS)
    assert "did not answer a line" in str(info.value) and "worker: true" in str(info.value)
    (hint,) = [e for e in events if isinstance(e, ExecNotAWorker)]
    assert hint.selector == "rerank" and hint.elapsed_ms >= 800
    assert any(isinstance(e, ExecKilled) and e.reason == "timeout" for e in events)


@pytest.mark.slow
def test_a_worker_that_answered_before_then_times_out_gets_no_such_hint(events: list[Event]) -> None:
    with worker("worker_sleep", "slow", timeout_ms=400) as sel:
        sel.select(Query("fast", k=1), CANDS)
        with pytest.raises(SelectorTimeout) as info:
            sel.select(Query("slow please", k=1), CANDS)
    assert "line-protocol" not in str(info.value)
    assert not [e for e in events if isinstance(e, ExecNotAWorker)]
