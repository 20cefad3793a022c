"""The HNSW graph of a PostgreSQL corpus: its layout, its indexes' DDL and names, and building one.

A layout is ``m``, ``ef_construction``, ``storage`` (``halfvec``: the vectors cast to half
precision in the graph; ``vector``: float32) and ``shards``. The graph can be split into ``shards``
partial HNSW indexes (``WHERE row % S = s``): the dense leg then walks every shard's graph at once,
one statement per pooled connection, and keeps the best of their results by the float32 similarity.
A walk's cost grows with ``ef_search`` far more than with the graph's size, so on a machine with
cores to spare two half graphs answer a million passages at a given recall sooner than one whole
graph (docs/postgres.md). Index names carry a digest of the layout, so a rebuild builds the new
graph beside the old one. Used by :class:`shortlist.retrieval._backends.postgres.PostgresBackend`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from shortlist.errors import ConfigError
from shortlist.retrieval._backends.base import Progress

if TYPE_CHECKING:  # the backend module imports psycopg (or names its extra)
    import psycopg

__all__ = [
    "build_index",
    "check_ef_search",
    "check_layout",
    "hnsw_ddl",
    "hnsw_indexes",
    "hnsw_key",
    "hnsw_order",
    "rebuild_graph",
    "recorded_hnsw",
    "recorded_layout",
    "schema_version",
    "shard_predicate",
]


def check_layout(m: int, ef_construction: int, storage: str, shards: int, pool_size: int) -> dict[str, Any]:
    """A graph layout, checked (pgvector's bounds; a shard per pooled connection but the lexical leg's).

    Raises:
        ConfigError: a value out of bounds.
    """
    if storage not in ("halfvec", "vector"):
        raise ConfigError(f"hnsw_storage must be 'halfvec' or 'vector', not {storage!r}")
    most = max(1, int(pool_size) - 1)
    if not 1 <= int(shards) <= most:
        raise ConfigError(f"hnsw_shards must be 1..{most} (pool_size - 1), not {shards!r}")
    if not 2 <= int(m) <= 100 or not 2 * int(m) <= int(ef_construction) <= 1000:
        raise ConfigError(
            "hnsw_m and hnsw_ef_construction need 2 <= m <= 100 and 2 * m <= ef_construction <= 1000 (pgvector's)"
        )
    return {"m": int(m), "ef_construction": int(ef_construction), "storage": storage, "shards": int(shards)}


def check_ef_search(ef_search: int | None, url_options: Mapping[str, str]) -> int:
    """The candidates a graph walk keeps (``hnsw.ef_search``): ``ef_search``, else the URL's, else 100.

    Raises:
        ConfigError: not an integer in the URL, or out of pgvector's bounds (1-1000).
    """
    if ef_search is None:
        try:
            ef_search = int(url_options.get("ef_search", 100))
        except ValueError:
            raise ConfigError(f"ef_search in the URL must be an integer, not {url_options['ef_search']!r}") from None
    if not 1 <= int(ef_search) <= 1000:
        raise ConfigError(f"ef_search must be 1..1000 (pgvector's bounds), not {ef_search}")
    return int(ef_search)


def recorded_layout(hnsw: Mapping[str, Any]) -> dict[str, Any]:
    """A corpus's recorded ``hnsw``, with what corpora from before a field had (float32, one graph)."""
    return {"storage": "vector", "shards": 1, **dict(hnsw)}


def schema_version(layout: Mapping[str, Any]) -> int:
    """The lowest schema version that describes a graph layout (a sharded graph needs 2)."""
    return 2 if int(layout["shards"]) > 1 else 1


def hnsw_ddl(table: str, dim: int, layout: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The indexes of ``layout``'s graph on ``table``, as (name, statement): one, or one partial index per shard.

    The names carry a digest of the layout, so a rebuild builds the new graph beside the old one
    and a rebuild already done (or interrupted after a shard) skips what exists."""
    t = table
    key = hnsw_key("embedding", str(layout["storage"]), dim)
    shards = int(layout["shards"])
    params = f"m = {int(layout['m'])}, ef_construction = {int(layout['ef_construction'])}"
    digest = hashlib.blake2b(
        f"{t}|{layout['m']}|{layout['ef_construction']}|{layout['storage']}|{shards}".encode(), digest_size=4
    ).hexdigest()
    if shards == 1:
        name = f"{t[:44]}_hnsw_{digest}"
        return [(name, f"CREATE INDEX IF NOT EXISTS {name} ON {t} USING hnsw ({key}) WITH ({params})")]
    names = [f"{t[:40]}_hnsw_{digest}_{s}of{shards}" for s in range(shards)]
    return [
        (
            name,
            f"CREATE INDEX IF NOT EXISTS {name} ON {t} USING hnsw ({key}) WITH ({params})"
            f" WHERE {shard_predicate('row', s, shards)}",
        )
        for s, name in enumerate(names)
    ]


def shard_predicate(column: str, shard: int, shards: int, *, placeholders: bool = False) -> str:
    """A shard's rows (the query's WHERE must repeat the partial index's predicate for the planner;
    ``placeholders``: for a statement with parameters, where psycopg reads ``%`` as one)."""
    mod = "%%" if placeholders else "%"
    return f"({column} {mod} {int(shards)}) = {int(shard)}"


def hnsw_indexes(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The HNSW indexes on ``table`` (a corpus's passages), whatever layout built them."""
    rows = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s"
        " AND indexdef LIKE %s ORDER BY indexname",
        (table, "% USING hnsw %"),
    ).fetchall()
    return [str(r[0]) for r in rows]


