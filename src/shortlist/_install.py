"""The one home of install hints: the pip command that adds an extra to *this* installation of shortlist.

A hint saying ``pip install 'shortlist[server]'`` fails for someone who cloned the repository
(the package is not on the index under that name for them, and it would replace their clone).
Where shortlist came from decides the command:

* installed from a directory (``pip install -e .`` or ``pip install .``): pip records it in the
  distribution's ``direct_url.json`` (PEP 610) as a ``file://`` URL, editable or not; the hint
  is ``pip install -e '<dir>[extra]'`` (without ``-e`` when the install was not editable), with
  ``.`` for the directory when it is the current one;
* not installed but imported from a source tree (``PYTHONPATH=src``: a ``pyproject.toml``
  naming ``shortlist`` two levels above the package): ``pip install -e '<root>[extra]'``;
* otherwise (an index or a wheel): ``pip install 'shortlist[extra]'``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["InstallOrigin", "install_origin", "pip_install", "pip_install_for"]

_DIST = "shortlist"


@dataclass(frozen=True)
class InstallOrigin:
    """Where this shortlist came from: a source directory (``editable`` or not), or None for an index."""

    source: Path | None = None
    editable: bool = False


def _from_direct_url(text: str | None) -> InstallOrigin | None:
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    url = info.get("url")
    if not isinstance(url, str) or not url.startswith("file:") or "dir_info" not in info:
        return None  # an archive, a VCS URL: reinstalling from the index form is the best advice
    dir_info = info.get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable") is True
    return InstallOrigin(Path(unquote(urlparse(url).path)), editable)


def _source_tree() -> Path | None:
    root = Path(__file__).resolve().parent.parent.parent  # src/shortlist/_install.py -> the repository
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if re.search(rf'^name\s*=\s*"{_DIST}"\s*$', text, flags=re.MULTILINE) else None


def install_origin() -> InstallOrigin:
    """Where the running shortlist came from (see the module docstring)."""
    try:
        dist = metadata.distribution(_DIST)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        origin = _from_direct_url(dist.read_text("direct_url.json"))
        if origin is not None:
            return origin
        return InstallOrigin()
    tree = _source_tree()
    return InstallOrigin(tree, editable=True) if tree is not None else InstallOrigin()


def pip_install_for(origin: InstallOrigin, extra: str | None = None, *, cwd: Path | None = None) -> str:
    """The pip command installing shortlist (with ``extra``) the way ``origin`` was installed."""
    suffix = f"[{extra}]" if extra else ""
    if origin.source is None:
        return f"pip install '{_DIST}{suffix}'" if extra else f"pip install {_DIST}"
    here = Path(cwd) if cwd is not None else Path(os.getcwd())
    try:
        same = here.resolve() == origin.source.resolve()
    except OSError:
        same = False
    where = "." if same else str(origin.source)
    return f"pip install {'-e ' if origin.editable else ''}'{where}{suffix}'"


def pip_install(extra: str | None = None) -> str:
    """The pip command adding ``extra`` (or reinstalling shortlist) for the running installation."""
    return pip_install_for(install_origin(), extra)
