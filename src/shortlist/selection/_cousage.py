"""Co-usage: tools that are called together, learned from what models really called.

Some tools are needed without being named: ``startEngine`` needs ``pressBrakePedal`` first,
``mv`` inside a folder needs ``cd``. No ranking of the user's words finds them, but the
feedback log does: :class:`CoUsage` counts, over the turns it observes (the tools of one
turn, used together), how often each pair appears, and proposes a tool's *companions*:
those seen with it in at least ``min_ratio`` of its turns, at least ``min_count`` times.
It learns online (:meth:`CoUsage.observe`, called as a conversation records its calls) and
can be seeded from a :class:`~shortlist.feedback.FeedbackStore` or from usage examples.
Thread-safe: one instance may be shared by every conversation of a pack.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from shortlist.errors import UsageError

if TYPE_CHECKING:
    from shortlist.feedback import FeedbackStore

__all__ = ["DEFAULT_MIN_COUNT", "DEFAULT_MIN_RATIO", "CoUsage"]

#: The fewest turns a pair must share, and the share of a tool's turns its companion must be in,
#: before one proposes the other. Measured on the development conversations (docs/evaluation.md,
#: "At scale", fourth round): a conversation of four turns seldom repeats a pair, so a log that waits
#: for two sightings at half the turns learns its implicit steps (``pressBrakePedal`` before
#: ``startEngine``) too late; at 1 and 0.3 ``deferred`` completes more turns on both catalogs for
#: the same cost (1,004 tools, less obliging model: 0.911 -> 0.925).
DEFAULT_MIN_COUNT = 1
DEFAULT_MIN_RATIO = 0.3


class CoUsage:
    """Pair counts of tools used in the same turn.

    Args:
        min_count: the fewest turns a pair must share before one proposes the other.
        min_ratio: the share of a tool's turns that must include the companion.
        limit: the most companions proposed for one call of :meth:`companions`.
    """

    def __init__(
        self, *, min_count: int = DEFAULT_MIN_COUNT, min_ratio: float = DEFAULT_MIN_RATIO, limit: int = 3
    ) -> None:
        if min_count < 1 or not 0 < min_ratio <= 1 or limit < 0:
            raise UsageError("CoUsage needs min_count >= 1, 0 < min_ratio <= 1 and limit >= 0")
        self.min_count = min_count
        self.min_ratio = min_ratio
        self.limit = limit
        self._single: Counter[str] = Counter()
        self._pair: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    @property
    def turns(self) -> int:
        """How many tool uses were observed (a tool counted once per turn)."""
        return sum(self._single.values())

    def observe(self, used: Iterable[str]) -> None:
        """Record that the tools in ``used`` were called in one turn."""
        ids = sorted(set(used))
        with self._lock:
            self._single.update(ids)
            for i, a in enumerate(ids):
                for b in ids[i + 1 :]:
                    self._pair[(a, b)] += 1

    def observe_all(self, turns: Iterable[Iterable[str]]) -> CoUsage:
        """Record many turns (e.g. a feedback log's used ids, or examples' gold sets); return self."""
        for used in turns:
            self.observe(used)
        return self

    @classmethod
    def from_feedback(cls, store: FeedbackStore, *, kind: str = "tool", **options: int | float) -> CoUsage:
        """Counts seeded from every turn of a feedback log (``options``: as the constructor's)."""
        co = cls(**options)  # type: ignore[arg-type]
        return co.observe_all(store.used_sets(kind=kind))

    def companions(self, ids: Sequence[str], *, exclude: Iterable[str] = ()) -> list[str]:
        """The tools usually called with ``ids``, strongest first, not in ``ids`` or ``exclude``."""
        if self.limit == 0 or not ids:
            return []
        skip = set(ids) | set(exclude)
        scores: dict[str, float] = {}
        with self._lock:
            for (a, b), n in self._pair.items():
                if n < self.min_count:
                    continue
                for src, dst in ((a, b), (b, a)):
                    if src in ids and dst not in skip:
                        ratio = n / self._single[src]
                        if ratio >= self.min_ratio:
                            scores[dst] = max(scores.get(dst, 0.0), ratio)
        return sorted(scores, key=lambda d: (-scores[d], d))[: self.limit]
