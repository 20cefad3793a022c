"""A stand-in for deploy/compose.yaml on this machine: its two replicas' own commands, as processes.

There is no container engine here, so the test reads the compose file and runs what it says
on loopback: the ``index`` service's ``shortlist index build``, then the commands of the two
``shortlist serve`` services with their environment, against a real PostgreSQL server. What is
substituted, and nothing else: free loopback ports for ``--host 0.0.0.0 --port 8080``, for
``--health-port 8081`` (the healthcheck's port) and for
``postgres:5432``; host folders for the mounts (``./etc`` is deploy/etc itself, named volumes
and secrets are temp folders and files); and the embedded index backend for Qdrant (no Qdrant
server binary can be installed here, and Qdrant's local file mode admits one process only),
so the replicas share an index folder instead of a collection.

It shows what the replicas share: a memory written through one is recalled through the other,
both answer ``/v1/retrieve`` and ``/v1/select`` the same, and the second keeps answering when
the first is killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from deploy_files import DEPLOY, argv, compose_mounts, load_compose, option, resolve_mount

from loopback import PostgresServer, free_port, wait_until

pytestmark = pytest.mark.slow  # two `shortlist serve` replicas and PostgreSQL

PASSWORD = "stand-in-password"
KEY = "stand-in-key"


@dataclass
class Replica:
    """One ``shortlist serve`` process of the stand-in."""

    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    healthcheck: list[str] = field(default_factory=list)

    def client(self, key: str | None = KEY) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    def log_tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]

    def kill(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)  # its own process group: the uvicorn workers too


class Localizer:
    """Maps the container world of one compose service to this machine."""

    def __init__(self, service: Mapping[str, Any], tmp: Path, hosts: Mapping[str, str], secrets: Mapping[str, Path]):
        self.mounts = compose_mounts(service)
        self.tmp, self.hosts, self.secrets = tmp, hosts, secrets

    def path(self, container_path: str) -> str:
        found = resolve_mount(container_path, self.mounts)
        if found is None:
            return container_path
        source, rest = found
        if source.startswith("secret:"):
            base = self.secrets[source.removeprefix("secret:")]
        elif source.startswith("."):
            base = (DEPLOY / source).resolve()
        else:  # a named volume
            base = self.tmp / "volumes" / source
            base.mkdir(parents=True, exist_ok=True)
        return str(base / rest) if rest else str(base)

    def text(self, value: str) -> str:
        for container_host, local in self.hosts.items():
            value = value.replace(container_host, local)
        return value

    def args(self, args: list[str]) -> list[str]:
        out = []
        for a in args:
            name, sep, rest = a.partition("=")
            if a.startswith("/"):
                a = self.path(a)
            elif sep and rest.startswith("/") and not name.startswith("-"):  # NAME=PATH (--catalog)
                a = f"{name}={self.path(rest)}"
            out.append(self.text(a))
        return out

    def env(self, environment: Mapping[str, Any]) -> dict[str, str]:
        return {k: self.text(str(v)) for k, v in environment.items()}


def _shortlist_exe() -> list[str]:
    exe = Path(sys.executable).with_name("shortlist")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "shortlist.cli"]


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHORTLIST_", "PROMETHEUS_", "PYTEST_"))}
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@pytest.fixture
def shortlist_database(postgres: PostgresServer) -> Iterator[dict[str, str]]:
    """The role and database that compose's postgres service creates from its environment."""
    pg_env = load_compose({"PG_PASSWORD": PASSWORD})["services"]["postgres"]["environment"]
    user, db = pg_env["POSTGRES_USER"], pg_env["POSTGRES_DB"]
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {db} OWNER {user}")
    yield {"postgres:5432": f"127.0.0.1:{postgres.port}"}
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def _wait_ready(replicas: list[Replica], deadline_s: float = 90.0) -> None:
    pending = list(replicas)

    def all_ready() -> bool:
        for r in list(pending):
            assert r.proc.poll() is None, f"{r.name} exited with {r.proc.returncode}:\n{r.log_tail()}"
            try:
                if httpx.get(f"{r.url}/readyz", timeout=2.0).status_code == 200:
                    pending.remove(r)
            except httpx.HTTPError:
                pass
        return not pending

    ready = wait_until(all_ready, seconds=deadline_s)
    assert ready, "not ready in time: " + "; ".join(f"{r.name}:\n{r.log_tail()}" for r in pending)


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in ("ms", "s", "m", "h"):
        if duration.endswith(unit):
            return float(duration[: -len(unit)]) * units[unit]
    return float(duration)


