"""Co-usage: tools that are called together, learned from what models really called.

Some tools are needed without being named: ``startEngine`` needs ``pressBrakePedal`` first,
``mv`` inside a folder needs ``cd``. No ranking of the user's words finds them, but the
feedback log does: :class:`CoUsage` counts, over the turns it observes (the tools of one
turn, used together), how often each pair appears, and proposes a tool's *companions*:
those seen with it in at least ``min_ratio`` of its turns, at least ``min_count`` times.
It learns online (:meth:`CoUsage.observe`, called as a conversation records its calls); a
feedback log's counts are :meth:`~shortlist.feedback.FeedbackStore.co_usage`, which a
conversation's table is layered on (``base``).
Thread-safe: one instance may be shared by every conversation of a pack.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence

from shortlist.errors import UsageError

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

    A table can be layered on a ``base`` (a log's counts, shared by every conversation): it reads
    the base's counts plus its own and teaches only its own, so a conversation learns on top of a
    deployment's log without copying or changing it. A ``frozen`` table cannot be taught: a shared
    base raises in :meth:`observe` instead of changing every conversation's counts.

    Args:
        min_count: the fewest turns a pair must share before one proposes the other.
        min_ratio: the share of a tool's turns that must include the companion.
        limit: the most companions proposed for one call of :meth:`companions`.
        base: counts read under this table's own (this table's options apply to the sums).
        frozen: refuse :meth:`observe`.
    """

    def __init__(
        self,
        *,
        min_count: int = DEFAULT_MIN_COUNT,
        min_ratio: float = DEFAULT_MIN_RATIO,
        limit: int = 3,
        base: CoUsage | None = None,
        frozen: bool = False,
    ) -> None:
        if min_count < 1 or not 0 < min_ratio <= 1 or limit < 0:
            raise UsageError("CoUsage needs min_count >= 1, 0 < min_ratio <= 1 and limit >= 0")
        self.min_count = min_count
        self.min_ratio = min_ratio
        self.limit = limit
        self.base = base
        self.frozen = frozen
        self._single: Counter[str] = Counter()
        # each tool's companions and the turns they shared, both ways (a pair is kept under each tool)
        self._pairs: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    @property
    def turns(self) -> int:
        """How many tool uses were observed (a tool counted once per turn), the base's included."""
        with self._lock:
            own = sum(self._single.values())
        return own + (self.base.turns if self.base is not None else 0)

    def observe(self, used: Iterable[str]) -> None:
        """Record that the tools in ``used`` were called in one turn.

        Raises:
            UsageError: the table is frozen (a shared base: teach a table layered on it).
        """
        if self.frozen:
            raise UsageError("this co-usage table is shared and frozen: teach CoUsage(base=table) instead")
        self._count(used)

    def _count(self, used: Iterable[str]) -> None:
        """Count one turn's tools (frozen or not: the feedback log folds its new turns into its table)."""
        ids = sorted(set(used))
        with self._lock:
            self._single.update(ids)
            for i, a in enumerate(ids):
                for b in ids[i + 1 :]:
                    self._pairs.setdefault(a, Counter())[b] += 1
                    self._pairs.setdefault(b, Counter())[a] += 1

    def observe_all(self, turns: Iterable[Iterable[str]]) -> CoUsage:
        """Record many turns (e.g. a feedback log's used ids, or examples' gold sets); return self."""
        for used in turns:
            self.observe(used)
        return self

    def _counts(self, tool: str) -> tuple[int, Counter[str]]:
        """``tool``'s turns and its companions' shared turns: the base's and this table's summed."""
        with self._lock:
            single = self._single[tool]
            pairs = Counter(self._pairs.get(tool, {}))
        if self.base is not None:
            base_single, base_pairs = self.base._counts(tool)
            single += base_single
            pairs.update(base_pairs)
        return single, pairs

    def companions(self, ids: Sequence[str], *, exclude: Iterable[str] = ()) -> list[str]:
        """The tools usually called with ``ids``, strongest first, not in ``ids`` or ``exclude``."""
        if self.limit == 0 or not ids:
            return []
        skip = set(ids) | set(exclude)
        scores: dict[str, float] = {}
        for src in dict.fromkeys(ids):
            single, pairs = self._counts(src)
            for dst, n in pairs.items():
                if n < self.min_count or dst in skip:
                    continue
                ratio = n / single
                if ratio >= self.min_ratio:
                    scores[dst] = max(scores.get(dst, 0.0), ratio)
        return sorted(scores, key=lambda d: (-scores[d], d))[: self.limit]