def hnsw_key(column: str, storage: str | None, dim: int) -> str:
    """The HNSW index's key: the column, or its half-precision cast (the query must order by the same)."""
    if storage == "halfvec":
        return f"({column}::halfvec({dim})) halfvec_ip_ops"
    return f"{column} vector_ip_ops"


def hnsw_order(column: str, storage: str | None, dim: int) -> str:
    """The ORDER BY expression the HNSW index answers (``hnsw_key`` without the operator class)."""
    if storage == "halfvec":
        return f"({column}::halfvec({dim})) <#> %(v)s::halfvec({dim})"
    return f"{column} <#> %(v)s::vector"


def build_index(
    conn: psycopg.Connection[Any],
    name: str,
    statement: str,
    progress: Progress | None,
    side: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
) -> None:
    """Run one CREATE INDEX (nothing when it exists), reporting the passages indexed as it goes (polled
    from a second connection, ``side()``) and, once built, the rest of the index's passages."""
    built = "SELECT reltuples FROM pg_class WHERE relname = %s AND relkind = 'i'"
    if progress is None:
        conn.execute(statement)
        return
    reported = 0
    if conn.execute(built, (name,)).fetchone() is None:
        pid = int(conn.info.backend_pid)
        stop = threading.Event()

        def watch() -> None:
            nonlocal reported
            with side() as other:
                while not stop.wait(1.0):
                    row = other.execute(
                        "SELECT tuples_done FROM pg_stat_progress_create_index WHERE pid = %s", (pid,)
                    ).fetchone()
                    if row is not None and row[0] is not None and int(row[0]) > reported:
                        step, reported = int(row[0]) - reported, int(row[0])
                        progress(step)

        watcher = threading.Thread(target=watch, name="shortlist-pg-build-progress", daemon=True)
        watcher.start()
        try:
            conn.execute(statement)
        finally:
            stop.set()
            watcher.join()
    row = conn.execute(built, (name,)).fetchone()
    if row is not None and int(max(0.0, float(row[0]))) > reported:
        progress(int(float(row[0])) - reported)


def recorded_hnsw(conn: psycopg.Connection[Any], corpus: str, *, lock: bool = False) -> dict[str, Any]:
    """The graph layout ``corpus`` records (``lock``: row-locked until the transaction ends).

    Raises:
        ConfigError: the corpus no longer exists.
    """
    row = conn.execute(
        "SELECT hnsw FROM shortlist_index_corpora WHERE corpus = %s" + (" FOR UPDATE" if lock else ""),
        (corpus,),
    ).fetchone()
    if row is None:
        raise ConfigError(f"corpus {corpus!r} no longer exists")
    return recorded_layout(row[0])


def rebuild_graph(
    connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
    *,
    corpus: str,
    table: str,
    dim: int,
    lock_id: int,
    current: Mapping[str, Any],
    layout: Mapping[str, Any],
    maintenance_work_mem: str,
    progress: Progress | None,
) -> tuple[dict[str, Any], bool]:
    """Build ``layout``'s graph beside ``current``'s, then drop the old indexes and record ``layout``.

    Returns the layout now recorded and whether another process changed the graph meanwhile (then
    what this rebuild built is dropped, unless the other uses it, and the other's layout returned).

    Raises:
        ConfigError: the corpus records another layout than ``current`` already (reopen it).
    """
    from psycopg.types.json import Jsonb  # the backend module imports psycopg (or names its extra)

    with connect() as conn:
        before = recorded_hnsw(conn, corpus)
        if before != current:
            raise ConfigError(f"corpus {corpus!r}: another process changed its graph; reopen it")
        existed = set(hnsw_indexes(conn, table))
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        try:
            for name, statement in hnsw_ddl(table, dim, layout):
                build_index(conn, name, statement, progress, connect)
        finally:
            conn.execute("RESET maintenance_work_mem")
    keep = {name for name, _ in hnsw_ddl(table, dim, layout)}
    with connect() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id,))
        now = recorded_hnsw(conn, corpus, lock=True)
        if now != before:  # another rebuild won: drop what this one built, unless that one uses it
            theirs = {name for name, _ in hnsw_ddl(table, dim, now)}
            for name in keep - existed - theirs:
                conn.execute(f'DROP INDEX IF EXISTS "{name}"')
        else:
            for name in hnsw_indexes(conn, table):
                if name not in keep:
                    conn.execute(f'DROP INDEX "{name}"')
            conn.execute(
                "UPDATE shortlist_index_corpora SET hnsw = %s, schema_version = %s WHERE corpus = %s",
                (Jsonb(dict(layout)), schema_version(layout), corpus),
            )
    return (now, True) if now != before else (dict(layout), False)
