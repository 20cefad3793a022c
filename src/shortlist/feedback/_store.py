"""The feedback log: which tools the model actually called after a selection, stored in SQLite (or PostgreSQL).

Each recorded turn keeps the query text, its kind, the ids the selector surfaced, the ids
the model used, and a timestamp. The queries where a tool was used become that tool's
example queries (:meth:`FeedbackStore.examples`), which every ranker indexes with the
description. The database runs in WAL mode so a serving process can read while another
records. Importing a ``queries.jsonl``-shaped file (``text`` + ``gold``) is idempotent per
``qid``. ``FeedbackStore("postgresql://…")`` opens the same log in PostgreSQL instead
(:class:`~shortlist.feedback._postgres.PostgresFeedbackStore`), shared by replicas.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from shortlist._memo import IdentityMemo
from shortlist._records import load_queries
from shortlist._sqlite import BUSY_TIMEOUT_MS, enable_wal, retry_locked
from shortlist._types import Candidate, Query
from shortlist.errors import CatalogError, UsageError

if TYPE_CHECKING:
    from shortlist.selection._cousage import CoUsage

__all__ = ["SQLITE", "Dialect", "FeedbackStore", "apply_examples"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    query TEXT NOT NULL,
    selected TEXT NOT NULL,
    external_id TEXT UNIQUE
);
CREATE TABLE IF NOT EXISTS uses (
    turn_id INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    candidate_id TEXT NOT NULL,
    PRIMARY KEY (turn_id, candidate_id)
);
CREATE INDEX IF NOT EXISTS uses_by_candidate ON uses(candidate_id, turn_id);
"""


#: How many turn ids back :meth:`FeedbackStore.co_usage` reads again when the log changed: a turn that
#: another writer committed after a higher id was already read (PostgreSQL's ids are taken at insert,
#: seen at commit) is counted then.
FOLD_LOOKBACK = 1000


@dataclass
class _Read:
    """What of the log a cache has read: up to turn id ``last`` and the ids in ``seen`` (the last
    :data:`FOLD_LOOKBACK` ones), as of the log's ``version``."""

    version: tuple[int, int] | None = None
    last: int = 0
    seen: set[int] = field(default_factory=set)

    def new_turns(self, rows: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
        """The rows (turn id first) of turns not read yet; they are then read."""
        fresh = [r for r in rows if int(r[0]) not in self.seen]
        turns = {int(r[0]) for r in fresh}
        self.seen.update(turns)
        self.last = max([self.last, *turns])
        self.seen = {i for i in self.seen if i > self.last - FOLD_LOOKBACK}
        return fresh

    @property
    def since(self) -> int:
        """The turn id after which the next read starts."""
        return max(0, self.last - FOLD_LOOKBACK)


def _new_co_usage() -> CoUsage:
    from shortlist.selection._cousage import CoUsage

    return CoUsage(frozen=True)


@dataclass
class _Folded(_Read):
    """A kind's co-usage table and what of the log it has counted."""

    table: CoUsage = field(default_factory=_new_co_usage)


@dataclass
class _FoldedExamples(_Read):
    """A kind's example queries per candidate id (oldest first, no duplicates) and what of the log they hold."""

    texts: dict[str, dict[str, None]] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)


_FoldT = TypeVar("_FoldT", bound=_Read)


@dataclass(frozen=True)
class Dialect:
    """What the reading SQL differs in between the two stores: table names, placeholder, a turn's use order."""

    turns: str
    uses: str
    param: str
    #: how a turn's uses are ordered in :meth:`FeedbackStore.used_sets` (after the turn id)
    use_order: str = ""

    def used_sets(self, kind: str | None) -> tuple[str, tuple[Any, ...]]:
        """Every (turn id, candidate id) of turns of ``kind`` (None: all), newest turn first."""
        where, params = (f" WHERE t.kind = {self.param}", (kind,)) if kind is not None else ("", ())
        order = f", {self.use_order}" if self.use_order else ""
        return (
            f"SELECT u.turn_id, u.candidate_id FROM {self.uses} u JOIN {self.turns} t ON t.id = u.turn_id{where}"
            f" ORDER BY u.turn_id DESC{order}",
            params,
        )

    def used_since(self, kind: str | None, after: int, *, query: bool = False) -> tuple[str, tuple[Any, ...]]:
        """Every (turn id, candidate id[, the turn's query]) of turns of ``kind`` (None: all) whose id is above
        ``after``, oldest first."""
        where, params = (f" AND t.kind = {self.param}", (after, kind)) if kind is not None else ("", (after,))
        order = f", {self.use_order}" if self.use_order else ""
        columns = "u.turn_id, u.candidate_id, t.query" if query else "u.turn_id, u.candidate_id"
        return (
            f"SELECT {columns} FROM {self.uses} u JOIN {self.turns} t ON t.id = u.turn_id"
            f" WHERE u.turn_id > {self.param}{where} ORDER BY u.turn_id{order}",
            params,
        )

    def stats(self) -> tuple[str, str, str, str]:
        """The four statements of :meth:`FeedbackStore.stats`: turns, uses, kinds, the top candidates."""
        return (
            f"SELECT COUNT(*), MIN(ts), MAX(ts) FROM {self.turns}",
            f"SELECT COUNT(*), COUNT(DISTINCT candidate_id) FROM {self.uses}",
            f"SELECT kind, COUNT(*) FROM {self.turns} GROUP BY kind ORDER BY kind",
            f"SELECT candidate_id, COUNT(*) AS n FROM {self.uses} GROUP BY candidate_id"
            " ORDER BY n DESC, candidate_id LIMIT 10",
        )


