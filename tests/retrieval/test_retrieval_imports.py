"""Importing the grounding and memory packages stays light: heavy backends load only when used."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter process


def test_import_does_not_pull_heavy_modules() -> None:
    code = (
        "import sys, shortlist.memory, shortlist.retrieval, shortlist.retrieval._backends;"
        "print([m for m in ('onnxruntime', 'qdrant_client', 'tiktoken', 'torch') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_memory_imports_without_retrieval_first() -> None:
    # memory must not depend on the retrieval package (retrieval depends on memory)
    code = "import shortlist.memory._tools, sys; print('shortlist.retrieval._corpus' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_qdrant_client_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['qdrant_client'] = None\n"
        "try:\n"
        "    import shortlist.retrieval._backends.qdrant\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MissingDependencyError")
    assert "[qdrant]'" in out.stdout
