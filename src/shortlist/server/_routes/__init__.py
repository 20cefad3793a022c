"""The service's routes, one module per domain; each exposes ``router``. Routes parse, call the library, render."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from annotated_types import Ge
from fastapi import Request
from pydantic import BeforeValidator, Field, StringConstraints

from shortlist.server._state import ServiceState

__all__ = ["MAX_TEXT_CHARS", "CandidateId", "JsonDateTime", "JsonInt", "PositiveJsonInt", "Scope", "state_of"]


def _integral(value: Any) -> Any:
    # JSON Schema counts 3.0 as an integer; strict pydantic would not
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _rfc3339(value: Any) -> Any:
    # RFC 3339 allows 't'/'z' in lower case and a leap second (:60), which fromisoformat rejects
    if isinstance(value, str):
        text = value.replace("t", "T").replace("z", "Z")
        text = text[:17] + "59" + text[19:] if text[17:19] == "60" else text
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return value
    return value


#: An integer field that also takes integral floats (``3.0``), as JSON Schema does, and nothing else.
JsonInt = Annotated[int, BeforeValidator(_integral)]
#: A positive :data:`JsonInt` (the bound sits inside, so it survives ``| None`` in the schema).
PositiveJsonInt = Annotated[int, Ge(1), BeforeValidator(_integral)]
#: A date-time field that takes any RFC 3339 string.
JsonDateTime = Annotated[datetime, BeforeValidator(_rfc3339)]

_NonEmpty = Annotated[str, StringConstraints(min_length=1)]

#: A candidate id in a request body (an offer state's, a feedback turn's): non-empty, at most 1,024 characters.
CandidateId = Annotated[str, StringConstraints(min_length=1, max_length=1024)]

#: A memory scope in a request body: a non-empty mapping of non-empty strings.
Scope = Annotated[
    dict[_NonEmpty, _NonEmpty],
    Field(min_length=1, max_length=16, description="The subject bucket, e.g. {'user_id': 'u1'} (exact match)."),
]


#: The most characters of a text a request ranks: a query, or one chat message's text (its
#: ``content`` string, or the ``text`` of its parts together). Longer is a 422.
MAX_TEXT_CHARS = 100_000


def state_of(request: Request) -> ServiceState:
    """The :class:`ServiceState` of the app serving ``request``."""
    state: ServiceState = request.app.state.service
    return state
