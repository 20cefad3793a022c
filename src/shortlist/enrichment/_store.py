"""Where generated requests persist: a table in the feedback database, mirrored into the feedback log.

One SQLite file holds both: the feedback log's tables (``shortlist.feedback.FeedbackStore``)
and ``enrichment``, one row per tool, content hash, model and template version with the
requests the model wrote and the tokens it took. The row is the cache (a tool whose name,
description and schema are unchanged is never asked about again by the same model), and its
requests are recorded in the feedback log as turns that used the tool (``external_id``
``enrich:<tool>:<hash>:<model>:<i>``), so every reader of the log (the MCP proxy's
``--feedback-db``, a runtime pack's ``feedback``, :func:`shortlist.feedback.apply_examples`)
ranks with them. When a tool's definition changes, or another model re-enriches it, its
earlier generated turns are removed from the log; recorded usage is never touched.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from shortlist.errors import CatalogError
from shortlist.feedback import FeedbackStore

__all__ = ["EXTERNAL_PREFIX", "EnrichmentStore", "GeneratedSet"]

#: The ``external_id`` prefix of the feedback turns enrichment writes.
EXTERNAL_PREFIX = "enrich:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS enrichment (
    tool_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    requests TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    ts REAL NOT NULL,
    PRIMARY KEY (tool_id, content_hash, model)
);
"""


@dataclass(frozen=True)
class GeneratedSet:
    """The requests one model wrote for one version of a tool, and what they cost."""

    tool_id: str
    content_hash: str
    model: str
    requests: tuple[str, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False


def _external_id(s: GeneratedSet, i: int) -> str:
    return f"{EXTERNAL_PREFIX}{s.tool_id}:{s.content_hash[:16]}:{s.model}:{i}"


class EnrichmentStore:
    """The enrichment cache in a feedback database file, and the feedback log it feeds.

    Args:
        path: the feedback database (SQLite file, created with its directory), or ``":memory:"``.

    Raises:
        CatalogError: the file cannot be opened as a feedback database.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.feedback = FeedbackStore(path)
        self.path = self.feedback.path
        self._lock = threading.Lock()
        try:
            # A second connection to the same file (WAL) for the cache table; an in-memory log
            # has no file to share, so its cache lives in its own in-memory database.
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.feedback.close()
            raise CatalogError(f"{self.path}: not a usable feedback database: {exc}") from exc

    def get(self, tool_id: str, content_hash: str, model: str) -> GeneratedSet | None:
        """The cached set for this tool version and model, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT requests, prompt_tokens, completion_tokens, estimated FROM enrichment"
                " WHERE tool_id = ? AND content_hash = ? AND model = ?",
                (tool_id, content_hash, model),
            ).fetchone()
        if row is None:
            return None
        return GeneratedSet(tool_id, content_hash, model, tuple(json.loads(row[0])), row[1], row[2], bool(row[3]))

    def put(self, s: GeneratedSet) -> int:
        """Cache ``s`` and make its requests the tool's generated examples in the feedback log.

        Earlier generated turns of the same tool (another definition or model) leave the log.

        Returns:
            The number of feedback turns added.
        """
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO enrichment VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    s.tool_id,
                    s.content_hash,
                    s.model,
                    json.dumps(list(s.requests), ensure_ascii=False),
                    s.prompt_tokens,
                    s.completion_tokens,
                    int(s.estimated),
                    time.time(),
                ),
            )
        return self.sync(s)

    def sync(self, s: GeneratedSet) -> int:
        """Make the feedback log's generated examples of ``s.tool_id`` exactly ``s.requests`` (idempotent)."""
        keep = {_external_id(s, i) for i in range(len(s.requests))}
        self._remove_generated(s.tool_id, keep)
        added = 0
        for i, text in enumerate(s.requests):
            if self.feedback.record(text, used=(s.tool_id,), kind="tool", external_id=_external_id(s, i)):
                added += 1
        return added

    def _remove_generated(self, tool_id: str, keep: set[str]) -> None:
        if self.path == ":memory:":
            return  # the in-memory log is its own connection's; nothing older can be in it
        prefix = f"{EXTERNAL_PREFIX}{tool_id}:"
        with self._lock:
            rows = self._db.execute(
                "SELECT id, external_id FROM turns WHERE substr(external_id, 1, ?) = ?", (len(prefix), prefix)
            ).fetchall()
            stale = [(r[0],) for r in rows if r[1] not in keep and r[1][len(prefix) :].count(":") >= 2]
            if stale:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany("DELETE FROM uses WHERE turn_id = ?", stale)
                    self._db.executemany("DELETE FROM turns WHERE id = ?", stale)
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise

    def sets(self, tool_ids: Sequence[str] | None = None) -> list[GeneratedSet]:
        """Every cached set (of these tools), oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT tool_id, content_hash, model, requests, prompt_tokens, completion_tokens, estimated"
                " FROM enrichment ORDER BY ts, rowid"
            ).fetchall()
        wanted = None if tool_ids is None else set(tool_ids)
        return [
            GeneratedSet(r[0], r[1], r[2], tuple(json.loads(r[3])), r[4], r[5], bool(r[6]))
            for r in rows
            if wanted is None or r[0] in wanted
        ]

    def stats(self) -> dict[str, int]:
        """Counts: cached sets, tools, requests, tokens spent on them."""
        sets = self.sets()
        return {
            "sets": len(sets),
            "tools": len({s.tool_id for s in sets}),
            "requests": sum(len(s.requests) for s in sets),
            "prompt_tokens": sum(s.prompt_tokens for s in sets),
            "completion_tokens": sum(s.completion_tokens for s in sets),
        }

    def close(self) -> None:
        """Close both connections. Idempotent."""
        with self._lock:
            self._db.close()
        self.feedback.close()

    def __enter__(self) -> EnrichmentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
