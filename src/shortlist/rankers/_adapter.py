"""A per-deployment query-side linear adapter, trained from the feedback log, gated to the tools it saw.

The feedback log pairs user queries with the tools the model then called. A linear map ``W``
(``dim x dim``) is fitted so that a query's vector, mapped, lands near the vector of the tool
it used: ridge regression pulled toward the identity, ``min ||Q W^T - Y||^2 + lam ||W - I||^2``
(``Q`` the embedded queries, with the ranker's query prefix; ``Y`` the tools' ``"name:
description"`` vectors), solved in closed form. The hybrid ranker then blends, **for the tools
the adapter was trained on only**, the description cosine with the cosine of the mapped
query (``adapter_weight``), moment-matched per turn to the plain cosines of those tools so it
re-orders them without lifting them as a block; every other tool keeps its plain cosine, so a
tool with no usage yet is scored as before (a map fitted on other tools' queries misleads on
it: measured in ``docs/evaluation.md``). It is per deployment: fitted on one catalog's log, it
does not transfer to another catalog.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from shortlist._types import Candidate
from shortlist.embeddings._base import Embedder, matvec
from shortlist.errors import ConfigError, UsageError
from shortlist.rankers._base import candidate_text

__all__ = ["QueryAdapter", "train_adapter"]

_F32 = npt.NDArray[np.float32]
_FORMAT = "shortlist-query-adapter/1"


@dataclass(frozen=True, eq=False)
class QueryAdapter:
    """A fitted query-side linear map.

    Args:
        matrix: ``(dim, dim)``; a query vector ``q`` maps to ``normalise(matrix @ q)``.
        tools: the ids it was trained on (the only ones it is applied to).
        model_name: the embedder's ``model_name`` it was fitted with (checked at use).
        query_prefix: the prefix the queries were embedded with.
        pairs: how many (query, tool) pairs it was fitted on.
        ridge: the pull toward the identity (``lam``, relative to the number of pairs).
    """

    matrix: _F32
    tools: frozenset[str]
    model_name: str
    query_prefix: str
    pairs: int
    ridge: float

    def transform(self, vectors: _F32) -> _F32:
        """Map query vectors (one per row, or one vector) and normalise them to unit length."""
        mapped = np.asarray(vectors, dtype=np.float32) @ self.matrix.T
        norms = np.linalg.norm(mapped, axis=-1, keepdims=True)
        out: _F32 = (mapped / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return out

    def blended_cosines(self, desc: _F32, vectors: _F32, mask: npt.NDArray[np.bool_], weight: float) -> list[_F32]:
        """Per query vector, the description cosines (``desc`` rows) with this adapter's re-ordering blended
        in with ``weight``, for the tools it was trained on (``mask``); the other tools keep the plain cosine.

        The adapted cosines are moment-matched to the plain ones over the trained tools (same mean and
        spread), so the adapter re-orders those tools without lifting them as a block above the tools it
        never saw; and never above the turn's best plain cosine.
        """
        out = []
        for v, m in zip(vectors, self.transform(vectors), strict=True):
            plain = matvec(desc, v).astype(np.float64)
            if not mask.any():
                out.append(plain.astype(np.float32))
                continue
            adapted = matvec(desc, m).astype(np.float64)
            a_mean, a_std = adapted[mask].mean(), adapted[mask].std()
            p_mean, p_std = plain[mask].mean(), plain[mask].std()
            matched = (adapted - a_mean) / a_std * p_std + p_mean if a_std > 0 else plain
            blended = np.minimum((1 - weight) * plain + weight * matched, plain.max())
            out.append(np.where(mask, blended, plain).astype(np.float32))
        return out

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the adapter to ``path`` (an ``.npz`` file: the matrix and a JSON header)."""
        meta = {
            "format": _FORMAT,
            "tools": sorted(self.tools),
            "model_name": self.model_name,
            "query_prefix": self.query_prefix,
            "pairs": self.pairs,
            "ridge": self.ridge,
        }
        target = Path(path)
        with target.open("wb") as f:
            np.savez(f, matrix=self.matrix, meta=np.array(json.dumps(meta)))
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> QueryAdapter:
        """Read an adapter written by :meth:`save`.

        Raises:
            ConfigError: the file is missing, unreadable or not an adapter.
        """
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                matrix = np.asarray(data["matrix"], dtype=np.float32)
                meta = json.loads(str(data["meta"]))
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such adapter file (shortlist feedback train writes one)") from None
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: not a query adapter file: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
            raise ConfigError(f"{path}: not a query adapter file (format {_FORMAT} expected)")
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ConfigError(f"{path}: the adapter matrix must be square, got {matrix.shape}")
        return cls(
            matrix,
            frozenset(str(t) for t in meta.get("tools", [])),
            str(meta.get("model_name", "")),
            str(meta.get("query_prefix", "")),
            int(meta.get("pairs", 0)),
            float(meta.get("ridge", 0.0)),
        )


def train_adapter(
    pairs: Iterable[tuple[str, str]],
    candidates: Sequence[Candidate],
    embedder: Embedder,
    *,
    query_prefix: str = "",
    ridge: float = 1.0,
) -> QueryAdapter:
    """Fit a :class:`QueryAdapter` on ``(query text, tool id)`` pairs.

    Args:
        pairs: the feedback log's (query, used tool) pairs; ids outside ``candidates`` are skipped.
        candidates: the catalog (the targets are their ``"name: description"`` vectors).
        embedder: the embedder the ranker uses.
        query_prefix: the prefix the ranker puts before queries (the adapter sees what it sees).
        ridge: the pull toward the identity, per pair (``lam = ridge * pairs / dim``).

    Raises:
        ValueError: no pair names a tool of the catalog, or ``ridge <= 0``.
    """
    if ridge <= 0:
        raise UsageError("ridge must be positive")
    by_id = {c.id: c for c in candidates}
    kept = [(q, t) for q, t in pairs if t in by_id and q.strip()]
    if not kept:
        raise UsageError("no (query, tool) pair names a tool of the catalog")
    used = sorted({t for _, t in kept})
    targets = np.asarray(embedder.embed([candidate_text(by_id[t]) for t in used]), dtype=np.float64)
    row = {t: i for i, t in enumerate(used)}
    queries = np.asarray(embedder.embed([query_prefix + q for q, _ in kept]), dtype=np.float64)
    y = targets[[row[t] for _, t in kept]]
    dim = queries.shape[1]
    lam = ridge * len(kept) / dim
    eye = np.eye(dim)
    # W^T = (Q^T Q + lam I)^-1 (Q^T Y + lam I)
    w_t = np.linalg.solve(queries.T @ queries + lam * eye, queries.T @ y + lam * eye)
    return QueryAdapter(
        np.ascontiguousarray(w_t.T, dtype=np.float32),
        frozenset(used),
        embedder.model_name,
        query_prefix,
        len(kept),
        float(ridge),
    )
