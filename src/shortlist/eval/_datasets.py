"""Load evaluation datasets: a directory of ``tools.jsonl`` and ``queries.jsonl``, validated.

``tools.jsonl``: one object per line with ``id``, ``name``, ``description`` and optional
``parameters`` (a JSON Schema object), ``examples`` (list of strings) and ``metadata``.
``queries.jsonl``: ``qid``, ``text``, ``gold`` (list of tool ids; empty: no tool applies)
and an optional ``split``. Every problem (unreadable file, bad JSON, missing field,
duplicate id, empty catalog, gold naming an unknown tool) is a
:class:`~shortlist.errors.CatalogError` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shortlist._records import EvalQuery, load_queries, records, string_field, string_list
from shortlist._types import Candidate
from shortlist.errors import CatalogError

__all__ = [
    "Dataset",
    "EvalQuery",
    "apply_train_examples",
    "load_dataset",
    "load_queries",
    "load_tools",
    "write_dataset",
]


@dataclass(frozen=True, slots=True)
class Dataset:
    """A catalog and the queries to rank it for.

    Args:
        name: a display name (the directory's name).
        tools: the catalog, in file order.
        queries: the evaluation queries, in file order.
    """

    name: str
    tools: tuple[Candidate, ...]
    queries: tuple[EvalQuery, ...]

    @property
    def splits(self) -> tuple[str, ...]:
        """The split names, in order of first appearance."""
        return tuple(dict.fromkeys(q.split for q in self.queries))


def load_tools(path: str | Path) -> tuple[Candidate, ...]:
    """Read and validate a ``tools.jsonl`` catalog.

    Raises:
        CatalogError: unreadable file, bad JSON, missing or mistyped field, duplicate id,
            or no tool at all.
    """
    path = Path(path)
    tools: list[Candidate] = []
    seen: dict[str, int] = {}
    for lineno, obj in records(path):
        where = f"{path}:{lineno}"
        tid = string_field(obj, "id", where)
        if not tid.strip():
            raise CatalogError(f"{where}: field 'id' must not be empty")
        if tid in seen:
            raise CatalogError(f"{where}: duplicate tool id {tid!r} (first on line {seen[tid]})")
        seen[tid] = lineno
        name = string_field(obj, "name", where)
        description = string_field(obj, "description", where)
        params = obj.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise CatalogError(f"{where}: field 'parameters' must be a JSON Schema object")
        metadata = obj.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise CatalogError(f"{where}: field 'metadata' must be an object")
        examples = string_list(obj, "examples", where, required=False)
        tools.append(Candidate(tid, name, description, metadata, params, examples))
    if not tools:
        raise CatalogError(f"{path}: empty catalog (no tools)")
    return tuple(tools)


def load_dataset(directory: str | Path) -> Dataset:
    """Load ``DIR/tools.jsonl`` and ``DIR/queries.jsonl``.

    Raises:
        CatalogError: the directory or a file is missing or invalid (see :func:`load_tools`
            and :func:`load_queries`).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CatalogError(f"{directory}: not a dataset directory (expected tools.jsonl and queries.jsonl)")
    tools = load_tools(directory / "tools.jsonl")
    queries = load_queries(directory / "queries.jsonl", [t.id for t in tools])
    return Dataset(directory.resolve().name, tools, queries)


def apply_train_examples(tools: Sequence[Candidate], train: Sequence[EvalQuery]) -> tuple[tuple[Candidate, ...], int]:
    """Make each train query an example of its gold tools.

    Args:
        tools: the catalog.
        train: queries (same shape as ``queries.jsonl``) disjoint from the evaluation ones.

    Returns:
        The enriched catalog (existing examples kept first) and the number of examples added.

    Raises:
        CatalogError: no train query names a tool of the catalog.
    """
    by_tool: dict[str, list[str]] = {}
    ids = {t.id for t in tools}
    added = 0
    for q in train:
        for g in q.gold:
            if g in ids and q.text.strip():
                by_tool.setdefault(g, []).append(q.text)
                added += 1
    if train and not added:
        raise CatalogError("the train file names none of the catalog's tools in its gold lists")
    out = tuple(t.with_examples([*t.examples, *by_tool[t.id]]) if t.id in by_tool else t for t in tools)
    return out, added


def write_dataset(directory: str | Path, tools: Sequence[Mapping[str, Any]], queries: Sequence[EvalQuery]) -> Path:
    """Write ``tools.jsonl`` and ``queries.jsonl`` into ``directory`` (created if needed).

    Args:
        directory: the output directory.
        tools: tool records (``id``, ``name``, ``description``, optional ``parameters``, ``metadata``).
        queries: the queries.

    Returns:
        The directory.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "tools.jsonl").open("w", encoding="utf-8") as f:
        for t in tools:
            f.write(json.dumps(dict(t), ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in queries:
            rec = {"qid": q.qid, "text": q.text, "gold": list(q.gold), "split": q.split}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return out
