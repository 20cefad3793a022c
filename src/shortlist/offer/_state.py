"""A conversation's offer state and one turn's offer: small JSON-ready values, and the events of a change.

:class:`OfferState` is all an offer decision needs from earlier turns, so a client can carry it
between requests and any replica of the service decides the same; :class:`Offer` is one turn's
decision. :func:`repaired` drops the tools a catalog no longer holds (with an event), so a catalog
that changed between turns never breaks a conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from shortlist._events import Event, EventHook, emit
from shortlist._types import TurnSelection
from shortlist.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from shortlist.selection._facade import Shortlist

__all__ = [
    "MAX_STATE_COUNT",
    "Offer",
    "OfferChanged",
    "OfferState",
    "OfferStateRepaired",
    "binding_hooks",
    "bump",
    "repaired",
]

#: The largest ``turns`` / ``changes`` a state may carry: the counters stop there, so every
#: answer is a state the next request accepts (``POST /v1/offer`` refuses more).
MAX_STATE_COUNT = 1_000_000_000


def bump(count: int, by: int = 1) -> int:
    """``count + by``, saturating at :data:`MAX_STATE_COUNT`."""
    return min(MAX_STATE_COUNT, count + by)


@dataclass(frozen=True, kw_only=True)
class OfferChanged(Event):
    """A conversation's tools block changed (re-billing the cached prefix behind it), and why."""

    name: ClassVar[str] = "selection.offer_changed"
    area: ClassVar[str] = "selection"
    level: int = logging.INFO
    policy: str = ""
    reason: str = ""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    prefix_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class OfferStateRepaired(Event):
    """An offer state named tools the catalog no longer holds; they were dropped (the turn goes on)."""

    name: ClassVar[str] = "selection.offer_state_repaired"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OfferState:
    """What a conversation has been offered and has called: all the offer decision needs.

    JSON-ready (:meth:`to_dict` / :meth:`from_dict`), so a client can carry it between turns
    and any replica of the service decides the same.

    Attributes:
        block: the ids in the tools block (the cached prefix), in order.
        loaded: ids whose definitions entered the history through a search (deferred), in order.
        called: ids the model called in this conversation, oldest first, without repeats.
        turns: turns decided so far.
        changes: times the tools block changed after the first turn.
    """

    block: tuple[str, ...] = ()
    loaded: tuple[str, ...] = ()
    called: tuple[str, ...] = ()
    turns: int = 0
    changes: int = 0

    @property
    def available(self) -> tuple[str, ...]:
        """Every id the model can call now: the block, then what searches loaded."""
        seen = set(self.block)
        return self.block + tuple(i for i in self.loaded if i not in seen)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "block": list(self.block),
            "loaded": list(self.loaded),
            "called": list(self.called),
            "turns": self.turns,
            "changes": self.changes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OfferState:
        """Read the JSON form (missing keys take their defaults; a repeated id is kept once).

        Raises:
            ConfigError: a field of the wrong type, or a count above :data:`MAX_STATE_COUNT`.
        """
        if not data:
            return cls()
        try:
            return cls(
                block=_ids(data.get("block", ())),
                loaded=_ids(data.get("loaded", ())),
                called=_ids(data.get("called", ())),
                turns=_count(data.get("turns", 0)),
                changes=_count(data.get("changes", 0)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"invalid offer state: {exc}") from None


def _ids(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError("ids must be a list of strings")
    out = tuple(dict.fromkeys(value))  # a repeated id is read once
    if not all(isinstance(i, str) for i in out):
        raise TypeError("ids must be a list of strings")
    return out


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError("counts must be non-negative integers")
    if value > MAX_STATE_COUNT:
        raise UsageError(f"counts must be at most {MAX_STATE_COUNT:,}")
    return value


@dataclass(frozen=True, slots=True)
class Offer:
    """One turn's offer.

    Attributes:
        policy: the policy that decided it.
        block: the ids in the tools block this turn, in order (pins included).
        loaded: ids already loaded into the history by earlier searches (deferred).
        deferred: ids the model can reach only through the search tool this turn.
        search_tool: whether the search tool (:data:`~shortlist.offer.SEARCH_TOOL_NAME`) is offered.
        changed: the tools block differs from the previous turn's (False on the first turn).
        reason: why the block is what it is (``first_turn``, ``unchanged``, ``narrowed``,
            ``fallback:<reason>``, ``worth_changing``).
        selection: this turn's narrowing (None when the policy kept the block without ranking).
        prefetched: ids loaded into the history before this turn's call (``deferred``): the
            ranking's likely tools, then the co-usage companions.
        companions: the ids of ``prefetched`` loaded because they are usually called with the
            likely ones (:class:`~shortlist.selection._cousage.CoUsage`), not for their rank.
        state: the state after this turn's decision (send it back with the next turn).
    """

    policy: str
    block: tuple[str, ...]
    loaded: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    search_tool: bool = False
    changed: bool = False
    reason: str = ""
    selection: TurnSelection | None = None
    prefetched: tuple[str, ...] = ()
    companions: tuple[str, ...] = ()
    state: OfferState = field(default_factory=OfferState)

    @property
    def available(self) -> tuple[str, ...]:
        """Every id the model can call this turn without searching."""
        return self.state.available

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used by the CLI and the HTTP API."""
        return {
            "policy": self.policy,
            "block": list(self.block),
            "loaded": list(self.loaded),
            "deferred": list(self.deferred),
            "search_tool": self.search_tool,
            "changed": self.changed,
            "reason": self.reason,
            "selection": self.selection.to_dict() if self.selection is not None else None,
            "prefetched": list(self.prefetched),
            "companions": list(self.companions),
            "state": self.state.to_dict(),
        }


def binding_hooks(shortlist: Shortlist, extra: Sequence[EventHook]) -> tuple[EventHook, ...]:
    """The binding's own hooks (its ``on_event``) and this call's."""
    return (*shortlist.hooks, *extra)


def repaired(
    shortlist: Shortlist, state: OfferState, eligible_ids: AbstractSet[str], hooks: Sequence[EventHook]
) -> OfferState:
    """``state`` without the tools the catalog no longer holds (a catalog may change between turns)."""
    dropped = tuple(dict.fromkeys(i for i in (*state.block, *state.loaded) if i not in eligible_ids))
    if not dropped:
        return state
    emit(OfferStateRepaired(dropped=dropped), hooks=binding_hooks(shortlist, hooks))
    return replace(
        state,
        block=tuple(i for i in state.block if i in eligible_ids),
        loaded=tuple(i for i in state.loaded if i in eligible_ids),
    )
