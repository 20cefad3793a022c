"""Shared fixtures of the exec tests: an event collector."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shortlist._events import Event, event_hooks


@pytest.fixture
def events() -> Iterator[list[Event]]:
    """Collect every event emitted in the test's context."""
    seen: list[Event] = []
    with event_hooks(seen.append):
        yield seen
