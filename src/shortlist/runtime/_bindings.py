"""The selector bindings a pack's conversations share: built by its first conversation, reused by the next.

A :class:`~shortlist.runtime.Conversation` narrows through a :class:`~shortlist.Shortlist` binding:
its selectors (the default hybrid builds a BM25 index, the embedding matrices and the scale levers'
view of the catalog on the first turn that ranks a catalog), the usage examples of the pack's feedback
log and the catalogs enriched with them. Built per conversation, every new conversation paid all of
that again on its first turn (about 0.5 s at 2,756 tools with every vector already cached), and a
selector instance given to several conversations was closed by the first one to close.

So the bindings belong to the pack: conversations of one :class:`~shortlist.runtime.Pack` object that
ask for the same selectors (the same ``tool_selector``, ``skills_selector``, ``selectors`` and
``config``; a config file counts as the same while its path, size and modification time are) share
one binding, its selectors, indexes and enriched catalogs. Each conversation keeps its own offer
state (:class:`~shortlist.offer.ToolSession`). A conversation's ``close()`` leaves the shared
binding for the next conversation; :meth:`PackBindings.close` (``Pack.close()``), or the pack's
garbage collection, closes the selectors they built (external processes, connections).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shortlist._config import RuntimeConfig
from shortlist.selection._facade import Shortlist

if TYPE_CHECKING:
    from shortlist.feedback import FeedbackStore
    from shortlist.selection._base import Selector

__all__ = ["Bindings", "PackBindings"]


@dataclass(frozen=True, slots=True)
class Bindings:
    """One set of selector arguments, bound: the facade, its live-tools sibling and its skills binding."""

    shortlist: Shortlist
    tools: Shortlist
    skills: Shortlist


def _identity(value: object) -> Hashable:
    """What ``value`` is judged the same by: its value for names and markers, else the object itself."""
    if value is None or isinstance(value, str):
        return ("value", value)
    return ("object", id(value))


def _config_key(config: RuntimeConfig | str | Path | None) -> Hashable:
    if isinstance(config, (str, Path)):  # a file: the same while it is unchanged
        path = Path(config).expanduser()
        try:
            stat = path.stat()
        except OSError:  # Shortlist reports the missing file with its own error
            return ("file", str(path), None)
        return ("file", str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    return _identity(config)


class PackBindings:
    """The bindings of one pack's conversations, by the selector arguments they were built from (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bindings: dict[Hashable, tuple[Bindings, tuple[Any, ...]]] = {}

    def get(
        self,
        *,
        tool_selector: Selector | str | None,
        skills_selector: Selector | str | None,
        selectors: Mapping[str, Selector] | None,
        config: RuntimeConfig | str | Path | None,
        feedback: FeedbackStore | None,
    ) -> Bindings:
        """The binding of these arguments, built on first use (the pack's ``feedback`` log is its
        examples unless the config names another)."""
        named = tuple(sorted((name, id(sel)) for name, sel in (selectors or {}).items()))
        key = (
            _identity(tool_selector),
            _identity(skills_selector),
            named,
            _config_key(config),
            _identity(feedback),
        )
        with self._lock:
            found = self._bindings.get(key)
            if found is not None:
                return found[0]
            shortlist = Shortlist(selector=tool_selector, config=config, selectors=selectors, kind="tool")
            if shortlist.examples is None and feedback is not None:
                # the log the pack records its turns in is the one it ranks with (the config's
                # ``selection.examples`` wins): each logged message becomes a usage example of what it used
                shortlist.examples = feedback
            bound = Bindings(
                shortlist,
                shortlist.for_tools(),  # live mcp__ tools ranked like any tool
                shortlist.derive(selector=skills_selector, kind="skill"),
            )
            # the objects the key names by identity stay alive as long as the entry: no id is reused
            alive = (tool_selector, skills_selector, *(selectors or {}).values(), config, feedback)
            self._bindings[key] = (bound, alive)
            return bound

    def __len__(self) -> int:
        return len(self._bindings)

    def close(self) -> None:
        """Close the selectors every binding built (and the logs they opened); later conversations build anew."""
        with self._lock:
            entries, self._bindings = list(self._bindings.values()), {}
        for bound, _ in entries:
            bound.shortlist.close()
