"""The Selector contract, one suite for every selector that runs offline: each built-in type (the
embedding-based ones on the hashing embedder, rerank against a local scoring transport, the LLM judge
on a scripted model), an exec selector (a real ``shortlist exec-selector`` process) and a
:class:`FunctionSelector`. A new selector joins by adding a case to ``SELECTORS``.

What every selector owes the core (``narrowing.py`` owns everything else): ids drawn from the
candidates, each at most once, the clear match first, ``aselect`` answering as ``select`` does,
safe concurrent use, ``init`` (once) accepting the shared embedder, and an idempotent ``close``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from shortlist._types import Candidate, Query, Selection
from shortlist.rankers._registry import BUILTIN_SELECTORS, create_builtin_selector
from shortlist.selection._base import FunctionSelector, Selector, SelectorContext
from shortlist.testing import HashEmbedder, ScriptedModel

CATALOG = [
    Candidate("send_email", "send_email", "send an email message to a recipient"),
    Candidate("get_weather", "get_weather", "get the weather forecast for a city"),
    Candidate("create_invoice", "create_invoice", "create an invoice for a customer"),
    Candidate("book_flight", "book_flight", "book a flight ticket to a destination"),
    Candidate("translate", "translate_text", "translate text into another language"),
]
QUERIES = {
    "send an email message to bob": "send_email",
    "weather forecast for Paris": "get_weather",
    "book a flight ticket to Rome": "book_flight",
}
WORD = re.compile(r"[a-z]+")


def _overlap(query: str, text: str) -> int:
    return len(set(WORD.findall(query.lower())) & set(WORD.findall(text.lower())))


def _rerank_transport() -> httpx.MockTransport:
    """A local rerank service: scores each document by the words it shares with the query."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        scores = [_overlap(body["query"], d) for d in body["documents"]]
        return httpx.Response(200, json={"results": [{"index": i, "score": float(s)} for i, s in enumerate(scores)]})

    return httpx.MockTransport(answer)


def _by_overlap(query: Query, candidates: Sequence[Candidate]) -> Selection:
    ranked = sorted(candidates, key=lambda c: -_overlap(query.text, f"{c.name} {c.description}"))
    return Selection(tuple(c.id for c in ranked[: query.k or 10]))


EXEC = f"exec:{sys.executable} -m shortlist.cli exec-selector --selector bm25"

Factory = Callable[[], Selector]
FACTORIES: dict[str, Factory] = {
    "overlap": lambda: create_builtin_selector("overlap"),
    "lexical": lambda: create_builtin_selector("lexical"),
    "bm25": lambda: create_builtin_selector("bm25"),
    "embedding": lambda: create_builtin_selector("embedding", embedder=HashEmbedder(dim=256)),
    "hybrid": lambda: create_builtin_selector("hybrid", embedder=HashEmbedder(dim=256)),
    "rerank": lambda: create_builtin_selector(
        "rerank", url="http://rerank.invalid/rerank", first_stage="bm25", transport=_rerank_transport()
    ),
    "llm": lambda: create_builtin_selector("llm", model=ScriptedModel("1"), first_stage="bm25"),
    "exec": lambda: create_builtin_selector(EXEC, name="exec-bm25", timeout_ms=30_000),
    "function": lambda: FunctionSelector(_by_overlap, name="function"),
}
SELECTORS = [pytest.param(name, marks=pytest.mark.slow) if name == "exec" else name for name in FACTORIES]


def test_every_built_in_type_is_in_the_suite() -> None:
    assert set(BUILTIN_SELECTORS) <= set(FACTORIES)


@pytest.fixture(params=SELECTORS)
def selector(request: pytest.FixtureRequest) -> Iterator[Selector]:
    sel = FACTORIES[request.param]()
    sel.init(SelectorContext(embeddings=HashEmbedder(dim=256)))  # once, as the registry does; overrides its own
    yield sel
    sel.close()


@pytest.mark.parametrize(("text", "expected"), list(QUERIES.items()))
def test_the_clear_match_comes_first_and_ids_are_candidates_once(selector: Selector, text: str, expected: str) -> None:
    got = selector.select(Query(text, k=3), CATALOG)
    assert isinstance(got, Selection)
    assert got.selected[0] == expected
    assert set(got.selected) <= {c.id for c in CATALOG}
    assert len(set(got.selected)) == len(got.selected)


def test_aselect_answers_as_select(selector: Selector) -> None:
    query = Query("create an invoice for ACME", k=2)
    sync = selector.select(query, CATALOG)
    asynchronous = asyncio.run(selector.aselect(query, CATALOG))
    assert asynchronous.selected == sync.selected


def test_concurrent_calls_each_get_their_own_answer(selector: Selector) -> None:
    texts = list(QUERIES) * 3
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda t: selector.select(Query(t, k=2), CATALOG).selected[0], texts))
    assert answers == [QUERIES[t] for t in texts]


def test_candidates_are_judged_by_content_not_position(selector: Selector) -> None:
    reversed_catalog = list(reversed(CATALOG))
    got = selector.select(Query("translate text into another language", k=2), reversed_catalog)
    assert got.selected[0] == "translate"


def test_close_is_idempotent(selector: Selector) -> None:
    assert selector.select(Query("weather forecast for Paris", k=1), CATALOG).selected[0] == "get_weather"
    selector.close()
    selector.close()
