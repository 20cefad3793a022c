"""``FastJSONResponse``: JSON bodies rendered by pydantic-core's serializer instead of the stdlib ``json``.

A fallback answer lists every eligible id (a thousand-tool catalog is a 30 KB body); rendering
it with ``json.dumps`` was a fifth of a worker's CPU in the fault runs. pydantic-core (already
installed with pydantic) writes the same JSON several times faster. Non-finite floats become
``null`` so a body is always valid JSON.
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from fastapi.responses import JSONResponse

__all__ = ["FastJSONResponse"]


class FastJSONResponse(JSONResponse):
    """A :class:`~fastapi.responses.JSONResponse` rendered by ``pydantic_core.to_json``."""

    def render(self, content: Any) -> bytes:
        """Serialise ``content`` as compact UTF-8 JSON."""
        return pydantic_core.to_json(content, inf_nan_mode="null")
