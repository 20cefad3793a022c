"""The public surface: __all__ matches what is exported, and `import shortlist` stays light."""

from __future__ import annotations

import subprocess
import sys

import shortlist


def test_all_is_sorted_and_exported() -> None:
    assert list(shortlist.__all__) == sorted(shortlist.__all__)
    for name in shortlist.__all__:
        assert hasattr(shortlist, name), name


def test_import_does_not_pull_heavy_modules() -> None:
    code = (
        "import sys, shortlist, shortlist.selection, shortlist.adapters, shortlist.config;"
        "heavy = [m for m in ('onnxruntime', 'torch', 'qdrant_client', 'fastapi', 'uvicorn', 'mcp', 'tiktoken')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
