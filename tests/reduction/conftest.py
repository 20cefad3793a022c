"""Fixtures of the reduction tests (the doubles live in ``reduction_doubles``)."""

from __future__ import annotations

import pytest
from reduction_doubles import WordCounter


@pytest.fixture
def counter() -> WordCounter:
    return WordCounter()
