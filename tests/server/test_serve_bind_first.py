"""``shortlist serve`` binds before it announces anything, and its readiness check knows its own server.

Before: on a taken port it printed "listening on ..." before the bind failed, and when the port
belonged to another ``shortlist serve`` it printed "ready on ..." because the other one answered
``/readyz``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from serve_process import serve_process

pytestmark = pytest.mark.slow  # starts `shortlist serve` processes


def _serve(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(port), "--no-progress", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_readyz_names_its_instance(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--selector", "bm25") as srv:
        first = httpx.get(f"{srv.url}/readyz", timeout=10).json()
        again = httpx.get(f"{srv.url}/readyz", timeout=10).json()
        log = srv.log_text()
    assert isinstance(first["instance"], str) and len(first["instance"]) >= 16
    assert first["instance"] == again["instance"]
    assert f"ready on {srv.url}" in log


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_held_by_another_shortlist_serve_is_refused_without_announcing(tmp_path: Path, workers: str) -> None:
    with serve_process(tmp_path, "--selector", "bm25", "--workers", workers) as other:
        before = httpx.get(f"{other.url}/readyz", timeout=10).json()["instance"]
        proc = _serve(other.port, "--selector", "bm25", "--workers", workers)
        after = httpx.get(f"{other.url}/readyz", timeout=10).json()["instance"]
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines == [f"shortlist: error: serve: cannot bind 127.0.0.1:{other.port}: Address already in use"]
    assert before == after


def test_a_port_held_by_any_listener_is_refused_before_listening_is_said() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = _serve(port, "--selector", "bm25")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "listening on" not in proc.stderr and "ready on" not in proc.stderr and "starting on" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"shortlist: error: serve: cannot bind 127.0.0.1:{port}")
