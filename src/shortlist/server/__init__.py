"""The shortlist HTTP service: selection, retrieval, memory and reduction for agents in any language.

Start it with ``shortlist serve`` or build the app with :func:`create_app`.
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.server._app import create_app
    from shortlist.server._settings import ServerSettings

__all__ = [
    "ServerSettings",
    "create_app",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "ServerSettings": "shortlist.server._settings",
    "create_app": "shortlist.server._app",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "KeyPolicy": ("shortlist.server._settings", None),
    "app_from_env": ("shortlist.server._app", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
