"""Learning from usage: a log of which tools the model called, turned into example queries."""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.feedback._store import FeedbackStore, apply_examples

__all__ = [
    "FeedbackStore",
    "apply_examples",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "FeedbackStore": "shortlist.feedback._store",
    "apply_examples": "shortlist.feedback._store",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
