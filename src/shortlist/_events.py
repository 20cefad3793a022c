"""Structured events: every fallback, timeout, rejected id and budget decision is one.

Events are frozen dataclasses. :func:`emit` logs each on the ``shortlist.<area>`` logger
(as a structured ``extra={"event": ...}``) and passes it to every hook in effect: the
global hooks added with :func:`add_event_hook`, plus the hooks scoped to the current
context with :func:`event_hooks` (a context manager, so concurrent turns can each collect
their own events). A hook that raises is logged and never breaks the caller.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "Event",
    "EventHook",
    "SelectionFallback",
    "SelectionMade",
    "SelectorRejectedIds",
    "add_event_hook",
    "emit",
    "event_hooks",
    "remove_event_hook",
]

logger = logging.getLogger("shortlist")


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of all events. ``area`` names the logger (``shortlist.<area>``); ``name`` the event kind.

    Both are class constants (``ClassVar``), one per event class, so they cannot vary between two
    events of one kind; :meth:`to_dict` still writes them first. ``level`` is a field: an event may
    be logged lower when it is normal (``SelectionFallback`` for ``no_selector``). Every event is
    listed in ``docs/events.md`` (a test keeps that page complete).
    """

    name: ClassVar[str] = "event"
    area: ClassVar[str] = "core"
    level: int = logging.INFO

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-ready dict (without the logging level).

        Field values are immutable scalars and tuples, so a shallow copy is enough; it costs a
        tenth of ``dataclasses.asdict`` on the hot path of a broken selector (one event per turn).
        """
        out: dict[str, Any] = {"name": self.name, "area": self.area}
        for name in _field_names(type(self)):
            out[name] = getattr(self, name)
        return out


@dataclass(frozen=True, kw_only=True)
class SelectionFallback(Event):
    """A turn fell back to "include all eligible".

    ``reason`` is one of ``error``, ``timeout``, ``empty``, ``unknown_ids``, ``no_selector``,
    ``empty_query`` (``no_selector`` and ``empty_query`` are normal, logged at DEBUG).
    """

    name: ClassVar[str] = "selection.fallback"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    reason: str = ""
    selector: str = ""
    kind: str = ""
    latency_ms: float = 0.0
    error: str = ""
    stderr_tail: str = ""


@dataclass(frozen=True, kw_only=True)
class SelectorRejectedIds(Event):
    """A selector returned ids that are not candidates; they were dropped."""

    name: ClassVar[str] = "selection.rejected_ids"
    area: ClassVar[str] = "selection"
    level: int = logging.WARNING
    selector: str = ""
    kind: str = ""
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SelectionMade(Event):
    """A turn was narrowed: what the selector chose and what surfaced."""

    name: ClassVar[str] = "selection.made"
    area: ClassVar[str] = "selection"
    level: int = logging.DEBUG
    selector: str = ""
    kind: str = ""
    candidates: int = 0
    selected: tuple[str, ...] = ()
    surfaced: int = 0
    latency_ms: float = 0.0
    reason: str = ""


EventHook = Callable[[Event], None]

_global_hooks: list[EventHook] = []
_global_lock = threading.Lock()
_scoped_hooks: contextvars.ContextVar[tuple[EventHook, ...]] = contextvars.ContextVar(
    "shortlist_event_hooks", default=()
)


def add_event_hook(hook: EventHook) -> None:
    """Call ``hook`` for every event emitted anywhere in the process."""
    with _global_lock:
        _global_hooks.append(hook)


def remove_event_hook(hook: EventHook) -> None:
    """Stop calling a hook added with :func:`add_event_hook` (no error if absent)."""
    with _global_lock, contextlib.suppress(ValueError):
        _global_hooks.remove(hook)


@contextlib.contextmanager
def event_hooks(*hooks: EventHook) -> Iterator[None]:
    """Call ``hooks`` for events emitted in this context (thread/task) until the block exits."""
    token = _scoped_hooks.set(_scoped_hooks.get() + hooks)
    try:
        yield
    finally:
        _scoped_hooks.reset(token)


def emit(event: Event, *, hooks: tuple[EventHook, ...] | list[EventHook] = ()) -> None:
    """Log ``event`` and deliver it to the global, scoped and explicitly passed hooks."""
    log = logging.getLogger(f"shortlist.{event.area}")
    if log.isEnabledFor(event.level):
        log.log(event.level, "%s %s", event.name, _summary(event), extra={"event": event.to_dict()})
    with _global_lock:
        targets = [*_global_hooks]
    targets.extend(_scoped_hooks.get())
    targets.extend(hooks)
    for hook in targets:
        try:
            hook(event)
        except Exception:  # a broken hook must not break a turn; it is logged, not swallowed silently
            logger.exception("event hook %r failed on %s", hook, event.name)


_FIELD_NAMES: dict[type[Event], tuple[str, ...]] = {}


def _field_names(cls: type[Event]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:  # a benign race: two threads compute the same tuple
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name != "level")
    return names


def _summary(event: Event) -> str:
    parts = []
    for name in _field_names(type(event)):
        value = getattr(event, name)
        if value in ("", (), None, 0, 0.0):
            continue
        parts.append(f"{name}={value!r}")
    return " ".join(parts)
