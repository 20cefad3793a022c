"""``shortlist serve`` as a real process on 127.0.0.1 for the connection and start-up tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from loopback import free_port, wait_http_ready, wait_until


@dataclass
class ServeProcess:
    """A running ``shortlist serve``: its process, base URL, port and log file."""

    proc: subprocess.Popen[str]
    url: str
    port: int
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def serve_process(
    tmp: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    ready_within: float = 120.0,
    wait: bool = True,
    verbose: bool = False,
) -> Iterator[ServeProcess]:
    """Run ``shortlist [-v] serve --port FREE *args`` until the block exits (SIGTERM, then SIGKILL)."""
    port = free_port()
    log = tmp / f"serve-{port}.log"
    full_env = dict(os.environ if env is None else env)
    full_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "shortlist.cli",
                *(["-v"] if verbose else []),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=full_env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready means the server has also said so: its announcement polls /readyz from 127.0.0.1 until it
        # answers, and a test that fills 127.0.0.1's connection cap before that poll lands would see the
        # poll refused (and counted) every 0.1 s.
        deadline = time.monotonic() + ready_within
        if wait and not (
            wait_http_ready(url, proc=proc, seconds=ready_within)
            and wait_until(
                lambda: f"ready on {url}" in log.read_text(errors="replace"),
                seconds=max(deadline - time.monotonic(), 1.0),
                proc=proc,
                interval=0.05,
            )
        ):
            raise AssertionError(f"serve not ready within {ready_within:g} s: {log.read_text()[-3000:]}")
        yield ServeProcess(proc, url, port, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
