"""RecentIndexes: found without waiting for a build, built once, most recent first, the list like it handed over."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from shortlist._types import Candidate, Query
from shortlist.rankers._bm25 import Bm25Ranker
from shortlist.rankers._recent import RecentIndexes


@dataclass(frozen=True)
class Entry:
    candidates: tuple[Candidate, ...]
    like: Entry | None = None


def cands(*ids: str) -> tuple[Candidate, ...]:
    return tuple(Candidate(i, description=f"does {i}") for i in ids)


def test_a_kept_list_is_found_while_another_is_being_built() -> None:
    recent: RecentIndexes[Entry] = RecentIndexes(4)
    kept = cands("a", "b")
    recent.get(kept, lambda like: Entry(kept))
    started, release = threading.Event(), threading.Event()

    def slow(like: Entry | None) -> Entry:
        started.set()
        assert release.wait(10)
        return Entry(other)

    other = cands("c")
    builder = threading.Thread(target=recent.get, args=(other, slow))
    builder.start()
    assert started.wait(10)
    found = []
    reader = threading.Thread(target=lambda: found.append(recent.get(kept, lambda like: Entry(kept))))
    reader.start()
    reader.join(5)
    assert not reader.is_alive() and found[0].candidates is kept  # not held up by the build
    release.set()
    builder.join(10)
    assert [e.candidates for e in recent.entries] == [other, kept]


def test_a_new_list_is_built_once_by_concurrent_callers() -> None:
    recent: RecentIndexes[Entry] = RecentIndexes(4)
    target = cands("x", "y")
    builds: list[int] = []
    gate = threading.Barrier(4)

    def build(like: Entry | None) -> Entry:
        builds.append(1)
        return Entry(target)

    def call() -> None:
        gate.wait(10)
        recent.get(target, build)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(builds) == 1


def test_order_slots_equality_and_the_list_like_it() -> None:
    recent: RecentIndexes[Entry] = RecentIndexes(2)
    first, second = cands("a"), cands("b")
    recent.get(first, lambda like: Entry(first))
    recent.get(second, lambda like: Entry(second))
    assert recent.find(cands("a")) is not None  # equal, not identical: found
    assert recent.entries[0].candidates is first  # and moved first
    with_examples = (first[0].with_examples(["an example"]),)
    built = recent.get(with_examples, lambda like: Entry(with_examples, like))
    assert built.like is not None and built.like.candidates is first  # the same list but for its examples
    assert len(recent.entries) == 2 and recent.find(second) is None  # the least recently used left
    assert recent.find(first, accept=lambda e: False) is None
    recent.clear()
    assert len(recent.entries) == 0


def test_bm25_scores_while_another_catalog_is_indexed() -> None:
    """A BM25 ranker answers for an indexed catalog while it indexes another on a second thread."""
    ranker = Bm25Ranker()
    small = cands("get_weather", "send_mail")
    ranker.score(Query("weather"), small)
    entered, release = threading.Event(), threading.Event()
    original = ranker._build

    def slow_build(candidates: tuple[Candidate, ...], main_of: object = None) -> object:
        entered.set()
        assert release.wait(10)
        return original(candidates, main_of)  # type: ignore[arg-type]

    ranker._build = slow_build  # type: ignore[assignment,method-assign]
    big = cands(*(f"tool_{i}" for i in range(50)))
    t = threading.Thread(target=ranker.score, args=(Query("tool"), big))
    t.start()
    assert entered.wait(10)
    done = []
    reader = threading.Thread(target=lambda: done.append(ranker.score(Query("weather"), small)))
    reader.start()
    reader.join(5)
    assert not reader.is_alive() and done[0][0] > 0
    release.set()
    t.join(10)


def test_a_superset_answer_is_kept_for_its_list_until_the_entries_change() -> None:
    # A search hands one pool to several rankers and parts: the walk over the catalog is made once.
    recent: RecentIndexes[Entry] = RecentIndexes(4)
    catalog = cands("a", "b", "c", "d")
    recent.get(catalog, lambda like: Entry(catalog))
    pool = catalog[1:]
    first = recent.superset(pool)
    assert first is not None and first[0].candidates is catalog and list(first[1]) == [1, 2, 3]
    assert recent.superset(pool) is first  # the same answer, not a second walk
    assert not first[1].flags.writeable  # handed out again: nobody may change it
    assert recent.superset(pool, least=0.9) is None  # another question, answered anew
    assert recent.superset(catalog[2:]) is not first  # another list
    recent.get(pool, lambda like: Entry(pool))  # the pool is indexed itself now: no superset
    assert recent.superset(pool) is None
    recent.clear()
    assert recent.superset(pool) is None
