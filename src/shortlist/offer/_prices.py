"""What an offer costs: cache prices and the rules the offer policies weigh with them.

Providers cache prompts by prefix, tools first: a change to the tools block re-bills the
system prompt and history behind it at the cache-write price. :class:`Prices` holds the
write and read multipliers and answers the two questions ``stable`` asks (is changing the
block worth the search it saves; is carrying the whole catalog cheaper than the changes
narrowing will force); :func:`widened` applies the second to a block. Definitions are
weighed with :func:`shortlist._tokens.definition_tokens` (the estimate), so a decision never
waits for a tokenizer.

:data:`PRICE_PRESETS` is the one home of the providers' cache rules (write and read multipliers,
minimum cacheable prefix; ``docs/caching.md`` has the sources): ``shortlist eval --prices NAME``
and :meth:`Prices.preset` read them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from shortlist._tokens import definition_tokens
from shortlist._types import Candidate
from shortlist.errors import ConfigError

__all__ = ["MISS_RATE", "PRICE_PRESETS", "ROUND_TRIP_TOKENS", "Prices", "widened"]

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
        min_prefix: the provider's minimum cacheable prefix in tokens: a prompt shorter than
            this is neither written nor read (billed at the base price, 1x), and a cached
            prefix shorter than it is not read (0: every prefix is cached, the default).
        name: the preset these prices come from (:data:`PRICE_PRESETS`), ``""`` when custom.
    """

    cache_write: float = 1.25
    cache_read: float = 0.1
    min_prefix: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        for field, value in (("cache_write", self.cache_write), ("cache_read", self.cache_read)):
            if not math.isfinite(value) or value < 0:  # NaN compares False with everything
                raise ConfigError(f"cache prices must be finite and non-negative, not {field}={value}")
        if isinstance(self.min_prefix, bool) or not isinstance(self.min_prefix, int) or self.min_prefix < 0:
            raise ConfigError(f"min_prefix must be a non-negative whole number of tokens, not {self.min_prefix!r}")

    @classmethod
    def preset(cls, name: str) -> Prices:
        """The prices of a provider preset (:data:`PRICE_PRESETS`).

        Raises:
            ConfigError: an unknown preset name (the message lists the known ones).
        """
        try:
            return PRICE_PRESETS[name]
        except KeyError:
            raise ConfigError(f"unknown price preset {name!r}; choose from {', '.join(PRICE_PRESETS)}") from None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (what a report records as its prices)."""
        return {
            "preset": self.name or None,
            "cache_write": self.cache_write,
            "cache_read": self.cache_read,
            "min_prefix": self.min_prefix,
        }

    def call(self, prompt_tokens: int, cached_tokens: int) -> float:
        """The cost of one model call whose first ``cached_tokens`` were read from the cache.

        Below :attr:`min_prefix` nothing is cached: a short prompt costs the base price, and a
        short cached prefix is written again rather than read.
        """
        if prompt_tokens < self.min_prefix:
            return float(prompt_tokens)
        cached = min(cached_tokens, prompt_tokens)
        if cached < self.min_prefix:
            cached = 0
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


#: The providers' cache rules (``docs/caching.md``, "Price presets"; late-2026 list prices):
#: Anthropic's 5-minute and 1-hour cache (writes 1.25x / 2x, reads 0.1x, 1,024 tokens on the
#: common models: 512-4,096 by model), OpenAI from GPT-5.6 (writes 1.25x, reads 0.1x, 1,024),
#: OpenAI before it (writes free, i.e. billed at the base price; reads up to 0.1x, 1,024) and
#: Gemini's implicit cache (writes at the base price, reads 0.1x on 2.5 and later, 1,024 on
#: Flash: 4,096 on Pro).
PRICE_PRESETS: dict[str, Prices] = {
    "anthropic-5m": Prices(1.25, 0.1, 1024, "anthropic-5m"),
    "anthropic-1h": Prices(2.0, 0.1, 1024, "anthropic-1h"),
    "openai-gpt-5.6": Prices(1.25, 0.1, 1024, "openai-gpt-5.6"),
    "openai-legacy": Prices(1.0, 0.1, 1024, "openai-legacy"),
    "gemini-implicit": Prices(1.0, 0.1, 1024, "gemini-implicit"),
}


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
