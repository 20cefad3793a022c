"""How a package's namespace finds its names on first use (PEP 562): its public names, imported lazily from
the private modules that define them, and the names it exported before the surface was curated (0.1.0's
development tree), which still resolve but warn until 0.2 removes them.

Every subpackage's ``__init__`` is the same three things: ``__all__`` (its public names), ``_LAZY`` (where
each is defined) and ``_DEPRECATED`` (the names it no longer exports, with their public home if they have
one); its ``__getattr__`` calls :func:`resolve`. Importing a package therefore imports none of its modules.
"""

from __future__ import annotations

import importlib
import warnings

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing would be most of `import shortlist`'s cost
if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping
    from typing import Any

__all__ = ["REMOVED_IN", "resolve"]

#: The release that removes the deprecated names (CHANGELOG, "A small public surface").
REMOVED_IN = "0.2"


def resolve(
    package: str,
    name: str,
    lazy: Mapping[str, str],
    deprecated: Mapping[str, tuple[str, str | None]],
    namespace: MutableMapping[str, Any],
) -> Any:
    """The value of ``package.name``: a public name is imported and cached in ``namespace``; a deprecated
    one is imported with a :class:`DeprecationWarning` that says where it is public now, if anywhere.

    Raises:
        AttributeError: ``name`` is neither (as for any module).
    """
    module = lazy.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later look-ups skip __getattr__
        return value
    moved = deprecated.get(name)
    if moved is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    defined_in, public = moved
    where = f"import it from {public}" if public else "it is no longer part of the public API"
    warnings.warn(
        f"{package}.{name} is deprecated and will be removed in {REMOVED_IN}: {where}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(defined_in), name)
