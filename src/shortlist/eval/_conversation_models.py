"""How a conversation replay prices and plays its calls: the cost model (what one call's prompt holds
and how it is billed) and the simulated model (what it searches with, what it misses, what a miss
costs). Re-exported by :mod:`shortlist.eval._conversations`.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from shortlist.errors import ConfigError
from shortlist.offer import (
    Prices,
)
from shortlist.runtime._context import DEFAULT_LOW_WATER, GROUNDING_PLACEMENTS

__all__ = ["MISS_COSTS", "SEARCH_QUERIES", "CostModel", "Simulation", "name_words"]

#: What the simulated model searches with (``--search-query``): ``words:N`` is the first N words.
SEARCH_QUERIES: tuple[str, ...] = ("message", "words:N", "name")
#: What a turn whose tools never became callable is charged (``--miss-cost``).
MISS_COSTS: tuple[str, ...] = ("call", "retry")


@dataclass(frozen=True, slots=True)
class CostModel:
    """What one call's prompt holds and how it is billed (see the module docs).

    Args:
        prices: cache write/read multipliers of the base input price (and minimum cacheable prefix).
        system_tokens: the system prompt's size.
        result_tokens: the placeholder result of one tool call.
        grounding_tokens: grounding passages retrieved every turn (0: none).
        memory_tokens: ambient memories retrieved every turn (0: none).
        placement: where a turn's grounding and memories go: ``history`` (appended with the
            turn) or ``system`` (rendered into the system prompt, which changes every turn).
        history_budget: the history's budget in tokens (prior history included); None: never reduced.
        low_water: the share of ``history_budget`` a reduction brings the history down to.

    Raises:
        ConfigError: a negative size, an unknown placement, a non-positive budget or a
            ``low_water`` outside (0, 1].
    """

    prices: Prices = field(default_factory=Prices)
    system_tokens: int = 400
    result_tokens: int = 10
    grounding_tokens: int = 0
    memory_tokens: int = 0
    placement: str = "history"
    history_budget: int | None = None
    low_water: float = DEFAULT_LOW_WATER

    def __post_init__(self) -> None:
        for label, value in (
            ("system tokens", self.system_tokens),
            ("result tokens", self.result_tokens),
            ("grounding tokens", self.grounding_tokens),
            ("memory tokens", self.memory_tokens),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{label} must be a whole number >= 0, not {value!r}")
        if self.placement not in GROUNDING_PLACEMENTS:
            raise ConfigError(f"placement must be one of {', '.join(GROUNDING_PLACEMENTS)}, not {self.placement!r}")
        budget = self.history_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ConfigError(f"history budget must be a positive number of tokens, not {budget!r}")
        if not isinstance(self.low_water, int | float) or not 0 < self.low_water <= 1:
            raise ConfigError(f"low water must be a share of the history budget in (0, 1], not {self.low_water!r}")

    @property
    def context_tokens(self) -> int:
        """Grounding and memory tokens a turn adds."""
        return self.grounding_tokens + self.memory_tokens

    def context_json(self) -> dict[str, Any] | None:
        """What the report records of the rest of the prompt; None when every option is off."""
        if not self.context_tokens and self.history_budget is None:
            return None
        return {
            "grounding_tokens": self.grounding_tokens,
            "memory_tokens": self.memory_tokens,
            "placement": self.placement,
            "history_budget": self.history_budget,
            "low_water": self.low_water,
        }


_WORDS = re.compile(r"^words:(\d+)$")


def name_words(name: str) -> str:
    """A tool name as the words a model would search with: ``Search_Car_Location`` -> ``search car location``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return " ".join(w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w)


@dataclass(frozen=True, slots=True)
class Simulation:
    """How the simulated model behaves; the defaults are the obliging model of the first replays.

    Args:
        search_query: what a ``find_tools`` call asks for: ``message`` (the user's whole
            message), ``words:N`` (its first N words) or ``name`` (the missing tool's name split
            into words; on a spurious search, the turn's first tool's, else the message).
        miss_rate: the chance that a tool the turn needs and cannot call goes unnoticed: the
            model does not search for it (drawn per conversation, turn and tool).
        spurious_rate: the chance of one search on a turn whose tools are all callable (drawn
            per conversation and turn).
        seed: seeds the draws. Each draw depends only on the seed, the conversation, the turn
            (and the tool), so every strategy and history size meets the same model.
        miss_cost: what a turn whose tools never all became callable is charged: ``call`` (the
            model call that answers it, as for any turn) or ``retry`` (that call, then the
            missing definitions loaded into the history and the turn answered again: one more
            call, the least a recovery costs).

    Raises:
        ConfigError: a value out of range or an unknown mode.
    """

    search_query: str = "message"
    miss_rate: float = 0.0
    spurious_rate: float = 0.0
    seed: int = 0
    miss_cost: str = "call"

    def __post_init__(self) -> None:
        if self.search_query not in ("message", "name"):
            m = _WORDS.match(self.search_query)
            if not m or int(m.group(1)) < 1:
                raise ConfigError(f"search query must be message, words:N (N >= 1) or name, not {self.search_query!r}")
        for label, rate in (("miss rate", self.miss_rate), ("spurious rate", self.spurious_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"{label} must be between 0 and 1, got {rate}")
        if self.miss_cost not in MISS_COSTS:
            raise ConfigError(f"miss cost must be one of {', '.join(MISS_COSTS)}, not {self.miss_cost!r}")

    def query(self, user: str, tool: str | None) -> str:
        """The search query for ``tool`` (the missing tool, or None) on a turn whose message is ``user``."""
        m = _WORDS.match(self.search_query)
        if m:
            return " ".join(user.split()[: int(m.group(1))])
        if self.search_query == "name" and tool:
            return name_words(tool)
        return user

    def _draw(self, *key: str) -> float:
        return random.Random(json.dumps([self.seed, *key])).random()

    def unnoticed(self, cid: str, turn: int, tool: str) -> bool:
        """Whether the model fails to notice that it needs ``tool`` on this turn."""
        return self.miss_rate > 0 and self._draw("miss", cid, str(turn), tool) < self.miss_rate

    def spurious(self, cid: str, turn: int) -> bool:
        """Whether the model searches on this turn although it can call every tool it needs."""
        return self.spurious_rate > 0 and self._draw("spurious", cid, str(turn)) < self.spurious_rate

    def to_json(self) -> dict[str, Any]:
        """The settings, as the report records them (``simulation``)."""
        return {
            "search_query": self.search_query,
            "miss_rate": self.miss_rate,
            "spurious_rate": self.spurious_rate,
            "seed": self.seed,
            "miss_cost": self.miss_cost,
        }
