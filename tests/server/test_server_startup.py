"""Start-up of ``shortlist serve`` (issue 12, item 10): slow workers are not killed; ready means ready.

A worker's interpreter is made slow to start (a ``sitecustomize`` on its ``PYTHONPATH`` sleeps in
``multiprocessing`` spawn children only), which is what a loaded machine or a long GIL-holding
import does to uvicorn's 5 s health check: before the fix each worker was killed and respawned
forever.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import httpx
import pytest
from serve_process import serve_process
from server_helpers import EXAMPLE_CATALOG

from loopback import wait_http_ready

pytestmark = pytest.mark.slow  # starts `shortlist serve` processes

SPAWN_DELAY_S = 8  # past uvicorn's 5 s timeout_worker_healthcheck

SITECUSTOMIZE = """
import os, sys, time
if "--multiprocessing-fork" in sys.argv and os.environ.get("SHORTLIST_TEST_SPAWN_DELAY"):
    time.sleep(float(os.environ["SHORTLIST_TEST_SPAWN_DELAY"]))
"""


@pytest.mark.slow
def test_workers_slower_to_start_than_the_health_check_are_not_killed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, SHORTLIST_TEST_SPAWN_DELAY=str(SPAWN_DELAY_S))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    args = ("--workers", "2", "--catalog", f"ex={EXAMPLE_CATALOG}")
    with serve_process(tmp_path, *args, env=env, ready_within=90, verbose=True) as srv:
        ready_after = time.monotonic() - started
        assert ready_after >= SPAWN_DELAY_S  # the delay did apply
        log = ""
        for _ in range(300):  # the supervisor reports each worker's start (it polls every 0.5 s)
            log = srv.log_text()
            if len(re.findall(r"server\.worker state='started'", log)) == 2:
                break
            time.sleep(0.1)
        assert len(re.findall(r"server\.worker state='started'", log)) == 2, log[-3000:]
        assert "died" not in log and "unresponsive" not in log and "startup_timeout" not in log, log[-3000:]
        r = httpx.post(f"{srv.url}/v1/select", json={"query": "send an email", "catalog": "ex"}, timeout=10)
        assert r.status_code == 200


def test_readyz_lists_the_bound_selectors_built_and_warmed_without_a_catalog(tmp_path: Path) -> None:
    config = tmp_path / "runtime.yaml"
    config.write_text("spec:\n  selectors:\n    tools: {type: bm25}\n  tool_selector: tools\n")
    with serve_process(tmp_path, "--config", str(config)) as srv:
        body = httpx.get(f"{srv.url}/readyz", timeout=10).json()
    assert body["status"] == "ready"
    assert body["selectors"] == {"tool": "tools", "skill": "hybrid"}  # skills: the default selector


def test_a_bound_selector_that_cannot_be_built_stops_start_up(tmp_path: Path) -> None:
    # before the fix the service reported ready and every /v1/select answered 400
    config = tmp_path / "runtime.yaml"
    spec = {"selectors": {"tools": {"type": "bm25", "options": {"top_kk": 3}}}, "tool_selector": "tools"}
    config.write_text(json.dumps({"spec": spec}))
    with serve_process(tmp_path, "--config", str(config), wait=False) as srv:
        ready = wait_http_ready(srv.url, proc=srv.proc, seconds=120)
        code = srv.proc.wait(30) if not ready else None
        log = srv.log_text()
    assert not ready, "the service reported ready with a selector it cannot build"
    assert code not in (None, 0), log
    assert "top_kk" in log, log[-2000:]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--selector", "bm52"), "no selector named 'bm52'; did you mean 'bm25'?"),
        (("--catalog", "x=/nonexistent/tools.json"), "/nonexistent/tools.json"),
        (("--memory", "nosuch://x"), "nosuch"),
        # found only when the selector is built (the embedder of its provider): a worker's start-up
        (("--config", "{config}"), "embedding_providers[e]: type 'default' is an embedded model"),
    ],
)
def test_a_start_up_configuration_error_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    import subprocess
    import sys

    from loopback import free_port

    config = tmp_path / "runtime.yaml"
    spec = {
        "embedding_providers": [{"id": "e", "type": "default", "model": "no-such-model"}],
        "selectors": {"tools": {"type": "embedding"}},
        "tool_selector": "tools",
    }
    config.write_text(json.dumps({"spec": spec}))
    args = tuple(a.replace("{config}", str(config)) for a in args)
    proc = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(free_port()), "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and len(lines) <= 2, proc.stderr[-3000:]
    assert lines[-1].startswith("shortlist: error: ") and says in lines[-1], lines
