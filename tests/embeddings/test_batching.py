"""Natural batching of concurrent single-text embeddings: same vectors, no hangs, free at low load."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from shortlist.embeddings._batching import Coalescer
from shortlist.embeddings._default import DefaultEmbedder
from shortlist.errors import EmbeddingError

# Short queries of 5-12 tokens (same and neighbouring lengths batch together), plus
# longer ones and extremes that must run in batches of their own length.
TEXTS = [
    *(
        f"{verb} the {noun} number {n}"
        for n, (verb, noun) in enumerate(
            (v, o) for v in ("get", "send", "delete", "export") for o in ("invoice", "calendar event", "pull request")
        )
    ),
    "send an email to the finance team",
    "what's the weather in Paris tomorrow",
    "book a flight to Rome next week",
    "Can you arrange safe and efficient transportation to ancient Rome, allowing me to immerse myself "
    "in the historical setting, while also providing comprehensive education on their governmental structures?",
    "I need a recipe for a vegan lasagna that my kids will like, without mushrooms",
    "",
    "x",
    "word " * 400,  # truncated to max_length tokens
]


def _in_threads(n: int, fn: Callable[[int], object]) -> list[object]:
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(fn, range(n)))


# -- the coalescer on its own -------------------------------------------------------------------


class _Recorder:
    """A batched function that doubles numbers, slowly, and records its batches."""

    def __init__(self, delay: float = 0.02, fail_on: int | None = None) -> None:
        self.delay = delay
        self.fail_on = fail_on
        self.batches: list[list[int]] = []
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def __call__(self, items: Sequence[int]) -> list[int]:
        with self._lock:
            self.batches.append(list(items))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            time.sleep(self.delay)
            if self.fail_on is not None and self.fail_on in items:
                raise RuntimeError(f"poisoned by {self.fail_on}")
            return [2 * i for i in items]
        finally:
            with self._lock:
                self.running -= 1


def test_a_lone_caller_runs_at_once_and_alone() -> None:
    rec = _Recorder(delay=0)
    c = Coalescer(rec, max_batch=8)
    assert [c.submit(i) for i in range(20)] == [2 * i for i in range(20)]
    assert rec.batches == [[i] for i in range(20)]
    assert (c.runs, c.items, c.largest) == (20, 20, 1)


def test_concurrent_callers_share_runs_within_the_limits() -> None:
    rec = _Recorder(delay=0.02)
    c = Coalescer(rec, max_batch=5, max_running=2)
    assert _in_threads(24, c.submit) == [2 * i for i in range(24)]
    assert sorted(i for b in rec.batches for i in b) == list(range(24))  # every item exactly once
    assert 1 < c.largest <= 5
    assert c.runs < 24
    assert rec.most_running <= 2


def test_incompatible_items_never_share_a_run() -> None:
    rec = _Recorder(delay=0.01)
    c = Coalescer(rec, max_batch=16, compatible=lambda a, b: a % 2 == b % 2)
    assert _in_threads(30, c.submit) == [2 * i for i in range(30)]
    assert all(len({i % 2 for i in b}) == 1 for b in rec.batches)
    assert c.largest > 1


def test_a_failed_run_reaches_every_caller_of_its_batch_and_nobody_hangs() -> None:
    rec = _Recorder(delay=0.02, fail_on=7)
    c = Coalescer(rec, max_batch=32, max_running=1)
    outcomes: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            outcomes[i] = c.submit(i)
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    poisoned = next(b for b in rec.batches if 7 in b)
    for i in range(16):
        if i in poisoned:
            err = outcomes[i]
            assert isinstance(err, Exception) and "poisoned by 7" in str(err)
            if i != poisoned[0]:  # the leader re-raises the original; the others get an EmbeddingError
                assert isinstance(err, EmbeddingError) and isinstance(err.__cause__, RuntimeError)
        else:
            assert outcomes[i] == 2 * i
    assert c.submit(3) == 6  # the coalescer still works


def test_a_wrong_number_of_results_is_an_error_for_everyone() -> None:
    gate = threading.Event()

    def run(items: Sequence[int]) -> list[int]:
        gate.wait(5)
        return [0]  # one result whatever the batch: wrong as soon as two items share a run

    c: Coalescer[int, int] = Coalescer(run, max_batch=8)
    outcomes = _start_then_release(c, 4, gate)
    assert outcomes[0] == 0  # the first ran alone
    for i in (1, 2, 3):  # the three that queued behind it shared one run
        err = outcomes[i]
        assert isinstance(err, EmbeddingError) and "3 items gave 1 results" in str(err)


def _start_then_release(c: Coalescer[int, int], n: int, gate: threading.Event) -> dict[int, object]:
    """Submit 0, then 1..n-1 while 0 holds the only run slot, then open ``gate``."""
    outcomes: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            outcomes[i] = c.submit(i)
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    threads[0].start()
    time.sleep(0.05)
    for t in threads[1:]:
        t.start()
    time.sleep(0.1)
    gate.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_an_interrupted_waiter_does_not_block_the_queue() -> None:
    rec = _Recorder(delay=0.05)
    c = Coalescer(rec, max_batch=1, max_running=1)

    class _Interrupting(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            if threading.current_thread().name == "victim":
                raise KeyboardInterrupt
            return super().wait(timeout)

    c._cond = _Interrupting(threading.Lock())
    results: dict[str, object] = {}

    def call(name: str, item: int) -> None:
        try:
            results[name] = c.submit(item)
        except BaseException as exc:
            results[name] = exc

    first = threading.Thread(target=call, args=("first", 1))
    first.start()
    time.sleep(0.01)  # "first" holds the only run slot
    victim = threading.Thread(target=call, args=("victim", 2), name="victim")
    victim.start()
    victim.join(5)
    later = threading.Thread(target=call, args=("later", 3))
    later.start()
    for t in (first, later):
        t.join(5)
    assert isinstance(results["victim"], KeyboardInterrupt)
    assert results["first"] == 2 and results["later"] == 6


def test_bad_coalescer_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        Coalescer(lambda items: list(items), max_batch=0)
    with pytest.raises(ValueError):
        Coalescer(lambda items: list(items), max_running=0)


# -- the default model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alone() -> DefaultEmbedder:
    """Every single text runs alone: the reference vectors."""
    return DefaultEmbedder(query_cache_size=0, query_batch_size=1)


@pytest.fixture(scope="module")
def batched() -> DefaultEmbedder:
    """One run in flight at a time: concurrent texts must share runs."""
    return DefaultEmbedder(query_cache_size=0, query_concurrency=1)


def test_batching_is_off_with_batch_size_one(alone: DefaultEmbedder) -> None:
    assert alone._coalescer is None
    with pytest.raises(ValueError):
        DefaultEmbedder(query_batch_size=0)
    with pytest.raises(ValueError):
        DefaultEmbedder(query_concurrency=0)
    assert DefaultEmbedder().query_concurrency >= 1


@pytest.mark.slow  # many concurrent model runs: 1.5-2.3 s of CPU, over the fast loop's 2 s on a loaded machine
def test_concurrent_queries_get_bit_identical_vectors(alone: DefaultEmbedder, batched: DefaultEmbedder) -> None:
    # The weights are dequantised to float32 at load (no activation quantisation) and the
    # float kernels compute each row alone; padding adds exact zeros. So a vector does not
    # depend on its batch-mates at all: compared bit for bit, not within a tolerance.
    reference = {t: alone.embed([t])[0] for t in TEXTS}
    work = TEXTS * 6

    def one(i: int) -> np.ndarray:
        vec: np.ndarray = batched.embed([work[i]])[0]
        return vec

    assert batched._coalescer is not None
    before = batched._coalescer.items
    got = _in_pool(16, len(work), one)
    c = batched._coalescer
    assert c is not None
    assert c.largest > 1  # batches did form
    assert c.items - before == len(work)
    for text, vec in zip(work, got, strict=True):
        assert np.array_equal(vec, reference[text]), text[:40]


def _in_pool(threads: int, n: int, fn: Callable[[int], np.ndarray]) -> list[np.ndarray]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, range(n)))


def test_sequential_queries_run_alone(alone: DefaultEmbedder) -> None:
    emb = DefaultEmbedder(query_cache_size=0)
    emb.load()
    for t in TEXTS[:8]:
        assert np.array_equal(emb.embed([t])[0], alone.embed([t])[0])
    c = emb._coalescer
    assert c is not None and (c.runs, c.items, c.largest) == (8, 8, 1)


def test_query_cache_still_answers_before_the_coalescer() -> None:
    emb = DefaultEmbedder(query_cache_size=8)
    first = emb.embed(["book a table for two"])
    runs = emb._coalescer.runs if emb._coalescer else 0
    np.testing.assert_array_equal(emb.embed(["book a table for two"]), first)
    assert emb._coalescer is not None and emb._coalescer.runs == runs


def test_a_failing_model_run_reaches_every_waiting_caller() -> None:
    # A token id far outside the vocabulary makes the real model's Gather fail. While a long
    # text holds the only run slot, the bad row and seven good rows of the same length
    # queue up and share the next run: all eight must get an error, none may hang, and the
    # next run must work.
    emb = DefaultEmbedder(query_cache_size=0, query_concurrency=1)
    c = emb._coalescer
    assert c is not None
    batches: list[int] = []
    run = c._run
    release = threading.Event()

    def recording(rows: Sequence[np.ndarray]) -> Sequence[np.ndarray]:
        batches.append(len(rows))
        if len(batches) == 1:
            release.wait(30)  # the long text holds the run slot until the others have queued
        return run(rows)

    c._run = recording
    good = emb._token_ids("send the invoice number 3")
    bad = good.copy()
    bad[1] = 10**9
    long = emb._token_ids("word " * 400)
    outcomes: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            outcomes[i] = c.submit(long if i == 0 else bad if i == 1 else good)
        except Exception as exc:
            outcomes[i] = exc

    def queued(n: int) -> None:
        for _ in range(3000):
            with c._cond:
                if len(c._queue) == n:
                    return
            time.sleep(0.001)
        raise AssertionError(f"{n} callers never queued")

    threads = [threading.Thread(target=call, args=(i,)) for i in range(9)]
    threads[0].start()
    while not batches:  # the long text's run has started
        time.sleep(0.001)
    threads[1].start()
    queued(1)  # the bad row is the oldest waiting caller, so it leads the next run
    for t in threads[2:]:
        t.start()
    queued(8)
    release.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert batches == [1, 8]
    assert isinstance(outcomes[0], np.ndarray)
    assert all(isinstance(outcomes[i], Exception) for i in range(1, 9))
    assert all(isinstance(outcomes[i], EmbeddingError) for i in range(2, 9))
    reference = emb._run_ids([good])[0]
    assert np.array_equal(c.submit(good), reference)


def test_a_model_failure_is_an_embedding_error_on_the_public_path() -> None:
    class _OutOfVocabulary(DefaultEmbedder):
        def _token_ids(self, text: str, precision: str = "float32") -> np.ndarray:
            return np.asarray([101, 10**9, 102], dtype=np.int64)

    with pytest.raises(EmbeddingError):
        _OutOfVocabulary(query_cache_size=0).embed(["anything"])
    for texts in (["anything"], ["a whole", "and a part"]):  # the int8 query path, alone and split
        with pytest.raises(EmbeddingError):
            _OutOfVocabulary(query_cache_size=0).embed_queries(texts)
