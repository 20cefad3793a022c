"""What the hybrid's scale levers know of one candidate list, kept for the last few lists: each tool's name
phrases, its server or suite, the servers' centroid vectors and the names embedded alone."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from shortlist._types import Candidate
from shortlist.rankers._recent import RecentIndexes
from shortlist.rankers._scale import GroupLayout, NameIndex, group_centroids, group_ids, name_words

__all__ = ["Structure", "StructureCache"]


@dataclass(frozen=True, slots=True)
class Structure:
    """What the scale levers know of one candidate list: its name phrases and its servers."""

    candidates: tuple[Candidate, ...]
    names: NameIndex
    groups: np.ndarray[Any, np.dtype[np.intp]] | None
    layout: GroupLayout | None
    centroids: np.ndarray[Any, np.dtype[np.float32]] | None  # one unit vector per group
    name_vectors: np.ndarray[Any, np.dtype[np.float32]] | None  # each candidate's name alone, embedded
    embedder: Any  # the embedder of the vectors (a new one rebuilds them)


class StructureCache:
    """The :class:`Structure` of the last ``slots`` candidate lists, most recent first (thread-safe:
    :class:`~shortlist.rankers._recent.RecentIndexes`).

    Args:
        slots: how many candidate lists to keep.
    """

    def __init__(self, slots: int = 4) -> None:
        self.slots = slots
        self._entries: RecentIndexes[Structure] = RecentIndexes(slots)

    def get(
        self, candidates: tuple[Candidate, ...], desc: Any, *, embedder: Any, server_centroid: float, name_vector: float
    ) -> Structure:
        """The structure of ``candidates`` (computed on a miss). ``embedder`` embeds the names alone when
        ``name_vector`` is on (None: no embedding); ``desc`` gives the servers' centroids when
        ``server_centroid`` is on."""

        def build(like: Structure | None) -> Structure:
            if like is not None:
                # The same list with other examples (a feedback log changed): nothing here reads them
                # (names, ids, servers, description vectors), so the entry is kept for the new objects.
                names = dataclasses.replace(like.names, candidates=candidates)
                return dataclasses.replace(like, candidates=candidates, names=names)
            groups = group_ids(candidates)
            centroids = group_centroids(desc, groups) if groups is not None and server_centroid > 0 else None
            name_vectors = None
            if embedder is not None and name_vector > 0:
                texts = [" ".join(name_words(c.name)) or c.name for c in candidates]
                name_vectors = np.ascontiguousarray(embedder.embed(texts), dtype=np.float32)
            layout = GroupLayout.of(groups) if groups is not None else None
            names = NameIndex.build(candidates)
            return Structure(candidates, names, groups, layout, centroids, name_vectors, embedder)

        return self._entries.get(candidates, build, accept=lambda entry: entry.embedder is embedder)
