"""Every optional backend names its extra when its package is missing (simulated in a subprocess)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shortlist._install import pip_install

pytestmark = pytest.mark.slow  # a fresh interpreter process

# each case: the missing top-level module, the code to run, the extra the message must name
CASES = [
    ("psycopg", "import shortlist.memory._postgres", "postgres"),
    (
        "psycopg",
        "from shortlist.server._state import open_memory_store; open_memory_store('postgresql://x/y')",
        "postgres",
    ),
    ("qdrant_client", "import shortlist.retrieval._backends.qdrant", "qdrant"),
    ("mcp", "from shortlist.mcp._client import require_mcp; require_mcp()", "mcp"),
    (
        "onnx",
        "from shortlist.embeddings import DefaultEmbedder; "
        "DefaultEmbedder(query_precision='int8', optimized_model_cache=False).load()",
        "int8",
    ),
]


def _run(missing: str, code: str) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys; sys.modules[{missing!r}] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("missing", "code", "extra"), CASES)
def test_a_missing_backend_names_its_extra(missing: str, code: str, extra: str) -> None:
    if code.startswith("from shortlist.server"):
        pytest.importorskip("fastapi")
    out = _run(missing, code)
    assert out.returncode != 0
    assert "MissingDependencyError" in out.stderr, out.stderr
    assert pip_install(extra) in out.stderr, out.stderr  # the command for this installation


@pytest.mark.parametrize("missing", ["fastapi", "uvicorn", "prometheus_client"])
def test_serve_without_the_server_extra_is_one_line_not_a_traceback(missing: str) -> None:
    out = _run(missing, "from shortlist.cli import main; sys.exit(main(['serve', '--port', '0']))")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert pip_install("server") in out.stderr, out.stderr


def test_serve_with_a_postgres_store_but_no_psycopg_is_one_line() -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    out = _run(
        "psycopg",
        "from shortlist.cli import main; sys.exit(main(['serve', '--port', '0', '--memory', 'postgresql://u@127.0.0.1:1/db']))",
    )
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert pip_install("postgres") in out.stderr, out.stderr
