"""Where a replay's loaded definitions went: called on their turn, on a later one, or never.

Every definition an offer loads into the history before a call (``deferred``'s prefetch) or a
search returns is written once and read by every later call, so the ones never called are what a
policy pays beyond the floor. :class:`LoadTally` labels each one *now* (the turn calls it),
*later* (a later turn of the conversation does) or *never*, by where it came from: the n-th tool a
turn's prefetch took from the ranking (``1``, ``2``, ...) or the n-th result of a search page, and
the co-usage ``companion`` of either. The report (``loads``) is how a user sees which knob their catalog pays
for: a prefetch slot called less often than about one time in five, or a search page whose last
results are never called (``docs/evaluation.md``, "Where the loaded definitions go").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shortlist.eval._conversation_cases import ConversationCase

__all__ = ["COMPANION", "LOADS_NOTE", "LoadRow", "LoadTally", "load_rows"]

#: The key of the prefetched tools that co-usage added (they are not ranked).
COMPANION = "companion"
#: What the loads table's rows mean (the text output and the HTML report print it under the table).
LOADS_NOTE = (
    "prefetch n: the n-th tool a turn's prefetch took from the ranking; search result n: the n-th\n"
    "of a page; companion: usually called with those; later: called on a later turn of the conversation"
)


@dataclass(slots=True)
class _Bucket:
    now: int = 0
    later: int = 0
    never: int = 0
    tokens: int = 0
    never_tokens: int = 0

    def add(self, label: str, tokens: int) -> None:
        setattr(self, label, getattr(self, label) + 1)
        self.tokens += tokens
        if label == "never":
            self.never_tokens += tokens

    def merge(self, other: _Bucket) -> None:
        for name in ("now", "later", "never", "tokens", "never_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, int]:
        return {
            "definitions": self.now + self.later + self.never,
            "now": self.now,
            "later": self.later,
            "never": self.never,
            "tokens": self.tokens,
            "never_tokens": self.never_tokens,
        }


@dataclass(slots=True)
class LoadTally:
    """Counts one replay pass's loaded definitions by source and outcome (see the module)."""

    prefetch: dict[str, _Bucket] = field(default_factory=dict)
    search: dict[str, _Bucket] = field(default_factory=dict)

    def loaded(
        self,
        part: Literal["prefetch", "search"],
        case: ConversationCase,
        index: int,
        ids: Sequence[str],
        companions: Sequence[str],
        tokens: Mapping[str, int],
    ) -> None:
        """Turn ``index`` of ``case`` loaded ``ids`` by a prefetch (in the ranking's order) or a search (in
        page order); ``companions`` of them came from co-usage (the last ones)."""
        table = self.prefetch if part == "prefetch" else self.search
        now = case.turns[index].gold
        later = frozenset().union(*(turn.gold for turn in case.turns[index + 1 :]))
        extra = set(companions)
        position = 0
        for tool in ids:
            if tool in extra:
                key = COMPANION
            else:
                position += 1
                key = str(position)
            label = "now" if tool in now else "later" if tool in later else "never"
            table.setdefault(key, _Bucket()).add(label, tokens.get(tool, 0))

    def to_json(self, conversations: int) -> dict[str, Any]:
        """``{"prefetch": {..., "by_slot": {...}}, "search": {..., "by_position": {...}}}``: each part's
        totals (``definitions``, ``now``, ``later``, ``never``, ``tokens``, ``never_tokens`` over the
        dataset, and ``never_tokens_per_conversation``) and the same per slot or page position."""
        out: dict[str, Any] = {}
        for part, table, by in (("prefetch", self.prefetch, "by_slot"), ("search", self.search, "by_position")):
            total = _Bucket()
            for bucket in table.values():
                total.merge(bucket)
            keys = sorted(table, key=lambda k: (k == COMPANION, int(k) if k.isdigit() else 0))
            out[part] = {
                **total.to_json(),
                "never_tokens_per_conversation": round(total.never_tokens / max(conversations, 1), 1),
                by: {k: table[k].to_json() for k in keys},
            }
        return out


@dataclass(frozen=True, slots=True)
class LoadRow:
    """One line of the loads table: where the definitions came from and what became of them."""

    source: str  # "prefetch 1", "prefetch companion", "search result 2", ...
    definitions: int
    now: int
    later: int
    never: int
    never_tokens_per_conversation: float

    @property
    def never_share(self) -> float | None:
        """The share of these definitions never called (None: there were none)."""
        return self.never / self.definitions if self.definitions else None


def load_rows(report: Mapping[str, Any]) -> tuple[str, list[LoadRow]] | None:
    """The default strategy's ``loads`` (else the first strategy's that has any) as table rows, with
    the strategy's name; None when no strategy loaded anything. The text output and the HTML
    report both print these."""
    rows = report.get("strategies", {})
    name = report.get("default") if rows.get(report.get("default"), {}).get("loads") else None
    name = name or next((n for n, m in rows.items() if m.get("loads")), None)
    if name is None:
        return None
    loads = rows[name]["loads"]
    conversations = max(int(report.get("conversations", 0)), 1)
    out: list[LoadRow] = []
    for part, by, label in (("prefetch", "by_slot", "prefetch"), ("search", "by_position", "search result")):
        for key, b in loads.get(part, {}).get(by, {}).items():
            out.append(
                LoadRow(
                    f"{label} {key}",
                    b["definitions"],
                    b["now"],
                    b["later"],
                    b["never"],
                    b["never_tokens"] / conversations,
                )
            )
    return (name, out) if out else None
