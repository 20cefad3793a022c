"""Value types of context reduction: fragments, the steps that group them, and selector candidates.

The unit of selection is the **step**: every fragment carries a ``step_id`` and a step is kept,
dropped or summarised as a whole, so an assistant tool call and its tool result never part.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from shortlist.errors import ConfigError

__all__ = [
    "FRAGMENT_KINDS",
    "ContextFragment",
    "ContextSelectionCandidate",
    "FragmentKind",
    "Step",
    "group_steps",
    "make_excerpt",
    "truncate_middle",
]

FragmentKind = Literal["system", "instruction", "user", "assistant", "tool_call", "tool_result", "memory", "summary"]
"""What a fragment is. ``system`` and ``instruction`` fragments are always protected."""

FRAGMENT_KINDS: frozenset[str] = frozenset(get_args(FragmentKind))


@dataclass(frozen=True, kw_only=True)
class ContextFragment:
    """One unit of prompt context.

    Attributes:
        id: Unique within one stage run.
        step_id: The agent step the fragment belongs to; fragments sharing a step are kept or
            dropped together. ``None`` makes the fragment a step of its own (its ``id``).
        kind: What the fragment is (see :data:`FragmentKind`).
        text: The text that is counted and, for tool results, possibly truncated.
        protected: Pinned by the caller: never passed to a selector or reducer.
        tokens: Cached token count of ``text``, if the caller already knows it.
        meta: Passed through untouched (adapters keep the original message here).
    """

    id: str
    kind: FragmentKind
    text: str
    step_id: str | None = None
    protected: bool = False
    tokens: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ConfigError("a context fragment needs a non-empty string id")
        if self.kind not in FRAGMENT_KINDS:
            raise ConfigError(
                f"fragment {self.id!r}: unknown kind {self.kind!r}; expected one of {sorted(FRAGMENT_KINDS)}"
            )
        if not isinstance(self.text, str):
            raise ConfigError(f"fragment {self.id!r}: text must be a string, not {type(self.text).__name__}")
        if self.tokens is not None and (isinstance(self.tokens, bool) or self.tokens < 0):
            raise ConfigError(f"fragment {self.id!r}: tokens must be a non-negative integer")

    @property
    def step(self) -> str:
        """The id of the step this fragment belongs to (``step_id`` or, failing that, ``id``)."""
        return self.step_id if self.step_id is not None else self.id

    @property
    def chars(self) -> int:
        """Length of ``text`` in characters (always counted, whatever the token counter)."""
        return len(self.text)

    def replace(self, **changes: Any) -> ContextFragment:
        """Return a copy with ``changes`` applied; a new ``text`` drops the cached token count."""
        if "text" in changes and "tokens" not in changes:
            changes["tokens"] = None
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True)
class ContextSelectionCandidate:
    """What a selector sees of one reducible step.

    Attributes:
        step_id: The id a selector returns to keep this step.
        excerpt: The step's text clipped (head-biased, with a marker) for a prompt.
        tokens: Full size of the step in tokens (``None`` when no token budget applies).
        chars: Full size of the step in characters.
        kind: Kind of the step's first fragment.
        position: Age order among the candidates, 0 = oldest.
    """

    step_id: str
    excerpt: str
    tokens: int | None
    chars: int
    kind: FragmentKind
    position: int


@dataclass(frozen=True, kw_only=True)
class Step:
    """The fragments of one step, in conversation order.

    Attributes:
        step_id: The step's id.
        fragments: Its fragments (at least one).
        position: Index of its first fragment in the conversation.
        protected: True when any of its fragments is protected, so that a step is never split.
    """

    step_id: str
    fragments: tuple[ContextFragment, ...]
    position: int
    protected: bool

    @property
    def kind(self) -> FragmentKind:
        """Kind of the step's first fragment."""
        return self.fragments[0].kind

    @property
    def text(self) -> str:
        """The step's fragments' texts joined by blank lines."""
        return "\n\n".join(f.text for f in self.fragments)

    @property
    def chars(self) -> int:
        """Total characters of the step's fragments."""
        return sum(len(f.text) for f in self.fragments)


def group_steps(fragments: Sequence[ContextFragment], protected_ids: Iterable[str] | None = None) -> list[Step]:
    """Group fragments into steps, ordered by the position of each step's first fragment.

    Args:
        fragments: The conversation, in order.
        protected_ids: Fragment ids to treat as protected in addition to ``fragment.protected``.

    Returns:
        The steps, oldest first. A step is protected if any of its fragments is.
    """
    extra = set(protected_ids or ())
    members: dict[str, list[ContextFragment]] = {}
    first: dict[str, int] = {}
    prot: dict[str, bool] = {}
    for index, frag in enumerate(fragments):
        key = frag.step
        if key not in members:
            members[key] = []
            first[key] = index
            prot[key] = False
        members[key].append(frag)
        if frag.protected or frag.id in extra:
            prot[key] = True
    return [
        Step(step_id=key, fragments=tuple(members[key]), position=first[key], protected=prot[key])
        for key in sorted(members, key=first.__getitem__)
    ]


def make_excerpt(text: str, max_chars: int) -> str:
    """Clip ``text`` to at most ``max_chars`` characters, head-biased, with an ellipsis marker.

    Args:
        text: The text to clip.
        max_chars: The largest length of the result (at least 1).

    Returns:
        ``text`` itself when it fits, else its head followed by ``" […]"``.
    """
    if max_chars < 1:
        raise ConfigError("max_chars must be at least 1")
    if len(text) <= max_chars:
        return text
    marker = " […]"
    if max_chars <= len(marker):
        return text[:max_chars]
    return text[: max_chars - len(marker)] + marker


def truncate_middle(text: str, max_chars: int, *, head_share: float = 0.6) -> str:
    """Shorten ``text`` to about ``max_chars`` characters keeping its head and tail around a marker.

    The marker reads ``[… truncated N chars …]`` and is counted in the result's length. The
    result is never longer than ``text``; a text that already fits is returned unchanged.

    Args:
        text: The text to shorten (typically a tool output).
        max_chars: Target length of the result, marker included.
        head_share: Share of the kept characters taken from the head (the rest from the tail).

    Returns:
        The shortened text.
    """
    if len(text) <= max_chars:
        return text
    removed = len(text) - max_chars
    for _ in range(3):  # the marker's own length depends on the number it shows
        marker = f"\n[… truncated {removed} chars …]\n"
        keep = max(0, max_chars - len(marker))
        new_removed = len(text) - keep
        if new_removed == removed:
            break
        removed = new_removed
    keep = max(0, len(text) - removed)
    head = int(keep * head_share)
    tail = keep - head
    result = text[:head] + f"\n[… truncated {removed} chars …]\n" + (text[len(text) - tail :] if tail else "")
    return result if len(result) < len(text) else text
