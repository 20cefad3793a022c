"""The public surface: __all__ matches what is exported, and `import shortlist` stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import shortlist


def test_all_is_sorted_and_exported() -> None:
    assert list(shortlist.__all__) == sorted(shortlist.__all__)
    for name in shortlist.__all__:
        assert hasattr(shortlist, name), name


@pytest.mark.slow  # a fresh interpreter process
def test_import_does_not_pull_heavy_modules() -> None:
    code = (
        "import sys, shortlist, shortlist.selection, shortlist.adapters, shortlist._config;"
        "heavy = [m for m in ('onnxruntime', 'torch', 'qdrant_client', 'fastapi', 'uvicorn', 'mcp', 'tiktoken')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # a fresh interpreter process
def test_import_is_lazy() -> None:
    """``import shortlist`` imports nothing else of the package but the name resolver (``_exports``, the standard
    library's importlib and warnings); a name imports its module on first use."""
    code = (
        "import sys, shortlist;"
        "print(sorted(m for m in sys.modules if m.startswith('shortlist')));"
        "from shortlist import Candidate; print('shortlist._types' in sys.modules, 'shortlist._config' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["['shortlist', 'shortlist._exports']", "True False"]


def test_every_public_name_is_the_defining_modules_object() -> None:
    from shortlist.errors import ShortlistError
    from shortlist.selection._narrowing import narrow

    assert shortlist.ShortlistError is ShortlistError and shortlist.narrow is narrow
    assert set(shortlist.__all__) <= set(dir(shortlist))
    with pytest.raises(AttributeError, match="no_such_name"):
        shortlist.no_such_name  # noqa: B018
