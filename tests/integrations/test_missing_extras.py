"""Each integration names its extra when its framework is missing; the core never imports a framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shortlist._install import pip_install

pytestmark = pytest.mark.slow  # a fresh interpreter process

CASES = [
    ("langchain_core", "shortlist.integrations.langchain", "langchain"),
    ("pydantic_ai", "shortlist.integrations.pydantic_ai", "pydantic-ai"),
    ("agents", "shortlist.integrations.openai_agents", "openai-agents"),
    ("llama_index", "shortlist.integrations.llamaindex", "llamaindex"),
]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("missing", "module", "extra"), CASES)
def test_a_missing_framework_names_its_extra(missing: str, module: str, extra: str) -> None:
    out = _run(f"import sys; sys.modules[{missing!r}] = None\nimport {module}")
    assert out.returncode != 0
    assert "MissingDependencyError" in out.stderr, out.stderr
    assert pip_install(extra) in out.stderr, out.stderr  # the command for this installation


def test_the_core_and_the_engine_import_no_framework() -> None:
    code = (
        "import sys\n"
        "import shortlist, shortlist.integrations, shortlist._telemetry\n"
        "from shortlist.integrations import ToolNarrower\n"
        "heavy = [m for m in ('langchain', 'langchain_core', 'langgraph', 'pydantic_ai', 'agents', 'llama_index',"
        " 'opentelemetry') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = _run(code)
    assert out.stdout.strip() == "[]", out.stderr
