"""A query on a PostgreSQL corpus: the lexical and dense legs' SQL, and their rows fused into hits.

Lexical: for each query term (the ``corpus`` analyser's, hashed to term ids), its ``per_term`` best
postings (by impact; all of a rare term's) are the candidates, partially scored; the best
``rescore`` are rescored exactly, with every query term's posting of each, by Lucene's BM25
(``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, the current ``N`` and ``avgdl``): exactly bm25s'
ranking whenever no query term has more postings than ``per_term``; above it the candidates are an
approximation (measured against exact BM25 in docs/postgres.md). Dense: the exact inner product
(``"exact"``, no index) or a walk of the HNSW graph, one statement per shard. Both legs return
their best ``PREFETCH`` rows, fused by RRF with the embedded backend's tie rules, so rankings agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from shortlist.embeddings._base import Vectors
from shortlist.retrieval._backends._pg_graph import hnsw_order, shard_predicate
from shortlist.retrieval._backends.base import Hit, rrf
from shortlist.retrieval._document import Chunk

__all__ = ["fuse", "query_statements"]

#: The passage columns both legs return (a Chunk's fields, in order).
_FIELDS = (
    "c.chunk_id, c.document_id, c.title, c.text, c.position, c.count, c.char_start, c.char_end, c.metadata, c.doc_hash"
)


def _vector_literal(v: Vectors) -> str:
    """A query vector as pgvector's text literal."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(v, dtype=np.float32).reshape(-1)) + "]"


def _filter_sql(filters: Mapping[str, Any] | None, alias: str) -> tuple[str, list[Any]]:
    if not filters:
        return "", []
    from psycopg.types.json import Jsonb  # the backend module imports psycopg (or names its extra)

    sql: list[str] = []
    params: list[Any] = []
    for key, want in filters.items():
        if isinstance(want, list | tuple | set | frozenset):
            sql.append(f"{alias}.metadata -> %s = ANY(%s::jsonb[])")
            params += [str(key), [Jsonb(v) for v in want]]
        else:
            sql.append(f"{alias}.metadata -> %s = %s::jsonb")
            params += [str(key), Jsonb(want)]
    return " AND " + " AND ".join(sql), params


def _filter_params(filters: Mapping[str, Any] | None, prefix: str) -> tuple[str, dict[str, Any]]:
    """The metadata filters as an ``AND …`` clause on ``c`` with named parameters (``prefix`` keeps the
    legs' names apart)."""
    where, params = _filter_sql(filters, "c")
    named: dict[str, Any] = {}
    for i, value in enumerate(params):
        where = where.replace("%s", f"%({prefix}{i})s", 1)
        named[f"{prefix}{i}"] = value
    return where, named


def _lexical_sql(chunks_t: str, postings_t: str, terms_t: str, lex_where: str, dense: bool) -> str:
    """The lexical leg: one statement returning (row, BM25 score, similarity or NULL, the passage's fields).

    ``lex_where``: the filters' clause (:func:`_filter_params`); ``dense``: the query has a vector
    ``%(v)s``, whose inner product each row returns too."""
    join = f" JOIN {chunks_t} c ON c.row = p.row" if lex_where else ""
    cos_col = "-(c.embedding <#> %(v)s::vector)" if dense else "NULL::float8"
    return (
        "WITH m AS (SELECT GREATEST(chunks, 1)::float8 AS n, (tokens::float8 / GREATEST(chunks, 1)) AS avgdl"
        " FROM shortlist_index_corpora WHERE corpus = %(corpus)s),"
        " q AS (SELECT t.term, ln(1 + (m.n - t.df + 0.5) / (t.df + 0.5)) AS idf"
        f" FROM {terms_t} t, m WHERE t.term = ANY(%(terms)s) AND t.df > 0),"
        # candidates: each term's best postings (all of them for a rare term), partially scored
        " lexcand AS (SELECT s.row FROM (SELECT x.row, SUM(x.idf * x.tf / (x.tf + %(k1)s * (1 - %(b)s"
        " + %(b)s * x.dl / GREATEST(m.avgdl, 1e-9)))) AS score FROM m, (SELECT q.idf, p.row, p.tf, p.dl FROM q"
        f" CROSS JOIN LATERAL (SELECT p.row, p.tf, p.dl FROM {postings_t} p{join} WHERE p.term = q.term"
        f"{lex_where} ORDER BY p.impact DESC LIMIT %(per_term)s) p) x GROUP BY x.row) s"
        " ORDER BY s.score DESC, s.row LIMIT %(rescore)s),"
        # the best candidates rescored exactly, every query term's posting of each (OFFSET 0 keeps
        # the planner from flattening the probe into a scan of every posting of the query's terms)
        " lex AS (SELECT p.row, SUM(q.idf * p.tf / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.dl"
        " / GREATEST(m.avgdl, 1e-9)))) AS score FROM lexcand CROSS JOIN LATERAL"
        f" (SELECT p.row, p.term, p.tf, p.dl FROM {postings_t} p"
        " WHERE p.row = lexcand.row AND p.term = ANY(%(terms)s) OFFSET 0) p"
        " JOIN q ON q.term = p.term CROSS JOIN m GROUP BY p.row"
        " HAVING SUM(q.idf) > 0 ORDER BY score DESC, p.row LIMIT %(n)s)"
        f" SELECT c.row, lex.score, {cos_col}, {_FIELDS} FROM lex JOIN {chunks_t} c ON c.row = lex.row"
    )


