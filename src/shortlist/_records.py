"""Files of JSON records, read once: the JSONL reader (line numbers, one clear error per problem),
its field checks, and the ``queries.jsonl`` format that the evaluation reads and the feedback log
imports (``qid``, ``text``, ``gold`` tool ids, optional ``split``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shortlist.errors import CatalogError

__all__ = ["DEFAULT_SPLIT", "EvalQuery", "load_queries", "records", "string_field", "string_list"]

DEFAULT_SPLIT = "all"


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One evaluation query.

    Args:
        qid: unique query id.
        text: the user's request.
        gold: the ids of the tools that answer it (empty: no tool applies).
        split: the subset it belongs to (``"all"`` when the file gives none).
    """

    qid: str
    text: str
    gold: tuple[str, ...]
    split: str = DEFAULT_SPLIT


def records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSONL file as ``(line number, object)``; any problem is a
    :class:`~shortlist.errors.CatalogError` naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read: {exc}") from exc
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CatalogError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise CatalogError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def string_field(obj: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    if key not in obj:
        if required:
            raise CatalogError(f"{where}: missing field {key!r}")
        return ""
    value = obj[key]
    if not isinstance(value, str):
        raise CatalogError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    return value


def string_list(obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> tuple[str, ...]:
    if key not in obj:
        if required:
            raise CatalogError(f"{where}: missing field {key!r}")
        return ()
    value = obj[key]
    if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
        raise CatalogError(f"{where}: field {key!r} must be a list of strings")
    return tuple(value)


def load_queries(path: str | Path, tool_ids: Sequence[str] | None = None) -> tuple[EvalQuery, ...]:
    """Read and validate a ``queries.jsonl`` file.

    Args:
        path: the file.
        tool_ids: when given, every gold id must be one of these.

    Raises:
        CatalogError: unreadable file, bad JSON, missing or mistyped field, duplicate qid,
            unknown gold id, or no query at all.
    """
    path = Path(path)
    known = set(tool_ids) if tool_ids is not None else None
    queries: list[EvalQuery] = []
    seen: dict[str, int] = {}
    for lineno, obj in records(path):
        where = f"{path}:{lineno}"
        qid = string_field(obj, "qid", where)
        if qid in seen:
            raise CatalogError(f"{where}: duplicate qid {qid!r} (first on line {seen[qid]})")
        seen[qid] = lineno
        text = string_field(obj, "text", where)
        gold = tuple(dict.fromkeys(string_list(obj, "gold", where, required=True)))
        if known is not None:
            unknown = [g for g in gold if g not in known]
            if unknown:
                raise CatalogError(f"{where}: gold names unknown tool id(s) {unknown}")
        split = string_field(obj, "split", where, required=False) or DEFAULT_SPLIT
        queries.append(EvalQuery(qid, text, gold, split))
    if not queries:
        raise CatalogError(f"{path}: no queries")
    return tuple(queries)