SQLITE = Dialect(turns="turns", uses="uses", param="?", use_order="u.rowid")  # rowid: the order recorded


def _ids(values: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise TypeError(f"{what} must be a list of ids, not a string")
    out = tuple(dict.fromkeys(values))
    if any(not isinstance(v, str) or not v for v in out):
        raise UsageError(f"{what} must hold non-empty string ids")
    return out


def _quick_check(db: sqlite3.Connection, path: str) -> None:
    """Refuse a damaged file (``PRAGMA quick_check`` must answer ``ok``) before anything is written to it."""
    try:
        rows = retry_locked(lambda: db.execute("PRAGMA quick_check").fetchall(), timeout_ms=BUSY_TIMEOUT_MS)
    except sqlite3.DatabaseError as exc:  # damage bad enough that the check itself stops
        rows = [(str(exc),)]
    if [tuple(r) for r in rows] != [("ok",)]:
        lines = [line for row in rows for line in str(row[0]).splitlines() if line.strip()]
        raise CatalogError(
            f"{path}: not a usable feedback database: it is damaged (PRAGMA quick_check: {'; '.join(lines[:3])}); "
            "restore it from a backup, or move it away to start an empty one"
        )


def is_postgres_url(path: object) -> bool:
    """Whether ``path`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``) rather than a file."""
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


class FeedbackStore:
    """A feedback log in SQLite (WAL). Safe to share between threads.

    Args:
        path: the database file (created with its directory), or ``":memory:"``; a ``postgresql://`` URL
            opens a :class:`~shortlist.feedback._postgres.PostgresFeedbackStore` (``shortlist[postgres]``).

    Raises:
        CatalogError: the file cannot be opened as a feedback database.
    """

    #: the SQL the reading methods run (the PostgreSQL store has its own)
    dialect: Dialect = SQLITE

    def __new__(cls, path: str | Path = ":memory:", *args: Any, **kwargs: Any) -> FeedbackStore:
        if cls is FeedbackStore and is_postgres_url(path):
            from shortlist.feedback._postgres import PostgresFeedbackStore

            return super().__new__(PostgresFeedbackStore)
        return super().__new__(cls)

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if self.path != ":memory:":
                _quick_check(self._db, self.path)
                enable_wal(self._db, timeout_ms=BUSY_TIMEOUT_MS, source=self.path)
            self._db.execute("PRAGMA foreign_keys=ON")
            retry_locked(lambda: self._db.executescript(_SCHEMA), timeout_ms=BUSY_TIMEOUT_MS)
        except (sqlite3.DatabaseError, CatalogError) as exc:
            if getattr(self, "_db", None) is not None:
                self._db.close()
            if isinstance(exc, CatalogError):
                raise
            raise CatalogError(f"{self.path}: not a usable feedback database: {exc}") from exc
        self._lock = threading.RLock()
        self._writes = 0
        self._init_caches()

    def _init_caches(self) -> None:
        """The caches of what the log was read into (examples, enriched candidates, co-usage), empty."""
        self._examples: dict[str | None, _FoldedExamples] = {}
        # (kind, candidate id) -> (limit, name, description, configured examples) -> the enriched copy
        self._enriched: dict[tuple[str | None, str], dict[tuple[int | None, str, str, tuple[str, ...]], Candidate]] = {}
        self._co_usage: dict[str | None, _Folded] = {}
        # a list enriched, per kind and limit: (the log version, its enriched copy)
        self._enrich_memo: IdentityMemo[tuple[tuple[int, int] | None, tuple[Candidate, ...]]] = IdentityMemo(8)

    # -- writing ----------------------------------------------------------------------------

    def record(
        self,
        query: str | Query,
        selected: Sequence[str] = (),
        used: Sequence[str] = (),
        *,
        kind: str | None = None,
        ts: float | None = None,
        external_id: str | None = None,
    ) -> int:
        """Record one turn's outcome.

        Args:
            query: the query text (or the :class:`~shortlist._types.Query` of the turn).
            selected: the ids the selection surfaced.
            used: the ids the model actually called (these get the query as an example).
            kind: ``"tool"``, ``"skill"``, … (default: the query's kind, else ``"tool"``).
            ts: the time (seconds since the epoch; default now).
            external_id: a unique id; recording the same one again is ignored.

        Returns:
            The turn's row id (0 when ignored as a duplicate).
        """
        text = query.text if isinstance(query, Query) else query
        if not isinstance(text, str) or not text.strip():
            raise UsageError("a feedback turn needs a non-empty query text")
        kind = kind or (query.kind if isinstance(query, Query) else "tool")
        sel, use = _ids(selected, "selected"), _ids(used, "used")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO turns (ts, kind, query, selected, external_id) VALUES (?, ?, ?, ?, ?)",
                    (time.time() if ts is None else float(ts), kind, text, json.dumps(list(sel)), external_id),
                )
                turn_id = int(cur.lastrowid or 0) if cur.rowcount else 0
                if turn_id:
                    self._db.executemany(
                        "INSERT OR IGNORE INTO uses (turn_id, candidate_id) VALUES (?, ?)", [(turn_id, u) for u in use]
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._writes += 1
            return turn_id

    def import_jsonl(self, path: str | Path, *, kind: str = "tool") -> int:
        """Import a ``queries.jsonl``-shaped file: each line's ``text`` was answered by its ``gold`` ids.

        Lines with an empty ``gold`` are skipped; a line whose ``qid`` was imported before is
        ignored (importing a file twice adds nothing).

        Returns:
            The number of turns added.

        Raises:
            CatalogError: the file cannot be read or a line is not a valid record.
        """
        queries = load_queries(path)
        source = Path(path).name
        rows = [(q, f"{source}:{q.qid}") for q in queries if q.gold and q.text.strip()]
        added = 0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                for q, ext in rows:
                    cur = self._db.execute(
                        "INSERT OR IGNORE INTO turns (ts, kind, query, selected, external_id)"
                        " VALUES (?, ?, ?, '[]', ?)",
                        (now, kind, q.text, ext),
                    )
                    if cur.rowcount:
                        turn_id = cur.lastrowid
                        self._db.executemany(
                            "INSERT OR IGNORE INTO uses (turn_id, candidate_id) VALUES (?, ?)",
                            [(turn_id, g) for g in q.gold],
                        )
                        added += 1
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._writes += 1
        return added

    # -- reading ----------------------------------------------------------------------------

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one reading statement (the caller holds the lock)."""
        return self._db.execute(sql, tuple(params)).fetchall()

    def _shown_path(self) -> str:
        return self.path

    def _version(self) -> tuple[int, int]:
        row = self._db.execute("PRAGMA data_version").fetchone()
        return (int(row[0]), self._writes)

    def _read_new(
        self, folds: dict[str | None, _FoldT], kind: str | None, make: Callable[[], _FoldT], query: bool
    ) -> tuple[_FoldT, list[Any]]:
        """``kind``'s fold in ``folds`` and the rows of the turns recorded since its last read (none while
        the log is unchanged), now read into it; the caller holds the lock."""
        key = self._version()
        fold = folds.get(kind)
        if fold is None:
            fold = folds[kind] = make()
        if fold.version == key:
            return fold, []
        rows = fold.new_turns(self._rows(*self.dialect.used_since(kind, fold.since, query=query)))
        fold.version = key
        return fold, rows

    def _all_examples(self, kind: str | None) -> dict[str, list[str]]:
        """The example queries per candidate id, following the log: when it changed, the turns recorded
        since the last read are added (as :meth:`co_usage` counts them), and only the candidates they used
        get new enriched copies, so a ranker re-indexes what changed, not the catalog."""
        fold, rows = self._read_new(self._examples, kind, _FoldedExamples, query=True)
        changed: set[str] = set()
        for _, cid, text in rows:
            texts = fold.texts.setdefault(str(cid), {})
            if text not in texts:
                texts[text] = None
                changed.add(str(cid))
        for cid in changed:
            fold.lists[cid] = list(fold.texts[cid])
            self._enriched.pop((kind, cid), None)
        return fold.lists

    def used_sets(self, *, kind: str | None = "tool", limit: int = 100_000) -> list[tuple[str, ...]]:
        """The ids used together in each recorded turn that used any, newest first (co-usage).

        Args:
            kind: only turns of this kind (None: every kind).
            limit: the most turns returned.
        """
        with self._lock:
            rows = self._rows(*self.dialect.used_sets(kind))
        sets: dict[int, list[str]] = {}
        for turn_id, candidate in rows:
            if turn_id not in sets and len(sets) >= limit:
                break
            sets.setdefault(int(turn_id), []).append(str(candidate))
        return [tuple(ids) for ids in sets.values()]

    def co_usage(self, *, kind: str = "tool") -> CoUsage:
        """The tools this log's turns used together, as a :class:`~shortlist.selection._cousage.CoUsage`.

        One table per kind, shared by every caller and frozen (:meth:`~CoUsage.observe` raises: a
        conversation that learns from its own calls teaches ``CoUsage(base=store.co_usage())`` on
        top of it). It follows the log: when the log has changed, the turns recorded since the last
        read are counted into it (a read of the new turns, not of the whole log: a service that
        records a turn between two requests does not re-read 100,000 turns each time). The turns of
        the last :data:`FOLD_LOOKBACK` ids are read again and the new ones among them counted, so a
        turn another replica committed after a higher id was read is not lost.
        """
        with self._lock:
            fold, rows = self._read_new(self._co_usage, kind, _Folded, query=False)
            turns: dict[int, list[str]] = {}
            for turn_id, candidate in rows:
                turns.setdefault(int(turn_id), []).append(str(candidate))
            for used in turns.values():
                fold.table._count(used)
            return fold.table

    def examples(
        self, ids: Iterable[str] | None = None, *, kind: str | None = None, limit: int | None = None
    ) -> dict[str, list[str]]:
        """Return the example queries per candidate id (oldest first, duplicates dropped; a turn another
        replica committed late comes after those read before it).

        Args:
            ids: only these ids (default: every id with feedback).
            kind: only turns of this kind (default: every kind).
            limit: keep only the most recent ``limit`` examples per id.
        """
        with self._lock:
            cache = self._all_examples(kind)
            wanted = cache.keys() if ids is None else [i for i in ids if i in cache]
            return {i: (cache[i][-limit:] if limit else list(cache[i])) for i in wanted}

    def enrich(
        self, candidates: Sequence[Candidate], *, kind: str | None = None, limit: int | None = None
    ) -> list[Candidate]:
        """Return ``candidates`` with their feedback examples appended (see :func:`apply_examples`).

        While the log does not change, the same input candidate maps to the same enriched
        object, so rankers' identity-keyed index caches keep hitting.
        """
        with self._lock:
            cache = self._all_examples(kind)
            # the same list again on an unchanged log (a service's catalog, every turn): the same answer
            version = self._examples[kind].version
            memo = self._enrich_memo.get(candidates, kind, limit)
            if memo is not None and memo[0] == version:
                return list(memo[1])
            out: list[Candidate] = []
            for c in candidates:
                extra = cache.get(c.id)
                if not extra:
                    out.append(c)
                    continue
                copies = self._enriched.setdefault((kind, c.id), {})
                key = (limit, c.name, c.description, c.examples)
                hit = copies.get(key)
                if hit is None or hit.parameters is not c.parameters or hit.metadata is not c.metadata:
                    hit = c.with_examples([*c.examples, *(extra[-limit:] if limit else extra)])
                    copies[key] = hit
                out.append(hit)
            self._enrich_memo.put(candidates, (version, tuple(out)), kind, limit)
            return out

    def stats(self) -> dict[str, Any]:
        """Counts: turns, uses, distinct candidates used, kinds, time range, top candidates."""
        turns_sql, uses_sql, kinds_sql, top_sql = self.dialect.stats()
        with self._lock:
            ((turns, first, last),) = self._rows(turns_sql)
            ((uses, cands),) = self._rows(uses_sql)
            kinds = {str(k): int(n) for k, n in self._rows(kinds_sql)}
            top = self._rows(top_sql)
        return {
            "path": self._shown_path(),
            "turns": int(turns),
            "uses": int(uses),
            "candidates": int(cands),
            "kinds": kinds,
            "first_ts": first,
            "last_ts": last,
            "top": [{"id": cid, "uses": int(n)} for cid, n in top],
        }

    def close(self) -> None:
        """Close the database. Idempotent."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> FeedbackStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def apply_examples(
    candidates: Sequence[Candidate], store: FeedbackStore, *, kind: str | None = None, limit: int | None = None
) -> list[Candidate]:
    """Enrich candidates with the example queries of the feedback log.

    Args:
        candidates: the catalog.
        store: the feedback log.
        kind: only feedback of this kind (``"tool"``, ``"skill"``; default: every kind).
        limit: keep only the most recent ``limit`` feedback examples per candidate.

    Returns:
        The candidates, in order; those with feedback carry their configured examples
        followed by the logged queries. Unchanged candidates are the same objects, and the
        enriched ones are re-used until the log changes, so a content-keyed ranker index
        re-indexes only when examples actually change.
    """
    return store.enrich(candidates, kind=kind, limit=limit)