def test_compose_replicas_share_memories_corpus_and_catalog(shortlist_database: dict[str, str], tmp_path: Path) -> None:
    compose = load_compose({"PG_PASSWORD": PASSWORD})
    services: dict[str, Any] = compose["services"]
    serving = sorted(n for n, s in services.items() if argv(s.get("command", []))[:2] == ["shortlist", "serve"])
    indexing = [n for n, s in services.items() if argv(s.get("command", []))[:3] == ["shortlist", "index", "build"]]
    assert serving == ["shortlist-a", "shortlist-b"] and indexing == ["index"]

    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "shortlist-keys").write_text(f"{KEY}\n", encoding="utf-8")
    secrets = {name: secrets_dir / name for name in compose["secrets"]}
    hosts = dict(shortlist_database)

    # 1. the index service, with the embedded backend standing in for the Qdrant cluster
    index_service = services["index"]
    loc = Localizer(index_service, tmp_path, hosts, secrets)
    args = argv(index_service["command"])
    assert option(args, "--backend") == "qdrant"
    at = args.index("--url")
    args = [*args[:at], *args[at + 2 :]]
    args[args.index("--backend") + 1] = "embedded"
    built = subprocess.run(
        [*_shortlist_exe(), *loc.args(args[1:])], env=_base_env(), capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    corpus_path = Path(loc.path(option(args, "--path")))
    assert (corpus_path / "manifest.json").is_file()

    # 2. the two replicas, each its compose command and environment on its own port
    replicas: list[Replica] = []
    try:
        for name in serving:
            service = services[name]
            port = free_port()
            loc = Localizer(service, tmp_path, {**hosts, "0.0.0.0": "127.0.0.1"}, secrets)
            args = argv(service["command"])
            args[args.index("--port") + 1] = str(port)
            # each container has its own probe port: here each replica gets a free one
            health_port = free_port()
            args[args.index("--health-port") + 1] = str(health_port)
            container_port = option(argv(service["command"]), "--health-port")
            log = tmp_path / f"{name}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [*_shortlist_exe(), *loc.args(args[1:])],
                    env={**_base_env(), **loc.env(service.get("environment", {}))},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            check = [a.replace(f":{container_port}/", f":{health_port}/") for a in service["healthcheck"]["test"][1:]]
            check = [sys.executable if a == "python" else a for a in check]
            replicas.append(Replica(name, f"http://127.0.0.1:{port}", proc, log, check))
        _wait_ready(replicas)
        one, two = replicas

        # compose's own healthcheck command passes against a ready replica
        for r in replicas:
            assert subprocess.run(r.healthcheck, timeout=30).returncode == 0, r.name

        scope = {"user_id": "alice"}
        with one.client() as c1, two.client() as c2, two.client(key=None) as anonymous:
            # the keys file secret is wired: no key, no answer
            assert anonymous.post("/v1/memory/list", json={"scope": scope}).status_code == 401

            # memories: PostgreSQL is the one store of record
            wrote = c1.post("/v1/memory/remember", json={"scope": scope, "content": "Alice prefers express shipping"})
            assert wrote.status_code == 200, wrote.text
            recalled = c2.post("/v1/memory/recall", json={"scope": scope, "query": "shipping preference"}).json()
            assert [m["content"] for m in recalled["memories"]] == ["Alice prefers express shipping"]

            # corpus: both serve the index the index service built
            ask = {
                "scope": scope,
                "messages": [{"role": "user", "content": "How do I get my money back for an order?"}],
            }
            got = [c.post("/v1/retrieve", json=ask) for c in (c1, c2)]
            assert [g.status_code for g in got] == [200, 200], [g.text for g in got]
            docs = [[(d["id"], d["content"], d["confidence"]) for d in g.json()["documents"]] for g in got]
            assert docs[0] == docs[1] and docs[0][0][0] == "refunds.md#0"

            # catalog: the same file in both replicas, the same selection
            pick = {"query": "will it rain in Lisbon tomorrow", "catalog": "tools", "k": 3}
            sel = [c.post("/v1/select", json=pick).json() for c in (c1, c2)]
            assert sel[0]["selected"] == sel[1]["selected"] and sel[0]["selected"][0] == "get_weather_forecast"

            # replica one crashes: replica two goes on, with everything shared
            one.kill(signal.SIGKILL)
            one.proc.wait(timeout=30)
            with pytest.raises(httpx.TransportError):
                c1.get("/healthz")
            assert httpx.get(f"{two.url}/readyz").status_code == 200
            again = c2.post("/v1/memory/recall", json={"scope": scope, "query": "shipping preference"}).json()
            assert [m["content"] for m in again["memories"]] == ["Alice prefers express shipping"]
            assert (
                c2.post("/v1/memory/remember", json={"scope": scope, "content": "after the crash"}).status_code == 200
            )
            assert c2.post("/v1/retrieve", json=ask).json()["documents"][0]["id"] == "refunds.md#0"
            assert c2.post("/v1/select", json=pick).json()["selected"] == sel[0]["selected"]

        # replica two stops on SIGTERM within compose's stop_grace_period, cleanly
        two.kill(signal.SIGTERM)
        assert two.proc.wait(timeout=_seconds(services["shortlist-b"]["stop_grace_period"])) == 0, two.log_tail()
    finally:
        for r in replicas:
            r.kill(signal.SIGKILL)
            r.proc.wait(timeout=30)
        shutil.rmtree(tmp_path / "volumes", ignore_errors=True)
