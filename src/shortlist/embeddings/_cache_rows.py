"""The rows of a vector store and their integrity: a text's key, a row's digest, rows read back checked
(and the dropped ones reported), vectors encoded for writing, and what a store holds (``CacheInfo``).
Shared by the SQLite store (:mod:`shortlist.embeddings._cache`) and the PostgreSQL one; re-exported by
:mod:`shortlist.embeddings._cache`.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from shortlist._events import Event, emit

__all__ = [
    "CacheInfo",
    "CacheRowDropped",
    "check_rows",
    "decode_vector",
    "encoded",
    "report_dropped",
    "row_digest",
    "text_key",
]


@dataclass(frozen=True, kw_only=True)
class CacheRowDropped(Event):
    """Stored vectors failed their check on read and were deleted; they are recomputed and stored again.

    ``reason``: ``not_bytes`` (the vector is not a blob), ``length`` (its bytes are not ``dim``
    float32s), ``not_finite`` (a NaN or infinite value), ``digest`` (no digest, or one that is not
    the row's model, text and vector: damaged, or moved to another text), ``dim`` (a valid row whose
    dimension is not the model's). A computed vector that is not finite is not stored (``not_finite``,
    ``stored=False``).
    """

    name: ClassVar[str] = "embeddings.cache_row_dropped"
    area: ClassVar[str] = "embeddings"
    level: int = logging.WARNING
    path: str = ""
    model: str = ""
    reason: str = ""
    rows: int = 0
    stored: bool = True


@dataclass(frozen=True)
class CacheInfo:
    """What a vector file holds (``shortlist cache info``)."""

    path: str
    exists: bool
    vectors: int
    bytes: int
    max_bytes: int
    models: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "path": self.path,
            "exists": self.exists,
            "vectors": self.vectors,
            "bytes": self.bytes,
            "max_bytes": self.max_bytes,
            "models": dict(self.models),
        }


def decode_vector(dim: object, blob: object) -> np.ndarray[Any, np.dtype[np.float32]] | None:
    """A stored vector, or None when the row is malformed (not a blob of ``dim`` float32s): a miss."""
    if not isinstance(blob, bytes | bytearray | memoryview) or isinstance(dim, bool) or not isinstance(dim, int):
        return None
    if dim < 1 or len(blob) != 4 * dim:
        return None
    return np.frombuffer(blob, dtype=np.float32, count=dim)


_DIGEST_DOMAIN = b"shortlist vector row v1\0"


def _digest_base(model: str) -> Any:
    """The sha256 state after the domain and the model identity, copied for each row of that model."""
    name = model.encode("utf-8")
    return hashlib.sha256(_DIGEST_DOMAIN + struct.pack("<I", len(name)) + name)


def row_digest(model: str, key: bytes, vec: bytes) -> bytes:
    """The digest stored with a row: the sha256 of its model identity, text key and vector bytes.

    A row whose digest is not this is not served (:func:`check_rows`): a vector cannot be moved to
    another text's key, or another model's, without the digest being computed again.
    """
    h = _digest_base(model)
    h.update(bytes(key))
    h.update(bytes(vec))
    return bytes(h.digest())


def check_rows(
    model: str, rows: Sequence[tuple[bytes, object, object, object]]
) -> tuple[dict[bytes, np.ndarray[Any, np.dtype[np.float32]]], list[tuple[bytes, str]]]:
    """Split stored ``(key, dim, vec, digest)`` rows of ``model`` into servable vectors and rejected keys.

    A rejected key comes with the reason of :class:`CacheRowDropped`, checked in this order:
    ``not_bytes`` (the vector is not a blob), ``length`` (not ``dim`` float32s), ``not_finite``
    (a NaN or infinite value), ``digest`` (none, or not :func:`row_digest` of the row).
    """
    bad: list[tuple[bytes, str]] = []
    decoded: list[tuple[bytes, np.ndarray[Any, np.dtype[np.float32]], bytes, object]] = []
    for key, dim, blob, digest in rows:
        if not isinstance(blob, bytes | bytearray | memoryview):
            bad.append((key, "not_bytes"))
            continue
        vec = decode_vector(dim, blob)
        if vec is None:
            bad.append((key, "length"))
        else:
            decoded.append((key, vec, bytes(blob), digest))
    if decoded and not np.isfinite(np.concatenate([vec for _, vec, _, _ in decoded])).all():  # one pass: rare
        bad += [(key, "not_finite") for key, vec, _, _ in decoded if not np.isfinite(vec).all()]
        decoded = [row for row in decoded if np.isfinite(row[1]).all()]
    base = _digest_base(model)
    found: dict[bytes, np.ndarray[Any, np.dtype[np.float32]]] = {}
    for key, vec, blob, digest in decoded:
        h = base.copy()
        h.update(key)
        h.update(blob)
        if isinstance(digest, bytes | bytearray | memoryview) and bytes(digest) == h.digest():
            found[key] = vec
        else:
            bad.append((key, "digest"))
    return found, bad


def report_dropped(path: str, model: str, reasons: Sequence[str], *, stored: bool = True) -> None:
    """One ``embeddings.cache_row_dropped`` event per reason among ``reasons`` (one entry per row)."""
    for reason in dict.fromkeys(reasons):
        emit(CacheRowDropped(path=path, model=model, reason=reason, rows=reasons.count(reason), stored=stored))


def text_key(text: str) -> bytes:
    """The content address of one text."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def encoded(
    items: Sequence[tuple[bytes, np.ndarray[Any, Any]]],
) -> list[tuple[bytes, np.ndarray[Any, np.dtype[np.float32]], bytes]]:
    """``(key, vector, its float32 bytes)`` of each item, the last of a repeated key."""
    rows = {k: np.asarray(v, dtype=np.float32) for k, v in items}
    return [(k, v, v.tobytes()) for k, v in sorted(rows.items())]
