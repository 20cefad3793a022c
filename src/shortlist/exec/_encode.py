"""Wire protocol v1, what we send: requests and responses encoded as one line of compact JSON.

A catalog's candidate array is encoded (and hashed into its ``candidates_ref``) once and
cached by the identity of its candidates; the documents themselves are defined in
:mod:`shortlist.exec._protocol`.
"""

from __future__ import annotations

import hashlib
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from shortlist._types import Candidate, Query, Selection
from shortlist.exec._protocol import PROTOCOL_VERSION

__all__ = ["encode_candidates", "encode_request", "encode_response"]


def _candidate_dict(c: Candidate) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": c.id,
        "name": c.name,
        "description": c.description,
        "metadata": dict(c.metadata),
    }
    if c.parameters:
        item["parameters"] = dict(c.parameters)
    if c.examples:
        item["examples"] = list(c.examples)
    return item


class _ArrayCache:
    """The encoded candidate arrays of recent calls, keyed by the identity of their candidates.

    A catalog's candidates are the same objects turn after turn, so encoding them (and
    hashing them for ``candidates_ref``) is done once. Candidates are frozen; mutating a
    metadata dict in place after building a candidate is not seen.
    """

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[int, int, int], tuple[tuple[Candidate, ...], bytes, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, candidates: Sequence[Candidate]) -> tuple[bytes, str]:
        n = len(candidates)
        key = (n, id(candidates[0]) if n else 0, id(candidates[-1]) if n else 0)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and all(map(operator.is_, entry[0], candidates)):
                self._entries.move_to_end(key)
                return entry[1], entry[2]
        data = json.dumps(
            [_candidate_dict(c) for c in candidates], ensure_ascii=False, separators=(",", ":"), default=str
        ).encode("utf-8")
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        with self._lock:
            self._entries[key] = (tuple(candidates), data, digest)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return data, digest


_ARRAYS = _ArrayCache()


def encode_candidates(candidates: Sequence[Candidate]) -> tuple[bytes, str]:
    """Return the JSON array of ``candidates`` and its digest (the ``candidates_ref``); cached."""
    return _ARRAYS.get(candidates)


def encode_request(
    query: Query,
    candidates: Sequence[Candidate],
    *,
    request_id: int | str | None = None,
    with_ref: bool = False,
    include_candidates: bool = True,
) -> bytes:
    """Encode one request as compact UTF-8 JSON on a single line (no trailing newline).

    Args:
        query: the turn's query.
        candidates: the candidates to rank, in source order.
        request_id: a correlation id (worker mode); omitted when None.
        with_ref: add ``candidates_ref`` (worker mode).
        include_candidates: False sends only the ref (for a worker that acknowledged it).
    """
    doc: dict[str, Any] = {"version": PROTOCOL_VERSION}
    if request_id is not None:
        doc["id"] = request_id
    doc["query"] = {
        "text": query.text,
        "kind": query.kind,
        "pack_id": query.pack_id,
        "agent_id": query.agent_id,
        "k": query.k,
    }
    array, digest = _ARRAYS.get(candidates)
    if with_ref or not include_candidates:
        doc["candidates_ref"] = digest
    head = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if not include_candidates:
        return head
    return head[:-1] + b',"candidates":' + array + b"}"


def encode_response(
    selection: Selection, *, request_id: int | str | None = None, candidates_ref: str | None = None
) -> bytes:
    """Encode a selector's answer as one line of JSON (no trailing newline)."""
    doc: dict[str, Any] = {}
    if request_id is not None:
        doc["id"] = request_id
    if candidates_ref is not None:
        doc["candidates_ref"] = candidates_ref
    doc["selected"] = list(selection.selected)
    doc["reason"] = selection.reason
    doc["scores"] = list(selection.scores) if selection.scores is not None else None
    if selection.abstained:
        doc["abstained"] = True
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
