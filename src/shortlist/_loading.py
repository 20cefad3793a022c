"""Loading an object named as ``"module:attribute"`` (a model callable in configuration, a built-in
selector's factory): the one parser and importer every such name goes through."""

from __future__ import annotations

import importlib
from typing import Any

from shortlist.errors import ConfigError

__all__ = ["import_attribute", "load_attribute"]


def import_attribute(module_name: str, attribute: str) -> Any:
    """Import ``module_name`` and follow the dotted ``attribute`` in it.

    Raises:
        ImportError: the module cannot be imported (``ModuleNotFoundError`` when it is missing).
        AttributeError: the module has no such attribute.
    """
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def load_attribute(spec: str, *, what: str) -> Any:
    """The object ``spec`` (``"module:attribute"``, the attribute may be dotted) names.

    Args:
        spec: the name, as configuration gives it.
        what: what the object is, for the error message ("the llm judge model").

    Raises:
        ConfigError: ``spec`` is not ``module:attribute``, or it cannot be loaded.
    """
    module_name, _, attribute = str(spec).partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{what} must be given as 'module:attribute', got {spec!r}")
    try:
        return import_attribute(module_name, attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load {what} {spec!r}: {exc}") from exc
