"""An offline extractive summary of removed steps: the sentences that state facts, kept.

A reduction that drops or clears steps loses what they said. Without a model to summarise them
(the compressor needs one), this module keeps the sentences a later turn is most likely to ask
about: those that carry a *fact token* (a number of two digits or more, an id mixing letters and
digits such as ``T4821`` or ``2026-05-01``, an e-mail address, a quoted string, or a capitalised
name that does not open its sentence). Each kept sentence is clipped to a window of words
around its first fact token and attributed to who said it (``user``, ``assistant``, ``tool``).

:class:`FactSheet` accumulates the facts of successive reductions (deduplicated, oldest first;
over its cap the least telling go first: a short number before an id or a name, then the
oldest) and renders them as one text part the history carries at its start, so facts survive
any number of reductions: the sheet of the previous reduction is part of the next one's input,
never lost with the message that carried it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["FACTS_HEADER", "FactSheet", "extract_facts"]

#: The first line of the rendered sheet (how a sheet is recognised in the history).
FACTS_HEADER = (
    "[facts kept from earlier in this conversation: the messages that stated them were removed to keep "
    "the context small]"
)

_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_DIGITS = re.compile(r"\d")
_WORD_EDGE = ".,;:!?()[]{}<>"
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+\.[\w.]+$")
_NAME = re.compile(r"^[A-Z][a-z]+[A-Za-z'-]*$")
_QUOTED = re.compile(r"""^["'`][^"'`]+["'`]$""")
#: Words either side of a sentence's first fact token that a clipped sentence keeps.
WINDOW_WORDS = 12


def _weight(word: str, first: bool) -> int:
    """How much a word says as a fact: 3 an id or a long number, 2 an address, a quote or a
    name, 1 a short number (``12``), 0 nothing."""
    token = word.strip(_WORD_EDGE)
    if not token:
        return 0
    digits = len(_DIGITS.findall(token))
    if digits and (digits >= 4 or any(not c.isdigit() for c in token)):
        return 3  # T90412, 2026-05-01, v2.1, 48213
    if _EMAIL.match(token) or _QUOTED.match(token):
        return 2
    if digits >= 2:
        return 1
    return 2 if not first and _NAME.match(token) else 0


def _facts(text: str, window: int) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for sentence in _SENTENCES.split(text):
        words = sentence.split()
        weights = [_weight(w, i == 0 or words[i - 1].endswith(":")) for i, w in enumerate(words)]
        hit = next((i for i, w in enumerate(weights) if w), None)
        if hit is None:
            continue
        start, end = max(0, hit - window), min(len(words), hit + window + 1)
        clipped = " ".join(words[start:end])
        out.append((("… " if start else "") + clipped + (" …" if end < len(words) else ""), max(weights)))
    return out


def extract_facts(text: str, *, window: int = WINDOW_WORDS) -> list[str]:
    """The sentences of ``text`` that state a fact, each clipped to ``window`` words around it."""
    return [fact for fact, _ in _facts(text, window)]


@dataclass
class FactSheet:
    """The facts removed steps stated, kept across reductions.

    Args:
        count: the token (or character) measure the cap is in.
        max_size: the cap of the rendered sheet in that measure. Over it, the facts that say
            least go first (a sentence whose only fact is a short number before one with an id
            or a name), the oldest first among equals.
    """

    count: Callable[[str], int]
    max_size: int
    facts: list[str] = field(default_factory=list)
    _weights: dict[str, int] = field(default_factory=dict, repr=False)

    def add(self, said: Iterable[tuple[str, str]]) -> int:
        """Keep the facts of ``(role, text)`` pairs; return how many were new."""
        new = 0
        for role, text in said:
            for sentence, weight in _facts(text, WINDOW_WORDS):
                line = f"- {role}: {sentence}"
                if line not in self._weights:
                    self._weights[line] = weight
                    self.facts.append(line)
                    new += 1
        self.fit(self.max_size)
        return new

    def fit(self, size: int) -> None:
        """Drop facts (the least telling, then the oldest) until the rendered sheet measures at most ``size``."""
        while self.facts and self.count(self.render()) > size:
            least = min(range(len(self.facts)), key=lambda i: (self._weights.get(self.facts[i], 0), i))
            self._weights.pop(self.facts.pop(least), None)

    def clear(self) -> None:
        """Forget every fact (the history was replaced)."""
        self.facts.clear()
        self._weights.clear()

    def render(self) -> str:
        """The sheet as the text part the history carries ("" when empty)."""
        return "\n".join([FACTS_HEADER, *self.facts]) if self.facts else ""
