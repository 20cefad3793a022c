"""Writing passages into a PostgreSQL corpus's tables: binary ``COPY`` of passages and postings,
terms' document frequencies, and removing documents.

Each posting stores its *impact*, the BM25 term weight ``tf / (tf + k1 (1 - b + b dl / avgdl))``
when it was written, so a query reads a term's best postings first. The caller holds the corpus's
advisory lock and the transaction; :class:`shortlist.retrieval._backends.postgres.PostgresBackend`
keeps the corpus's counts.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from shortlist.embeddings._base import Vectors
from shortlist.retrieval._backends._pg_names import term_id
from shortlist.retrieval._document import Chunk

if TYPE_CHECKING:  # the backend module imports psycopg (or names its extra)
    import psycopg

__all__ = ["add_counts", "add_df", "copy_passages", "counts_for_update", "remove_documents"]

_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_BINARY_TRAILER = struct.pack(">h", -1)


def _text_field(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack(">i", len(data)) + data


def copy_passages(
    conn: psycopg.Connection[Any],
    tables: tuple[str, str, str],
    dim: int,
    k1: float,
    b: float,
    chunks: Sequence[Chunk],
    vectors: Vectors,
    tokens: Sequence[list[str]],
    first_row: int,
    avgdl: float,
) -> None:
    """Binary COPY of the chunks (with their vectors), their postings, then the terms' frequencies.

    ``tables``: the corpus's (chunks, postings, terms) tables."""
    chunks_t, postings_t, terms_t = tables
    vec_head = struct.pack(">ihh", 4 + 4 * dim, dim, 0)
    big = np.ascontiguousarray(vectors, dtype=">f4")
    norm_k = k1 * (1 - b)
    slope = k1 * b / avgdl if avgdl > 0 else 0.0
    df: Counter[int] = Counter()
    terms: list[int] = []
    rows: list[int] = []
    tfs: list[int] = []
    dls: list[int] = []
    with conn.cursor().copy(
        f"COPY {chunks_t} (row, chunk_id, document_id, title, text, position, count, char_start,"
        " char_end, metadata, doc_hash, length, embedding) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        buf = bytearray(_BINARY_HEADER)
        for i, c in enumerate(chunks):
            row = first_row + i
            meta = b"\x01" + json.dumps(dict(c.metadata), ensure_ascii=False, default=str).encode("utf-8")
            buf += struct.pack(">hiq", 13, 8, row)
            for text in (c.id, c.document_id, c.title, c.text):
                buf += _text_field(text)
            buf += struct.pack(">iiiiiiii", 4, c.position, 4, c.count, 4, c.char_start, 4, c.char_end)
            buf += struct.pack(">i", len(meta)) + meta
            buf += _text_field(c.doc_hash)
            buf += struct.pack(">ii", 4, len(tokens[i]))
            buf += vec_head + big[i].tobytes()
            counts = Counter(term_id(t) for t in tokens[i])
            dl = len(tokens[i])
            for term, tf in counts.items():
                terms.append(term)
                rows.append(row)
                tfs.append(tf)
                dls.append(dl)
            df.update(counts.keys())
            if len(buf) > 1 << 20:
                copy.write(bytes(buf))
                buf.clear()
        buf += _BINARY_TRAILER
        copy.write(bytes(buf))
    if terms:
        tf_a = np.asarray(tfs, dtype=np.float64)
        dl_a = np.asarray(dls, dtype=np.float64)
        impact = tf_a / (tf_a + norm_k + slope * dl_a)
        rec = np.empty(
            len(terms),
            dtype=[
                ("n", ">i2"),
                ("l1", ">i4"),
                ("term", ">i8"),
                ("l2", ">i4"),
                ("row", ">i8"),
                ("l3", ">i4"),
                ("tf", ">i4"),
                ("l4", ">i4"),
                ("dl", ">i4"),
                ("l5", ">i4"),
                ("imp", ">f4"),
            ],
        )
        rec["n"], rec["l1"], rec["l2"], rec["l3"], rec["l4"], rec["l5"] = 5, 8, 8, 4, 4, 4
        rec["term"], rec["row"], rec["tf"], rec["dl"], rec["imp"] = terms, rows, tfs, dls, impact
        with conn.cursor().copy(f"COPY {postings_t} (term, row, tf, dl, impact) FROM STDIN (FORMAT BINARY)") as copy:
            data = rec.tobytes()
            copy.write(_BINARY_HEADER)
            step = 1 << 22
            for start in range(0, len(data), step):
                copy.write(data[start : start + step])
            copy.write(_BINARY_TRAILER)
        add_df(conn, terms_t, df)


def add_df(conn: psycopg.Connection[Any], terms_t: str, df: Mapping[int, int]) -> None:
    """Add ``df`` (term id -> documents) to the terms' document frequencies in ``terms_t``."""
    if not df:
        return
    conn.execute(
        f"INSERT INTO {terms_t} (term, df) SELECT * FROM unnest(%s::bigint[], %s::integer[])"
        " ON CONFLICT (term) DO UPDATE SET df = "
        f"{terms_t}.df + EXCLUDED.df",
        (list(df.keys()), list(df.values())),
    )


def remove_documents(
    conn: psycopg.Connection[Any], tables: tuple[str, str, str], corpus: str, doc_ids: list[str]
) -> int:
    """Delete these documents' chunks, postings and frequencies; return how many documents were removed."""
    if not doc_ids:
        return 0
    chunks_t, postings_t, terms_t = tables
    gone = conn.execute(
        f"DELETE FROM {chunks_t} WHERE document_id = ANY(%s) RETURNING row, length, document_id",
        (doc_ids,),
    ).fetchall()
    if not gone:
        return 0
    rows = [int(r[0]) for r in gone]
    conn.execute(
        f"WITH p AS (DELETE FROM {postings_t} WHERE row = ANY(%s) RETURNING term),"
        " c AS (SELECT term, count(*) AS n FROM p GROUP BY term)"
        f" UPDATE {terms_t} t SET df = t.df - c.n FROM c WHERE t.term = c.term",
        (rows,),
    )
    conn.execute(f"DELETE FROM {terms_t} WHERE df <= 0")
    conn.execute(
        "UPDATE shortlist_index_corpora SET chunks = chunks - %s, tokens = tokens - %s WHERE corpus = %s",
        (len(rows), sum(int(r[1]) for r in gone), corpus),
    )
    return len({r[2] for r in gone})


def counts_for_update(conn: psycopg.Connection[Any], corpus: str) -> tuple[int, int, int]:
    """The corpus's passages, tokens and next row number, its catalogue row locked until the transaction ends."""
    row = conn.execute(
        "SELECT chunks, tokens, next_row FROM shortlist_index_corpora WHERE corpus = %s FOR UPDATE",
        (corpus,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def add_counts(conn: psycopg.Connection[Any], corpus: str, chunks: int, tokens: int, next_row: int) -> None:
    """Add passages and tokens to the corpus's counts, and record its next row number."""
    conn.execute(
        "UPDATE shortlist_index_corpora SET chunks = chunks + %s, tokens = tokens + %s, next_row = %s"
        " WHERE corpus = %s",
        (chunks, tokens, next_row, corpus),
    )
