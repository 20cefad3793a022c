"""The shortlist HTTP service: selection, retrieval, memory and reduction for agents in any language.

Start it with ``shortlist serve`` or build the app with :func:`create_app`.
"""

from shortlist.server.app import app_from_env, create_app
from shortlist.server.settings import KeyPolicy, ServerSettings

__all__ = ["KeyPolicy", "ServerSettings", "app_from_env", "create_app"]