def _dense_sqls(chunks_t: str, den_where: str, order: str, shards: int) -> list[str]:
    """The dense leg: one statement per shard (each repeats its partial index's predicate), each
    returning (row, NULL, float32 similarity, the passage's fields) ordered by ``order``."""
    where = ["true"]
    if shards > 1:
        where = [shard_predicate("c.row", s, shards, placeholders=True) for s in range(shards)]
    # the similarity returned is the float32 one (the HNSW walk may rank by half precision)
    return [
        f"SELECT c.row, NULL::float8, -(c.embedding <#> %(v)s::vector), {_FIELDS} FROM {chunks_t} c"
        f" WHERE {w}{den_where} ORDER BY {order} LIMIT %(n)s"
        for w in where
    ]


def query_statements(
    tables: tuple[str, str, str],
    *,
    corpus: str,
    qterms: Sequence[int],
    qv: Vectors | None,
    filters: Mapping[str, Any] | None,
    n: int,
    k1: float,
    b: float,
    per_term: int,
    rescore: int,
    dense_search: str,
    layout: Mapping[str, Any],
    dim: int,
) -> tuple[str, list[str], dict[str, Any]]:
    """A query's statements and their parameters: the lexical leg's (``""`` without query terms), the
    dense leg's (none without a vector; one per shard of an HNSW graph), and the parameters they share.

    ``qterms``: the query's term ids; ``n``: rows each leg returns."""
    chunks_t, postings_t, terms_t = tables
    params: dict[str, Any] = {"n": n}
    lex_sql = ""
    den_sqls: list[str] = []
    if qv is not None:
        params["v"] = _vector_literal(qv)
    if qterms:
        lex_where, lex_params = _filter_params(filters, "lf")
        lex_sql = _lexical_sql(chunks_t, postings_t, terms_t, lex_where, qv is not None)
        params.update(lex_params, corpus=corpus, terms=list(qterms), k1=k1, b=b, per_term=per_term, rescore=rescore)
    if qv is not None:
        den_where, den_params = _filter_params(filters, "df")
        # exact: "+ 0" keeps the planner off the HNSW index (an index scan ordered by the distance
        # followed by an incremental sort on row would look exact and be approximate)
        if dense_search == "exact":
            order = "(c.embedding <#> %(v)s::vector) + 0, c.row"
        else:
            order = hnsw_order("c.embedding", layout.get("storage"), dim)
        # a sharded graph: one walk per shard (each statement repeats its partial index's predicate)
        shards = int(layout["shards"]) if dense_search == "hnsw" else 1
        den_sqls = _dense_sqls(chunks_t, den_where, order, shards)
        params.update(den_params)
    return lex_sql, den_sqls, params


def fuse(
    lex_rows: Sequence[Any],
    den_rows: Sequence[Any],
    *,
    lexical_leg: bool,
    dense_leg: bool,
    sharded: bool,
    k: int,
    n: int,
) -> list[Hit]:
    """The legs' rows as the best ``k`` hits: RRF of both legs (or one leg's order), ties by row."""
    if sharded:  # the shards' best, merged
        den_rows = sorted(den_rows, key=lambda r: (-float(r[2]), int(r[0])))[:n]
    found = [*lex_rows, *den_rows]
    by_row = {int(r[0]): r for r in found}
    lex_leg = sorted(lex_rows, key=lambda r: (-float(r[1]), int(r[0])))
    den_leg = sorted(den_rows, key=lambda r: (-float(r[2]), int(r[0])))
    lexical = {int(r[0]): float(r[1]) for r in lex_leg}
    if lexical_leg and dense_leg:
        ranked = sorted(rrf([list(lexical), [int(r[0]) for r in den_leg]]).items(), key=lambda kv: -kv[1])[:k]
    elif lexical_leg:
        ranked = list(lexical.items())[:k]
    else:
        ranked = [(int(r[0]), float(r[2])) for r in den_leg[:k]]
    hits = []
    for row, score in ranked:
        r = by_row[row]
        chunk = Chunk(r[3], r[4], r[5], r[6], int(r[7]), int(r[8]), int(r[9]), int(r[10]), r[11], r[12])
        hits.append(
            Hit(
                chunk,
                score=float(score),
                dense=None if not dense_leg else float(r[2]),
                lexical=lexical.get(row, 0.0),
            )
        )
    return hits
