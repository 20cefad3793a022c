"""What an offer costs: cache prices and the rules the offer policies weigh with them.

Providers cache prompts by prefix, tools first: a change to the tools block re-bills the
system prompt and history behind it at the cache-write price. :class:`Prices` holds the
write and read multipliers and answers the two questions ``stable`` asks (is changing the
block worth the search it saves; is carrying the whole catalog cheaper than the changes
narrowing will force); :func:`widened` applies the second to a block. Definitions are
weighed with :func:`shortlist.tokens.definition_tokens` (the estimate), so a decision never
waits for a tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from shortlist.errors import ConfigError
from shortlist.tokens import definition_tokens
from shortlist.types import Candidate

__all__ = ["MISS_RATE", "ROUND_TRIP_TOKENS", "Prices", "widened"]

#: ``stable``'s prior for the share of turns whose tools a narrowed block misses (each miss
#: forces a change). Per-turn narrowing at k = 5 missed a needed tool on 28% of the turns of
#: the conversation set; a host with a feedback log can measure its own.
MISS_RATE = 0.3

#: Tokens a search round trip writes besides the prefix: the call, its result, the definitions.
ROUND_TRIP_TOKENS = 600


@dataclass(frozen=True, slots=True)
class Prices:
    """Input-token prices relative to the base input price (Anthropic's published defaults).

    Args:
        cache_write: a token written to the prompt cache (Anthropic: 1.25x).
        cache_read: a token read from the prompt cache (Anthropic: 0.1x).
    """

    cache_write: float = 1.25
    cache_read: float = 0.1

    def __post_init__(self) -> None:
        for field, value in (("cache_write", self.cache_write), ("cache_read", self.cache_read)):
            if not math.isfinite(value) or value < 0:  # NaN compares False with everything
                raise ConfigError(f"cache prices must be finite and non-negative, not {field}={value}")

    def call(self, prompt_tokens: int, cached_tokens: int) -> float:
        """The cost of one model call whose first ``cached_tokens`` were read from the cache."""
        cached = min(cached_tokens, prompt_tokens)
        return cached * self.cache_read + (prompt_tokens - cached) * self.cache_write

    def carrying(self, tokens: int, calls: int) -> float:
        """The cost of ``tokens`` of tools block kept for ``calls`` calls: written once, then read."""
        return tokens * (self.cache_write + self.cache_read * max(calls - 1, 0))

    def worth_widening(self, prefix_tokens: int, *, extra_tokens: int, calls: int, miss_rate: float) -> bool:
        """True when offering ``extra_tokens`` more definitions for ``calls`` calls costs less than
        the re-writes of the ``prefix_tokens`` behind the block that narrowing is expected to
        force (a miss on ``miss_rate`` of those calls, each one a change)."""
        rewrites = miss_rate * calls
        return rewrites * prefix_tokens * (self.cache_write - self.cache_read) > self.carrying(extra_tokens, calls)

    def worth_changing(self, prefix_tokens: int, *, p_needed: float, round_trip_tokens: int) -> bool:
        """True when changing the tools block costs less than the search it is expected to save.

        Changing re-writes the whole cached prefix behind the tools block; not changing costs,
        with probability ``p_needed``, a search round trip: one more call that reads the prefix
        from the cache and writes ``round_trip_tokens`` of its own.
        """
        rewrite = prefix_tokens * (self.cache_write - self.cache_read)
        search = p_needed * (prefix_tokens * self.cache_read + round_trip_tokens * self.cache_write)
        return search > rewrite


def widened(
    block: tuple[str, ...],
    eligible: Sequence[Candidate],
    reason: str,
    prefix_tokens: int,
    prices: Prices,
    horizon: int,
) -> tuple[tuple[str, ...], str]:
    """``block``, or the whole catalog when carrying it is cheaper than the changes narrowing would force."""
    inside = set(block)
    rest = [c for c in eligible if c.id not in inside]
    extra = sum(definition_tokens(c) for c in rest)
    if rest and prices.worth_widening(prefix_tokens, extra_tokens=extra, calls=horizon, miss_rate=MISS_RATE):
        return block + tuple(c.id for c in rest), "whole_catalog_cheaper"
    return block, reason
