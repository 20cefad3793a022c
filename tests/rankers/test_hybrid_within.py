"""Most of an indexed catalog is ranked among that catalog, the rest masked out: no index is built
for it (a ``find_tools`` search's pool, the catalog less what the model can call, took a second at
10,000 tools when it was indexed alone), and it ranks as the list alone would."""

from __future__ import annotations

import numpy as np

from shortlist._events import Event, event_hooks
from shortlist._types import Candidate, Query
from shortlist.rankers._hybrid import HybridRanker
from shortlist.rankers._scale import ToolsNamed
from shortlist.testing import HashEmbedder

CATALOG = (
    Candidate("create_document", "create_document", "Create a new Word document.", metadata={"server": "word"}),
    Candidate("add_paragraph", "add_paragraph", "Add a paragraph to a document.", metadata={"server": "word"}),
    Candidate("add_picture", "add_picture", "Insert an image into a document.", metadata={"server": "word"}),
    Candidate("paint", "paint", "Draw a picture image on a canvas.", metadata={"server": "art"}),
    Candidate("sketch", "sketch", "Sketch an image with a pencil.", metadata={"server": "art"}),
    Candidate("get_weather", "get_weather", "Current weather for a city.", metadata={"server": "sky"}),
    Candidate("forecast", "forecast", "Weather forecast for the next days.", metadata={"server": "sky"}),
    Candidate("send_message", "send_message", "Send a message to a contact.", metadata={"server": "chat"}),
    Candidate("read_inbox", "read_inbox", "Read the messages of the inbox.", metadata={"server": "chat"}),
    Candidate("cat", "cat", "Display the contents of a file.", metadata={"server": "fs"}),
)


def without(*ids: str) -> tuple[Candidate, ...]:
    return tuple(c for c in CATALOG if c.id not in ids)


def indexes(ranker: HybridRanker) -> tuple[int, int, int]:
    """How many candidate lists each side has indexed (dense, BM25, the scale levers' structure)."""
    return (
        len(ranker.dense._catalogs.entries),
        len(ranker.bm25._entries.entries),
        len(ranker._structures._entries.entries),
    )


def test_most_of_an_indexed_catalog_builds_no_index_and_ranks_only_itself() -> None:
    ranker = HybridRanker(embedder=HashEmbedder())
    ranker.warm(CATALOG)
    assert indexes(ranker) == (1, 1, 1)
    pool = without("create_document", "paint")
    got = ranker.select(Query("create a word document and insert an image", k=5), pool)
    assert indexes(ranker) == (1, 1, 1)  # scored on the catalog's indexes
    assert got.selected and set(got.selected) <= {c.id for c in pool}
    assert len(ranker.score(Query("an image"), pool)) == len(pool)


def test_it_ranks_as_the_list_indexed_alone() -> None:
    """Without BM25 (whose term weights stay the catalog's) the scores are the list's own, exactly:
    the tools left out lend their server no evidence."""
    pool = without("create_document", "sketch")
    query = Query("create a word document and insert an image", k=8)
    among = HybridRanker(embedder=HashEmbedder(), bm25_weight=0.0, server_top=2)
    among.warm(CATALOG)
    alone = HybridRanker(embedder=HashEmbedder(), bm25_weight=0.0, server_top=2)
    np.testing.assert_array_equal(among.score(query, pool), alone.score(query, pool))
    assert among.select(query, pool).selected == alone.select(query, pool).selected
    assert len(alone.dense._catalogs.entries) == 1 and len(among.dense._catalogs.entries) == 1
    with_bm25 = HybridRanker(embedder=HashEmbedder())
    with_bm25.warm(CATALOG)
    assert with_bm25.select(query, pool).selected == HybridRanker(embedder=HashEmbedder()).select(query, pool).selected


def test_a_named_tool_left_out_is_not_ranked_first() -> None:
    ranker = HybridRanker(embedder=HashEmbedder())
    ranker.warm(CATALOG)
    heard: list[Event] = []
    with event_hooks(heard.append):
        got = ranker.select(Query("call get_weather for Oslo", k=3), without("get_weather"))
    assert "get_weather" not in got.selected
    assert not [e for e in heard if isinstance(e, ToolsNamed)]
    named = ranker.select(Query("call get_weather for Oslo", k=3), without("forecast"))
    assert named.selected[0] == "get_weather"  # a tool the list holds still is


def test_abstention_judges_the_list_alone() -> None:
    query = Query("weather forecast for the next days", k=3)
    probe = HybridRanker(embedder=HashEmbedder())
    best_all = float(probe.score_with_confidence(query, CATALOG)[1].max())
    best_rest = float(probe.score_with_confidence(query, without("forecast", "get_weather"))[1].max())
    assert best_rest < best_all
    ranker = HybridRanker(embedder=HashEmbedder(), min_score=(best_all + best_rest) / 2)
    ranker.warm(CATALOG)
    assert not ranker.select(query, CATALOG).abstained
    assert ranker.select(query, without("forecast", "get_weather")).abstained


def test_a_small_part_or_another_order_is_indexed_alone() -> None:
    ranker = HybridRanker(embedder=HashEmbedder())
    ranker.warm(CATALOG)
    few = CATALOG[:3]
    assert ranker.dense.indexed_superset(few) is None  # under half of the catalog
    ranker.select(Query("a document", k=2), few)
    assert indexes(ranker)[0] == 2
    reordered = tuple(reversed(CATALOG[1:]))
    assert ranker.dense.indexed_superset(reordered) is None
    changed = (Candidate("cat", "cat", "Print a file."), *CATALOG[1:9])  # same id, another tool
    assert ranker.dense.indexed_superset(changed) is None
    full, positions = ranker.dense.indexed_superset(CATALOG[2:]) or ((), np.zeros(0))
    assert full == CATALOG and positions.tolist() == list(range(2, len(CATALOG)))
    assert ranker.dense.indexed_superset(CATALOG) is None  # indexed itself


def test_named_tools_rank_first_over_masked_scores() -> None:
    from shortlist.rankers._fusion import rank_named_first

    out, named = rank_named_first(np.array([1.0, -np.inf, 0.5]), {2: 1})
    assert named == (2,) and np.isfinite(out[2]) and out[2] > out[0] and out[1] == -np.inf


def test_bm25_and_embedding_rankers_score_most_of_their_catalog_among_it() -> None:
    from shortlist.rankers._bm25 import Bm25Ranker
    from shortlist.rankers._embedding import EmbeddingRanker

    query = Query("weather forecast for a city", k=3)
    pool = without("get_weather", "cat")
    positions = [i for i, c in enumerate(CATALOG) if c in pool]
    bm25 = Bm25Ranker()
    full = bm25.score(query, CATALOG)
    builds = bm25.index_builds
    np.testing.assert_array_equal(bm25.score(query, pool), full[positions])
    assert bm25.index_builds == builds  # nothing indexed for the pool
    assert set(bm25.select(query, pool).selected) <= {c.id for c in pool}
    dense = EmbeddingRanker(embedder=HashEmbedder())
    cosines = dense.score(query, CATALOG)
    np.testing.assert_array_equal(dense.score(query, pool), cosines[positions])  # a cosine is its own
    assert len(dense._catalogs.entries) == 1
    few = CATALOG[:2]  # a small part is indexed alone
    bm25.score(query, few)
    assert bm25.index_builds == builds + 1
