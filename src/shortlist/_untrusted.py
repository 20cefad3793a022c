"""Untrusted text placed inside a prompt's delimiters: the one function that neutralises it.

Memories and retrieved passages (``<memories>``, ``<grounding>``), a judge's request and
candidates (``<request>``, ``<candidates>``) and third-party tool definitions (``<tool>``) are
data written by someone else. :func:`fence_line` makes one such text a single line that cannot
open or close any delimiter around it, by structure rather than by a list of look-alikes:

1. characters that render as nothing are dropped: every format character (Unicode category
   ``Cf``: zero-width spaces and joiners, bidi controls, tag characters U+E0000-E007F,
   U+FFF9-FFFB, ...) and every other default-ignorable code point (the Unicode property
   ``Default_Ignorable_Code_Point``: variation selectors, Mongolian free variation selectors,
   Hangul fillers, ...); control characters and blanks (whitespace, U+2800 BRAILLE PATTERN
   BLANK) become one space, so the text is one line;
2. a line whose compatibility folding (NFKC) makes a ``<`` (full-width ``＜``, small ``﹤``) is
   folded, so what a reader sees as a bracket is one;
3. every ``<`` is escaped (``&lt;``), and so is every character Unicode names a left-pointing
   angle or arrowhead (``‹``, ``˂``, ``〈``, ``⟨``: as ``&#x2039;``...): a tag can only begin
   with a bracket, and no bracket is left. A homoglyph inside a tag name (``</mеmories>`` with a
   Cyrillic ``е``) is harmless for the same reason: its ``<`` is escaped.

Everything else keeps its characters (``東京の住所は１２３`` stays full-width).
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["fence_line"]

#: ``Default_Ignorable_Code_Point`` (Unicode DerivedCoreProperties) outside category Cf.
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
#: Blanks that are not whitespace to :meth:`str.split`.
_BLANK = "\u2800"
#: Names of characters drawn as an opening angle bracket (``‹ ˂ 〈 ⟨ « ❮``, ``＜ ﹤``).
_LEFT_BRACKET_NAME = re.compile(r"\bLEFT\b.*\b(?:ANGLE|ARROWHEAD)\b|\b(?:ANGLE|ARROWHEAD)\b.*\bLEFT\b|LESS-THAN SIGN")
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@functools.lru_cache(maxsize=4096)
def _kind(char: str) -> str:
    """``drop`` (renders as nothing), ``space`` (a control or a blank), ``bracket`` (may open a tag) or ``keep``."""
    category = unicodedata.category(char)
    if category == "Cf" or category == "Cs" or _IGNORABLE.match(char):
        return "drop"
    if category == "Cc" or char == _BLANK or char.isspace():
        return "space"
    if char == "<" or _LEFT_BRACKET_NAME.search(unicodedata.name(char, "")):
        return "bracket"
    return "keep"


def _plain(text: str) -> str:
    """``text`` without invisible characters, its controls and blanks made single spaces, on one line."""
    table: dict[int, str | None] = {}
    for char in set(text):  # each distinct character looked at once
        if char.isalnum() or (char.isascii() and char.isprintable()):
            continue
        kind = _kind(char)
        if kind == "drop":
            table[ord(char)] = None
        elif kind == "space":
            table[ord(char)] = " "
    return " ".join((text.translate(table) if table else text).split())


def _escape(char: str) -> str:
    return "&lt;" if char == "<" else f"&#x{ord(char):X};"


def fence_line(text: str, limit: int | None = None) -> str:
    """``text`` as one line of data that cannot open or close a delimiter (see the module's rules).

    Args:
        text: untrusted text (a memory, a passage, a tool's description, a request).
        limit: the most characters kept (the last one then ``…``), counted after escaping; None: all.
    """
    if text.isascii():  # the common case, without a look at each character
        return _cut(" ".join(_ASCII_CONTROL.sub(" ", text).split()).replace("<", "&lt;"), limit)
    line = _plain(text)
    folded = unicodedata.normalize("NFKC", line)
    if folded.count("<") > line.count("<"):
        line = _plain(folded)
    brackets = {ord(c): _escape(c) for c in set(line) if not c.isalnum() and _kind(c) == "bracket"}
    return _cut(line.translate(brackets) if brackets else line, limit)


def _cut(line: str, limit: int | None) -> str:
    return line if limit is None or len(line) <= limit else line[: max(0, limit - 1)] + "…"
