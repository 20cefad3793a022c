"""Property-based fuzzing of every route from the served OpenAPI document (schemathesis, bounded).

A real server (with an API key, a catalog and a SQLite memory store) is fuzzed by the
schemathesis command line: every generated request, valid or not, must get an answer that is not
a 5xx and that conforms to the documented response schema. Skipped when schemathesis is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from server_helpers import EXAMPLE_CATALOG, serve

from shortlist.server import ServerSettings

pytestmark = pytest.mark.slow  # schemathesis against a live server

KEY = "fuzz-key"

_DIMENSION_REFUSED = "is not available: the model"
_ACCEPTED = {
    ("POST /v1/reduce", "ST202"): '"code":"over_budget"',
    ("POST /v1/embeddings", "ST202"): _DIMENSION_REFUSED,
    ("POST /v1/embed", "ST202"): _DIMENSION_REFUSED,
    ("POST /v2/embed", "ST202"): _DIMENSION_REFUSED,
    ("POST /embed", "ST202"): _DIMENSION_REFUSED,
}


def _schemathesis() -> str | None:
    local = Path(sys.executable).with_name("schemathesis")
    return str(local) if local.exists() else shutil.which("schemathesis")


@pytest.mark.slow
def test_no_route_answers_5xx_or_breaks_its_schema(tmp_path: Path) -> None:
    exe = _schemathesis()
    if exe is None:
        pytest.skip("schemathesis is not installed (pip install schemathesis)")
    settings = ServerSettings.build(
        env={"SHORTLIST_API_KEYS": KEY},
        catalogs={"ex": str(EXAMPLE_CATALOG)},
        memory_url=f"sqlite:///{tmp_path / 'm.db'}",
    )
    with serve(settings) as srv:
        out = subprocess.run(
            [
                exe,
                "run",
                f"{srv.url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                "25",
                "--phases",
                "examples,fuzzing",  # the coverage phase (about 1,000 more cases) runs in the bench, not here
                "--generation-deterministic",
                "-H",
                f"Authorization: Bearer {KEY}",
                "--no-color",
                "--request-timeout",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1"},
        )
    report = Path(os.environ.get("SHORTLIST_FUZZ_REPORT", tmp_path / "schemathesis.txt"))
    report.write_text(out.stdout + out.stderr)
    found: set[tuple[str, str]] = set()
    bodies: dict[str, list[str]] = {}
    operation = ""
    for line in out.stdout.splitlines():
        header = re.fullmatch(r"_+ ((?:GET|POST|PUT|DELETE|PATCH) \S+) _+", line.strip())
        if header:
            operation = header.group(1)
        code = re.match(r"- (ST\d+) ", line.strip())
        if code:
            found.add((operation, code.group(1)))
        if line.strip().startswith("`{"):
            bodies.setdefault(operation, []).append(line)

    # The accepted findings: semantic refusals no schema can express, each only when every response
    # schemathesis reports for that route is that refusal. A schema-valid /v1/reduce whose budget cannot
    # be met answers 422 over_budget; a `dimensions` the served model cannot give answers 400 (the
    # model's dimension is known only at run time). Anything else (a 5xx, a response that breaks its
    # schema, an undocumented status, a schema-violating request accepted) fails the test.
    def accepted(finding: tuple[str, str]) -> bool:
        marker = _ACCEPTED.get(finding)
        seen = bodies.get(finding[0], [])
        return marker is not None and bool(seen) and all(marker in body for body in seen)

    unexpected = {f for f in found if not accepted(f)}
    assert not unexpected, f"schemathesis findings {sorted(unexpected)} (full report: {report})"
    # it ran: exit 1 exactly when it reported findings (the accepted one too), 0 when none; else it crashed
    assert out.returncode == (1 if found else 0), f"schemathesis exited {out.returncode} (report: {report})"
