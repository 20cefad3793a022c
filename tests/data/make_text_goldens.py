"""Record the outputs of shortlist's text analysis into ``text_goldens.json`` (run from the repo root).

Written against the analysers as they were before the single analyser (issue 13.3) and run
once on that code: the JSON is the reference the analyser's presets must reproduce bit for bit
(``tests/test_text_analyser.py``). The keys keep the old tokenisers' names; where one is gone,
the preset that replaced it computes the entry. Re-running it on later code only re-records
what that code does; regenerate deliberately, when a score is meant to move.

    .venv/bin/python tests/data/make_text_goldens.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CORPUS: list[str] = [
    "",
    "   \t\n ",
    "What's the weather like in Paris tomorrow?",
    "get_current_weather",
    "createCalendarEvent HTTPServer.fetchURL v2Api XMLHttpRequest",
    "fs.read-file/v2, OK! snake_case__double  kebab-case-name",
    "The forecasts are running; I can't believe you'd do this to me.",
    "Café naïve résumé Zürich — crème brûlée, São Paulo, İstanbul, straße",
    "日本語のテキスト 東京 2024年 and 中文 北京",
    "Привет, как дела? Москва",
    "numbers 3.14 1,000,000 42nd 0x1F v1.2.3 2024-05-01 10:30am",
    "a an the and or of to in is it be by can do for from get how i me my please tell give want need",
    "emoji 🙂 test ❤️ #hashtag @mention user@example.com https://example.com/path?q=1&r=two",
    "running runs ran runner easily fairly generously connection connected connecting",
    "I'd like to book a flight from NYC to LAX on Friday, please.",
    "searchRecentTweets(query: str, max_results: int = 10) -> list[Tweet]",
    (
        "Long text. Shortlist decides, on every turn of an agent, what enters the model's context. "
        "One core, four deployments: the Python library, the shortlist CLI, the HTTP service and the "
        "exec protocol all call the same functions. The relevance-aware selector scores every reducible "
        "step against the current turn and keeps the best-scoring steps that fit the budget, newest first "
        "among equal scores. Its default scorer is BM25 computed over a per-text cache of stemmed term "
        "counts. Memories are recalled by their terms; documents are chunked, embedded and indexed. "
    )
    * 3,
]

CATALOG: list[dict[str, Any]] = [
    {
        "id": "get_weather",
        "name": "get_weather",
        "description": "Get the current weather forecast for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}},
        "examples": ["what's the weather in Paris", "is it raining in London"],
    },
    {
        "id": "book_flight",
        "name": "bookFlight",
        "description": "Book a flight between two airports on a given date.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "IATA code of the departure airport"},
                "destination": {"type": "string", "description": "IATA code of the arrival airport"},
                "date": {"type": "string", "description": "Departure date"},
            },
        },
        "examples": ["fly from NYC to LAX on Friday"],
    },
    {
        "id": "search_tweets",
        "name": "searchRecentTweets",
        "description": "Search recent tweets matching a query.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
        },
        "examples": [],
    },
    {
        "id": "calendar",
        "name": "createCalendarEvent",
        "description": "Create an event in the user's calendar at a date and time.",
        "parameters": None,
        "examples": ["add a meeting tomorrow at 10", "schedule lunch with Ana"],
    },
    {
        "id": "translate",
        "name": "translate_text",
        "description": "Translate text between languages (Français, Deutsch, 日本語).",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "target": {"type": "string"}}},
        "examples": ["translate 'bonjour' to English"],
    },
    {
        "id": "files",
        "name": "fs.read_file",
        "description": "Read a file from the workspace and return its contents.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "File path"}}},
        "examples": ["show me the README", "open config.yaml"],
    },
]

QUERIES: list[str] = [
    "what's the weather in Paris",
    "book a flight to LAX on Friday",
    "search tweets about the weather",
    "create a calendar event tomorrow",
    "translate this text to Deutsch",
    "read the config file",
    "the of and",
    "",
    "Zürich café 日本語",
    "running forecasts weatherForecast get_current_weather",
]


def _docs() -> list[str]:
    return [f"{c['name']}: {c['description']}" for c in CATALOG] + [CORPUS[6], CORPUS[13], CORPUS[16]]


def _sparse(row: Any) -> dict[str, float]:
    return {str(i): round(float(v), 6) for i, v in enumerate(row) if v != 0}


def tokenisers() -> dict[str, list[list[str]]]:
    """Every tokeniser of the code base, on every corpus string."""
    from shortlist._text import analyser
    from shortlist.rankers import _lexical as lexical
    from shortlist.rankers import _text as rk
    from shortlist.reduction._local import Bm25Scorer

    mem = analyser("corpus")  # was shortlist.memory._text (tokenize, terms, content_words)

    out: dict[str, list[list[str]]] = {}
    out["rankers.split_words"] = [rk.split_words(t) for t in CORPUS]
    for stop in ("en", "en_plus", "none"):
        for stem in (True, False):
            a = rk.Analyzer(stopwords=stop, stem=stem)
            out[f"rankers.Analyzer(stopwords={stop},stem={stem})"] = [a.tokens(t) for t in CORPUS]
    out["memory.tokenize"] = [mem.tokens(t) for t in CORPUS]
    out["memory.tokenize(keep_stopwords)"] = [mem.tokens(t, keep_stopwords=True) for t in CORPUS]
    out["memory.terms"] = [mem.terms(t) for t in CORPUS]
    out["memory.content_words"] = [mem.content_words(t) for t in CORPUS]
    out["reduction.Bm25Scorer.terms"] = [Bm25Scorer().terms(t) for t in CORPUS]
    out["reduction.Bm25Scorer(language=None).terms"] = [Bm25Scorer(language=None).terms(t) for t in CORPUS]
    out["selection.lexical.tokenize"] = [lexical.tokenize(t) for t in CORPUS]
    return out


def bm25_scores() -> dict[str, Any]:
    """Scores of every BM25 path (and the lexical selectors) on a fixed catalog and queries."""
    from shortlist._types import Candidate, Query
    from shortlist.memory._record import Memory
    from shortlist.memory._store import InMemoryStore
    from shortlist.rankers._bm25 import Bm25Ranker
    from shortlist.rankers._lexical import LexicalSelector, TokenOverlapSelector
    from shortlist.reduction._local import Bm25Scorer
    from shortlist.retrieval._backends.embedded import EmbeddedBackend
    from shortlist.retrieval._document import Document

    cands = [Candidate(**c) for c in CATALOG]
    out: dict[str, Any] = {}
    rankers = {
        "Bm25Ranker()": Bm25Ranker(),
        "Bm25Ranker(examples_mode=merge,stopwords=en)": Bm25Ranker(examples_mode="merge", stopwords="en"),
        "Bm25Ranker(stem=False,stopwords=none,normalize)": Bm25Ranker(stem=False, stopwords="none", normalize=True),
    }
    for name, r in rankers.items():
        out[f"rankers.{name}"] = [[float(x) for x in r.score(Query(text=q or " "), cands)] for q in QUERIES if q]
    docs = _docs()
    out["reduction.Bm25Scorer"] = [Bm25Scorer()(q, docs) for q in QUERIES]
    out["reduction.Bm25Scorer.score_parts"] = [
        Bm25Scorer().score_parts(q, [[d, docs[-1 - i]] for i, d in enumerate(docs)]) for q in QUERIES
    ]
    backend = EmbeddedBackend()
    backend.upsert([Document(id=f"d{i}", title=f"doc {i}", text=d) for i, d in enumerate(docs)])
    rows = []
    for q in QUERIES:
        hits = backend.query(q, k=20, use_embedder=False)
        rows.append([[h.chunk.document_id, h.lexical] for h in hits])
    out["retrieval.EmbeddedBackend.lexical"] = rows
    lex, overlap = LexicalSelector(), TokenOverlapSelector()
    for name, sel in (("LexicalSelector", lex), ("TokenOverlapSelector", overlap)):
        res = []
        for q in QUERIES:
            if not q:
                continue
            s = sel.select(Query(text=q), cands)
            res.append([list(s.selected), [float(x) for x in (s.scores or ())]])
        out[f"selection.{name}"] = res
    store = InMemoryStore()
    scope = {"user_id": "u1"}
    for i, d in enumerate(docs):
        store.save(Memory(type="fact", id=f"m{i}", scope=scope, content=d))
    out["memory.InMemoryStore.retrieve"] = [[m.id for m in store.retrieve(scope, q, limit=20)] for q in QUERIES]
    return out


def embeddings() -> dict[str, Any]:
    """The hashing embedders' vectors (sparse, rounded) on the corpus."""
    from shortlist.retrieval._hash_embedder import HashingEmbedder
    from shortlist.testing import HashEmbedder

    out: dict[str, Any] = {}
    for dim in (64, 384):
        h = HashingEmbedder(dim)
        out[f"retrieval.HashingEmbedder({dim}).embed_batch"] = [_sparse(r) for r in h.embed_batch(CORPUS)]
        out[f"retrieval.HashingEmbedder({dim}).embed"] = [_sparse(r) for r in h.embed(CORPUS)]
    for dim in (2, 64, 256):
        t = HashEmbedder(dim)
        out[f"testing.HashEmbedder({dim}).embed_batch"] = [_sparse(r) for r in t.embed_batch(CORPUS)]
        out[f"testing.HashEmbedder({dim}).embed"] = [_sparse(r) for r in t.embed(CORPUS)]
    return out


def record() -> dict[str, Any]:
    """Everything the goldens hold."""
    return {
        "corpus": CORPUS,
        "queries": QUERIES,
        "tokenisers": tokenisers(),
        "bm25": bm25_scores(),
        "embeddings": embeddings(),
    }


if __name__ == "__main__":
    path = Path(__file__).with_name("text_goldens.json")
    path.write_text(json.dumps(record(), ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {path}\n")
