"""Congruence (library = server = CLI), graceful shutdown, and ``shortlist serve`` as a real process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_helpers import serve

from loopback import free_port, wait_http_ready, wait_until
from shortlist._events import Event, add_event_hook, remove_event_hook
from shortlist.selection._facade import Shortlist
from shortlist.server import ServerSettings

pytestmark = pytest.mark.slow  # starts `shortlist serve` processes and the CLI

EXAMPLE = Path(str(resources.files("shortlist.data") / "example_tools.json"))
BEHAVE = Path(__file__).resolve().parent.parent / "fixtures" / "selectors" / "behave.py"
QUERIES = ["send an email to bob", "what's the weather in Paris tomorrow", "create an invoice for ACME", "", "zzz"]


def test_library_server_and_cli_give_identical_ids() -> None:
    with Shortlist(EXAMPLE) as sl:
        library = [list(sl.select(q, k=5).ids) for q in QUERIES]
    with serve(ServerSettings(catalogs={"ex": str(EXAMPLE)})) as srv, srv.client() as c:
        server = [c.post("/v1/select", json={"query": q, "catalog": "ex", "k": 5}).json()["selected"] for q in QUERIES]
    cli = []
    for q in QUERIES:
        out = subprocess.run(
            [sys.executable, "-m", "shortlist.cli", "select", "--json", "--catalog", str(EXAMPLE), "--k", "5", q],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        cli.append(json.loads(out.stdout)["selected"])
    assert library == server == cli
    assert library[0][0] == "send_email" and len(library[3]) > 5  # a narrowed turn and a fallback turn


def test_graceful_shutdown_finishes_in_flight_requests_and_stops_workers(tmp_path: Path) -> None:
    config = tmp_path / "runtime.yaml"
    config.write_text(
        "spec:\n  selectors:\n"
        f"    slow:\n      command: {sys.executable}\n      args: [{str(BEHAVE)!r}, sleep, '1.5']\n"
        "      timeout_ms: 10000\n"
        f"    pidw:\n      command: {sys.executable}\n      args: [{str(BEHAVE)!r}, worker_pid]\n      worker: true\n"
    )
    spawned = threading.Event()

    def hook(event: Event) -> None:
        if event.name == "exec.spawned" and getattr(event, "selector", "") == "slow":
            spawned.set()

    cands = [{"id": "a", "description": "alpha"}, {"id": "b", "description": "beta"}]
    result: dict[str, Any] = {}
    add_event_hook(hook)
    try:
        with serve(ServerSettings(config_path=str(config))) as srv:
            with srv.client() as c:
                r = c.post("/v1/selectors/pidw:select", json={"query": {"text": "x"}, "candidates": cands})
                worker_pid = int(r.json()["reason"])
                os.kill(worker_pid, 0)  # the persistent worker is alive

            def in_flight() -> None:
                with srv.client() as c2:
                    result["r"] = c2.post(
                        "/v1/select", json={"query": "alpha", "candidates": cands, "selector": "slow"}
                    )

            t = threading.Thread(target=in_flight)
            t.start()
            assert spawned.wait(20), "the slow selector never started"
            srv.server.should_exit = True  # what SIGTERM does
            t.join(30)
            srv.thread.join(30)
            assert not srv.thread.is_alive()
    finally:
        remove_event_hook(hook)
    r = result["r"]
    assert r.status_code == 200 and r.json()["fallback"] is None and r.json()["ranked"] == ["a"]
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(worker_pid, 0)
            time.sleep(0.05)


def test_serve_names_the_flag_of_an_out_of_range_setting() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "serve", "--threads", "0", "--breaker-cooldown", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--threads: Input should be greater than or equal to 1" in out.stderr
    assert "--breaker-cooldown: Input should be greater than 0" in out.stderr


def test_serve_refuses_non_loopback_without_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SHORTLIST_API_KEYS"}
    out = subprocess.run(
        [sys.executable, "-m", "shortlist.cli", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 2
    assert "refusing to bind 0.0.0.0 without an API key" in out.stderr and "Traceback" not in out.stderr


def test_serve_with_two_workers_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, SHORTLIST_API_KEYS="k1,k2")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shortlist.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--catalog",
            f"ex={EXAMPLE}",
            "--memory",
            f"sqlite:///{tmp_path / 'm.db'}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_http_ready(url, proc=proc, seconds=30), "serve --workers 2 did not become ready"
        with httpx.Client(base_url=url, headers={"Authorization": "Bearer k2"}, timeout=10) as c:
            for _ in range(20):
                r = c.post("/v1/select", json={"query": "send an email", "catalog": "ex", "k": 2})
                assert r.status_code == 200 and r.json()["ranked"][0] == "send_email"
            assert httpx.post(f"{url}/v1/select", json={"query": "x", "catalog": "ex"}).status_code == 401
            # memories written through one worker are read through the other (shared SQLite file)
            for i in range(10):
                c.post("/v1/memory/remember", json={"scope": {"user_id": "w"}, "content": f"note {i}"})
            assert len(c.post("/v1/memory/list", json={"scope": {"user_id": "w"}}).json()["memories"]) == 10
            text = c.get("/metrics").text  # multiprocess mode: the sum over both workers
            assert 'shortlist_http_requests_total{method="POST",route="/v1/select",status="200"} 20.0' in text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    with proc:  # closes the stderr pipe
        err = proc.stderr.read() if proc.stderr else ""
    assert code == 0, err


def _established_per_pid(pids: list[int], port: int) -> dict[int, int]:
    """Established TCP connections on local ``port`` held by each of ``pids`` (from /proc)."""
    inodes: dict[str, int] = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    counts = dict.fromkeys(pids, 0)
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
            counts[inodes[fields[9]]] += 1
    return counts


def _listeners(port: int) -> int:
    """Listening TCP sockets on local ``port`` (state 0A in /proc/net/tcp)."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(1 for line in lines if int(line.split()[1].split(":")[1], 16) == port and line.split()[3] == "0A")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT balancing is Linux's")
def test_a_burst_of_connections_is_spread_over_the_workers() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shortlist.cli", "serve", "--port", str(port), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    conns: list[socket.socket] = []
    try:
        assert wait_http_ready(f"http://127.0.0.1:{port}", proc=proc, seconds=30), "serve did not become ready"
        workers = [
            int(p)
            for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        ]
        workers = [p for p in workers if "multiprocessing-fork" in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(workers) == 2
        # /readyz answered from one worker; wait until both listen
        assert wait_until(lambda: _listeners(port) == 2, seconds=60), f"{_listeners(port)} listening sockets"
        for _ in range(64):  # a burst, as a load balancer's pool or a load generator opens them
            conns.append(socket.create_connection(("127.0.0.1", port)))
        for c in conns:  # one request each, so every connection has been accepted
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for c in conns:
            assert c.recv(4096).startswith(b"HTTP/1.1 200")
        counts = _established_per_pid(workers, port)
        assert sum(counts.values()) == 64
        # the kernel hashes connections over both sockets: 32 +/- a few, never 64/0 or 54/10
        assert min(counts.values()) >= 16, counts
    finally:
        for c in conns:
            c.close()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    with proc:  # closes the stderr pipe
        err = proc.stderr.read() if proc.stderr else ""
    assert code == 0, err
