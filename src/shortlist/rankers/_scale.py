"""Ranking levers for large catalogs: tools named in the message, near-duplicates, servers.

Three pure pieces the hybrid ranker applies to its fused scores (``rankers/_hybrid.py``):

* **Named tools** (:func:`named_tools`). A message or search query that names a tool puts it
  first. A tool's *name phrases* are the word sequences of its name, of its id when different,
  and of its local name (after an ``mcp__server__``/``server__`` namespace or the last dot), each
  split as the ``tools`` analyser splits identifiers (case changes, ``_``, ``.``, ``-``, spaces,
  punctuation; lowercased), so ``get_weather``, ``getWeather``, ``Get-Weather`` and ``get
  weather`` are all ``("get", "weather")``. The query is split the same way, and:

  - a name of **two or more words written as one identifier** (``get_weather``, ``getWeather``,
    ``Get-Weather``, ``get.weather``: one token, all of it) names its tool wherever it occurs;
  - a name **spelled as separate words** (``get weather``) or a name of **one word** (``cat``,
    ``diff``, ``search``) is ordinary prose too often to be evidence alone ("set navigation",
    "exchange rate", "word cloud" and "search" occur in requests for other tools): it names its
    tool only when *cued*: written as code (in backticks, or followed by ``(``), next to a word
    that says a tool is meant (``use``, ``call``, ``run``, ``invoke``, ``execute`` before it;
    ``tool``, ``command``, ``function``, ``api``, ``plugin``, ``endpoint``, ``action``,
    ``method`` after it), or the whole query but stopwords (a ``find_tools`` search for
    ``cat``). A one-word name must also be one token (``Ad4Mat`` names ``ad4mat``, "me an" does
    not name ``mean``). Quotes are not a cue: "translate 'discount'" quotes content.

  A match inside a longer match is dropped (``get_weather_forecast`` named: ``get_weather`` is
  not). Named tools rank first, longer matches before shorter ones, then by their own scores.

* **Near-duplicates** (:func:`demote_duplicates`). Variants of one tool take one slot: within the
  ranking window, each one after the first is moved behind the distinct ones. Two tools are
  variants when their local names are the same words once version tokens (``v2``, ``1``) are
  dropped (:func:`variant_key`: ``read_file`` of two MCP servers, ``search_v2``) and their
  descriptions' cosine is at least ``cosine`` (0.85); with ``descriptions``, also when their
  descriptions are the same words and their names share at least half their words (NESTFUL's
  ``create_event`` and ``create_calendar_event``: two tools a dataset tells apart). A cosine
  alone is not enough: the tools embedder puts distinct tools at 0.99 (``gallon_to_liter`` and
  ``liter_to_gallon``, ``delete_slide`` and ``insert_blank_slide``). Without vectors (a search
  comparing what it found with what the model already has, :func:`same_tool`), the same name and
  at least half of the description terms shared stand for the cosine.

* **Servers** (:func:`group_ids`, :func:`server_scores`). A tool's server, suite or namespace
  (``metadata.server``/``suite``/``mcp_server``, an ``mcp__server__`` or ``server__`` prefix, a
  dotted prefix; not ``metadata.namespace``, which shortlist's adapters set to a kind such as
  ``"mcp"`` or ``"skill"``) is evidence: a server is scored by the mean of its ``top`` best tools' scores,
  and each tool gains ``weight`` times its server's score, so tools of the servers the message
  is about rise together. A tool with no server is its own server of one.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from shortlist._events import Event
from shortlist._text import analyser, stopword_list
from shortlist._types import Candidate, candidate_group

__all__ = [
    "CUES_AFTER",
    "CUES_BEFORE",
    "DuplicatesDemoted",
    "GroupLayout",
    "NameIndex",
    "ToolsNamed",
    "demote_duplicates",
    "group_centroids",
    "group_ids",
    "local_name",
    "name_words",
    "named_tools",
    "naming_queries",
    "same_tool",
    "server_scores",
    "spellings",
    "variant_key",
    "variants",
]

#: Words before a one-word name that say a tool is meant ("use cat", "run diff").
CUES_BEFORE = frozenset({"use", "call", "calling", "run", "running", "invoke", "execute"})
#: Words after a one-word name that say a tool is meant ("the cat command", "search tool").
CUES_AFTER = frozenset(
    {"tool", "tools", "command", "commands", "function", "api", "plugin", "endpoint", "action", "method"}
)
_WORDS = analyser("tools").words
_TERMS = analyser("tools").terms  # stemmed, stopwords dropped: "retrieves a project's" -> retriev, project
_VERSION = re.compile(r"^v?\d+$")
_STOP = stopword_list("en_plus")

_IntArray = npt.NDArray[np.intp]
_F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, kw_only=True)
class ToolsNamed(Event):
    """The message or search named tools; they were ranked first."""

    name: ClassVar[str] = "rankers.tools_named"
    area: ClassVar[str] = "rankers"
    level: int = logging.DEBUG
    ranker: str = ""
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DuplicatesDemoted(Event):
    """Near-duplicates of better-ranked tools were moved behind the distinct ones."""

    name: ClassVar[str] = "rankers.duplicates_demoted"
    area: ClassVar[str] = "rankers"
    level: int = logging.DEBUG
    ranker: str = ""
    ids: tuple[str, ...] = ()


def name_words(name: str) -> tuple[str, ...]:
    """The words of an identifier or a phrase, as names are matched (``getWeather`` -> ``("get", "weather")``)."""
    return tuple(_WORDS(name))


def local_name(identifier: str) -> str:
    """``identifier`` without its namespace: after ``mcp__server__``/``server__`` or the last dot."""
    if "__" in identifier.strip("_"):
        tail = identifier.rsplit("__", 1)[1]
        if tail:
            return tail
    if "." in identifier.strip("."):
        return identifier.rsplit(".", 1)[1]
    return identifier


@functools.lru_cache(maxsize=1 << 16)
def variant_key(name: str) -> tuple[str, ...]:
    """The words that make two tools variants of one (:func:`variants`): ``name``'s local name, version
    tokens dropped (``mcp__files__read_file_v2`` and ``read_file`` -> ``("read", "file")``)."""
    return tuple(w for w in name_words(local_name(name)) if not _VERSION.match(w))


#: Of two same-named tools' description terms (stemmed, stopwords dropped), the share of their union they
#: must have in common to be one tool when no vectors compare them (:func:`same_tool`).
SAME_TOOL_OVERLAP = 0.5


def same_tool(a: Candidate, b: Candidate) -> bool:
    """True when ``a`` and ``b`` are one tool offered twice (two servers, two versions): the same
    :func:`variant_key` and at least :data:`SAME_TOOL_OVERLAP` of their description terms shared.

    The vector-free test of a variant: a search leaves out the variants of what the model already has
    (:func:`~shortlist.offer._search.search_tools`), whatever ranked them.
    """
    if a.id == b.id:
        return True
    key = variant_key(a.name)
    if not key or key != variant_key(b.name):
        return False
    wa, wb = set(_TERMS(a.description)), set(_TERMS(b.description))
    return not (wa or wb) or len(wa & wb) >= SAME_TOOL_OVERLAP * len(wa | wb)


def group_ids(candidates: Sequence[Candidate]) -> _IntArray | None:
    """Each candidate's group number (a candidate without a server is its own group), or None when
    no group has two members or every candidate is in one group (servers then say nothing)."""
    numbers: dict[str, int] = {}
    out = np.empty(len(candidates), dtype=np.intp)
    for i, c in enumerate(candidates):
        key = candidate_group(c)
        out[i] = numbers.setdefault(key if key is not None else f"\0{i}", len(numbers))
    n_groups = len(numbers)
    if n_groups <= 1 or n_groups == len(candidates):
        return None
    return out


@dataclass(frozen=True, slots=True)
class GroupLayout:
    """Candidates ordered by group, computed once per catalog (:func:`server_scores` runs per turn).

    Attributes:
        groups: each candidate's group number.
        order: candidate indexes, grouped.
        starts: where each group starts in ``order``.
        segment: the group of each position of ``order``.
    """

    groups: _IntArray
    order: _IntArray
    starts: _IntArray
    segment: _IntArray

    @classmethod
    def of(cls, groups: _IntArray) -> GroupLayout:
        """The layout of ``groups`` (group numbers ``0..G-1``, every one used)."""
        order = np.argsort(groups, kind="stable").astype(np.intp)
        segment = groups[order]
        starts = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]]).astype(np.intp)
        return cls(groups, order, starts, segment)


def server_scores(scores: _F64, groups: _IntArray | GroupLayout, *, top: int = 1) -> _F64:
    """Per candidate, the score of its group: the mean of the group's ``top`` best scores.

    Linear in the candidates (``top`` passes of a segmented maximum over a cached layout); equal
    scores inside a group count once among its best.
    """
    layout = groups if isinstance(groups, GroupLayout) else GroupLayout.of(groups)
    if layout.order.size == 0:
        return np.zeros(0, dtype=np.float64)
    values = np.asarray(scores, dtype=np.float64)[layout.order]
    sums = np.zeros(layout.starts.size)
    counts = np.zeros(layout.starts.size)
    for k in range(max(1, top)):
        best = np.maximum.reduceat(values, layout.starts)
        found = np.isfinite(best)
        if not found.any():
            break
        sums += np.where(found, best, 0.0)
        counts += found
        if k + 1 < top:
            values = np.where(values >= best[layout.segment], -np.inf, values)
    agg = sums / np.maximum(counts, 1.0)
    return np.asarray(agg[layout.groups], dtype=np.float64)


def group_centroids(vectors: npt.NDArray[np.float32], groups: _IntArray) -> npt.NDArray[np.float32]:
    """One unit vector per group: the normalised mean of its members' description vectors."""
    sums = np.zeros((int(groups.max()) + 1, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, groups, vectors.astype(np.float64))
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return np.asarray(sums / np.where(norms > 0, norms, 1.0), dtype=np.float32)


@dataclass(frozen=True, slots=True)
class NameIndex:
    """The name phrases of one candidate list, for :func:`named_tools` and :func:`demote_duplicates`.

    A phrase is keyed by its words run together (``get_weather`` -> ``"getweather"``), so a query
    matches it whatever the split of its spelling (``Get36KrTrending`` splits as ``get36 kr
    trending``, ``get-36kr-trending`` as ``get 36kr trending``: both ``"get36krtrending"``).

    Attributes:
        candidates: the list it was built from (kept so a cache can check identity).
        phrases: joined words -> ``[(number of words, candidate index)]``.
        longest: the length of the longest key.
        locals: each candidate's local-name words, version tokens dropped.
        descriptions: each candidate's description words.
    """

    candidates: tuple[Candidate, ...]
    phrases: dict[str, list[tuple[int, int]]]
    longest: int
    locals: tuple[tuple[str, ...], ...]
    descriptions: tuple[tuple[str, ...], ...]

    @classmethod
    def build(cls, candidates: Sequence[Candidate]) -> NameIndex:
        """Index the name, id and local name of every candidate."""
        cands = tuple(candidates)
        phrases: dict[str, list[tuple[int, int]]] = {}
        locals_: list[tuple[str, ...]] = []
        for i, c in enumerate(cands):
            local = name_words(local_name(c.name))
            locals_.append(variant_key(c.name))
            seen: set[str] = set()
            for words in (name_words(c.name), name_words(c.id), local, name_words(local_name(c.id))):
                key = "".join(words)
                if key and key not in seen:
                    seen.add(key)
                    phrases.setdefault(key, []).append((len(words), i))
        longest = max((len(k) for k in phrases), default=0)
        descriptions = tuple(tuple(_WORDS(c.description)) for c in cands)
        return cls(cands, phrases, longest, tuple(locals_), descriptions)


_TOKEN_SPLIT = re.compile(r"[\s()\[\]{}`'\"<>,;:!?]+")


def _code_spelled(text: str, phrase: str) -> bool:
    """``phrase`` written as code in ``text``: in backticks, or called (``cat(``)."""
    p = re.escape(phrase)
    return (
        re.search(rf"`\s*{p}\s*`", text, flags=re.IGNORECASE) is not None
        or re.search(rf"(?<![\w.-]){p}\s*\(", text, flags=re.IGNORECASE) is not None
    )


def named_tools(text: str, index: NameIndex) -> dict[int, int]:
    """The candidates ``text`` names (see the module docstring), each with its match's length in words."""
    if not index.phrases:
        return {}
    words: list[str] = []
    token: list[int] = []  # the token (split at spaces, brackets, quotes, commas...) each word comes from
    sizes: list[int] = []  # how many words each token has
    for raw in _TOKEN_SPLIT.split(text):
        parts = _WORDS(raw)
        if parts:
            words.extend(parts)
            token.extend([len(sizes)] * len(parts))
            sizes.append(len(parts))
    if not words:
        return {}
    spans: list[tuple[int, int, int]] = []  # (start, end, candidate)
    for pos in range(len(words)):
        joined = ""
        for end in range(pos + 1, len(words) + 1):
            joined += words[end - 1]
            if len(joined) > index.longest:
                break
            owners = index.phrases.get(joined)
            if not owners:
                continue
            # One token, all of it (``get_weather``, ``getWeather``, ``Get-Weather``): an identifier.
            whole_token = token[pos] == token[end - 1] and sizes[token[pos]] == end - pos
            cued: bool | None = None
            for n_words, idx in owners:
                if n_words >= 2 and whole_token:
                    spans.append((pos, end, idx))
                    continue
                if n_words == 1 and token[pos] != token[end - 1]:
                    continue  # a one-word name is not spelled across tokens ("me an" is not "mean")
                if cued is None:
                    cued = (
                        (pos > 0 and words[pos - 1] in CUES_BEFORE)
                        or (end < len(words) and words[end] in CUES_AFTER)
                        or all(w in _STOP for w in (*words[:pos], *words[end:]))
                        or _code_spelled(text, " ".join(words[pos:end]) if n_words > 1 else joined)
                    )
                if cued:
                    spans.append((pos, end, idx))
    if not spans:
        return {}
    out: dict[int, int] = {}
    for start, end, idx in spans:
        length = end - start
        beaten = False
        for s, e, _ in spans:
            if (s, e) == (start, end):
                continue
            if s <= start and end <= e and e - s > length:
                beaten = True  # inside a longer match
            elif start < e and s < end and words[end - 1] in CUES_AFTER and e - s >= length:
                beaten = True  # "the apex_map tool": "map tool" overlaps "apex map" with the cue word
            if beaten:
                break
        if not beaten:
            out[idx] = max(out.get(idx, 0), length)
    return out


def variants(
    i: int,
    j: int,
    index: NameIndex,
    vectors: npt.NDArray[np.float32] | None,
    cosine: float = 0.85,
    *,
    descriptions: bool = True,
) -> bool:
    """True when candidates ``i`` and ``j`` are variants of one tool (see the module docstring);
    ``descriptions``: the same description words with names sharing half their words are too."""
    a, b = index.locals[i], index.locals[j]
    if a and a == b:
        return vectors is None or float(np.dot(vectors[i], vectors[j])) >= cosine
    if not descriptions:
        return False
    da, db = index.descriptions[i], index.descriptions[j]
    if not da or da != db:
        return False
    sa, sb = set(index.locals[i]), set(index.locals[j])
    return bool(sa | sb) and len(sa & sb) * 2 >= len(sa | sb)


def demote_duplicates(
    order: Sequence[int],
    index: NameIndex,
    vectors: npt.NDArray[np.float32] | None,
    *,
    cosine: float = 0.85,
    descriptions: bool = True,
) -> tuple[list[int], list[int]]:
    """``order`` with each variant of an earlier entry (:func:`variants`) moved behind the distinct entries.

    Without ``descriptions`` only same-named entries are compared (each with those of its name).

    Returns:
        ``(new order, the demoted entries)``.
    """
    kept: list[int] = []
    demoted: list[int] = []
    named: dict[tuple[str, ...], list[int]] = {}
    for i in order:
        peers = kept if descriptions else named.get(index.locals[i], ())
        dup = any(variants(i, j, index, vectors, cosine, descriptions=descriptions) for j in peers)
        (demoted if dup else kept).append(i)
        if not dup and not descriptions:
            named.setdefault(index.locals[i], []).append(i)
    return kept + demoted, demoted


#: Sentences that name a tool, ``{}`` where the name goes (:func:`naming_queries`).
NAMING_TEMPLATES = (
    "Use {} to do this.",
    "Please call {} for me.",
    "I need the {} tool here.",
    "Can you run {} on the data?",
    "{}",
    "Could you invoke {} now?",
)


def spellings(name: str) -> tuple[str, ...]:
    """Ways of writing the name ``name`` in a message: snake_case, camelCase, spaced words,
    Title-Kebab-Case, dotted and as written (``get_weather`` -> ``get_weather``, ``getWeather``,
    ``get weather``, ``Get-Weather``, ``get.weather``); a one-word name lower, Title, UPPER and
    in backticks."""
    words = name_words(name)
    if not words:
        return ()
    if len(words) == 1:
        w = words[0]
        return tuple(dict.fromkeys((name, w, w.title(), w.upper(), f"`{w}`")))
    forms = (
        "_".join(words),
        words[0] + "".join(w.title() for w in words[1:]),
        " ".join(words),
        "-".join(w.title() for w in words),
        ".".join(words),
        name,
    )
    return tuple(dict.fromkeys(forms))


def naming_queries(candidates: Sequence[Candidate], *, every_spelling: bool = False) -> list[tuple[str, str]]:
    """``(query, candidate id)`` pairs: for each candidate, a sentence of :data:`NAMING_TEMPLATES`
    that names it in one of its :func:`spellings` (rotating through both; every spelling with
    ``every_spelling``)."""
    out: list[tuple[str, str]] = []
    turn = 0
    for c in candidates:
        forms = spellings(c.name)
        chosen = forms if every_spelling else forms[turn % len(forms) : turn % len(forms) + 1] if forms else ()
        for form in chosen:
            out.append((NAMING_TEMPLATES[turn % len(NAMING_TEMPLATES)].format(form), c.id))
            turn += 1
    return out
