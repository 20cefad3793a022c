"""Which generated requests read as requests for their tool: the rest are dropped before they are stored.

A model asked for example requests can answer with text that is not a user's request for the
tool at all, because a tool's description steered it (an injection in third-party text) or
because it drifted. Such text would become a usage example of the tool and feed its ranking.
Two cheap, offline rules decide, both structural rather than a list of bad requests:

* **It names another tool of the catalog.** The prompt asks for requests that do not name the
  tool; a request that names a *different* tool of the catalog ("... and call delete_all") is a
  request for that tool, or an attempt to steer the model towards it. Names are found as the
  rankers find them (:func:`shortlist.rankers._scale.named_tools`): an identifier of two or more
  words wherever it occurs (``delete_all``, ``getWeather``), a one-word or spaced name only when
  cued (``use search``, ``the calculator tool``, in backticks), so prose that happens to contain a
  tool's words ("a word cloud") is not a mention.
* **It addresses the assistant's instructions instead of asking for a task**: it tells the
  assistant to ignore, disregard, forget, override or bypass its instructions, prompt, rules or
  guidelines; it mentions the system or developer prompt or message, or the previous (prior,
  above, original, hidden...) instructions; or it reassigns the assistant's role ("you are now",
  "from now on you"). A user of a tool asks for something done in the world; a request about the
  assistant's own instructions is not an example of any tool's use.

A lexical-relevance rule (drop a request whose tool ranks below k among the catalog by BM25)
was measured and not adopted: on MetaTool's 18,261 human-checked training requests, 21% share
no term with their tool's description and 1.2% rank below 50 of 199 tools, so it would drop
genuine requests by the hundred. The two rules above drop 5 of them (0.03%) (``docs/enrichment.md``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from shortlist._types import Candidate
from shortlist.rankers._scale import NameIndex, named_tools

__all__ = ["NAMES_OTHER_TOOL", "OFF_TASK", "RequestScreen"]

#: The reason given for a request that names another tool of the catalog.
NAMES_OTHER_TOOL = "names_other_tool"
#: The reason given for a request that addresses the assistant's instructions.
OFF_TASK = "addresses_instructions"

_INSTRUCTIONS = (
    r"(?:instructions?|prompts?|rules|guidelines|directives|guardrails|restrictions|safeguards|"
    r"constraints|programming|policy|policies|context)"
)
_META = re.compile(
    "|".join(
        (
            # an override verb whose object (within five words) is the assistant's instructions
            rf"\b(?:ignore|disregard|forget|override|bypass)\b(?:\W+\w+){{0,5}}?\W+{_INSTRUCTIONS}\b",
            # the assistant's configuration, named
            r"\b(?:system|developer)\s+(?:prompt|message|instructions?)\b",
            r"\b(?:previous|prior|above|earlier|preceding|original|initial|hidden)\s+instructions\b",
            # a new role for the assistant
            r"\byou\s+are\s+now\b",
            r"\bfrom\s+now\s+on,?\s+you\b",
        )
    ),
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RequestScreen:
    """The rules above, for one catalog (its names indexed once).

    Args:
        catalog: every tool of the run: a request naming any of them but its own is dropped.
    """

    catalog: tuple[Candidate, ...]
    _names: NameIndex
    _index_of: dict[str, int]

    @classmethod
    def build(cls, catalog: Sequence[Candidate]) -> RequestScreen:
        """Index ``catalog``'s names."""
        cands = tuple(catalog)
        return cls(cands, NameIndex.build(cands), {c.id: i for i, c in enumerate(cands)})

    def reason(self, request: str, tool: Candidate) -> str | None:
        """Why ``request`` does not read as a request for ``tool`` (:data:`OFF_TASK`,
        :data:`NAMES_OTHER_TOOL`), or None when it does."""
        if _META.search(request):
            return OFF_TASK
        own = self._index_of.get(tool.id)
        named = named_tools(request, self._names)
        if any(i != own and self.catalog[i].id != tool.id for i in named):
            return NAMES_OTHER_TOOL
        return None

    def split(self, requests: Sequence[str], tool: Candidate) -> tuple[list[str], dict[str, int]]:
        """``requests`` kept for ``tool``, and how many were dropped for each reason."""
        kept: list[str] = []
        dropped: dict[str, int] = {}
        for r in requests:
            why = self.reason(r, tool)
            if why is None:
                kept.append(r)
            else:
                dropped[why] = dropped.get(why, 0) + 1
        return kept, dropped
