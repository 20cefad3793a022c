"""Read the deployment files under ``deploy/`` the way Docker Compose and Kubernetes read them.

Shared by the manifest checks and the two-replica stand-in: compose interpolation
(``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``), the shortlist commands of each
service or container, mounts, and the CLI parser those commands must satisfy.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "compose.yaml"
NGINX_CONF = DEPLOY / "nginx.conf"
K8S_DIR = DEPLOY / "k8s"
KUSTOMIZATION = DEPLOY / "kustomization.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
ENV_EXAMPLE = DEPLOY / ".env.example"

_VAR = re.compile(
    r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?(?P<op>[-?])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_]\w*))"
)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution on raw file text; a missing required variable raises ``KeyError``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("name") or m.group("bare")
        value = env.get(name)
        op, arg = m.group("op"), m.group("arg")
        if op == "-" and not value:
            return arg or ""
        if op == "?" and not value:
            raise KeyError(f"{name}: {arg}")
        return value or ""

    return _VAR.sub(sub, text)


def compose_variables(text: str) -> set[str]:
    """Names of the variables a compose file interpolates."""
    return {m.group("name") or m.group("bare") for m in _VAR.finditer(text) if m.group(0) != "$$"}


def load_compose(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """deploy/compose.yaml after interpolation (anchors and merge keys resolved by the YAML loader)."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    data = yaml.safe_load(interpolate(text, env if env is not None else {"PG_PASSWORD": "example"}))
    assert isinstance(data, dict)
    return data


def load_k8s() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes document of deploy/k8s/*.yaml with the file it comes from."""
    docs: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                docs.append((path, doc))
    return docs


def k8s_doc(kind: str, name: str) -> dict[str, Any]:
    """The one manifest of that kind and name."""
    found = [d for _, d in load_k8s() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def pod_spec(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template's spec of a Deployment or Job."""
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def argv(command: Any) -> list[str]:
    """A compose ``command`` (list or string) as an argv list."""
    import shlex

    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


@dataclass(frozen=True)
class ShortlistCommand:
    """A ``shortlist ...`` command found in a deployment file."""

    where: str
    argv: list[str]

    @property
    def subcommand(self) -> str:
        return self.argv[1]


def shortlist_commands() -> Iterator[ShortlistCommand]:
    """Every shortlist command of compose services and Kubernetes containers."""
    for name, service in load_compose()["services"].items():
        if "command" in service:
            args = argv(service["command"])
            if args and args[0] == "shortlist":
                yield ShortlistCommand(f"compose.yaml services.{name}", args)
    for path, doc in load_k8s():
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        for c in pod_spec(doc)["containers"]:
            args = [*c.get("command", []), *c.get("args", [])]
            if args and args[0] == "shortlist":
                yield ShortlistCommand(f"{path.name} {doc['kind']}/{doc['metadata']['name']} {c['name']}", args)


def parse_cli(args: list[str]) -> argparse.Namespace:
    """Parse ``shortlist ARGS`` with the real CLI parser; an argparse error becomes an AssertionError."""
    from shortlist.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return build_parser().parse_args(args)
    except SystemExit as exc:
        raise AssertionError(f"shortlist {' '.join(args)}: {err.getvalue().strip()}") from exc


def option(args: list[str], flag: str) -> str:
    """The value of ``flag`` in an argv list."""
    assert flag in args, f"{flag} missing from {args}"
    return args[args.index(flag) + 1]


def compose_mounts(service: Mapping[str, Any]) -> dict[str, str]:
    """Container path -> source (a path relative to deploy/ for bind mounts, else the volume name)."""
    mounts: dict[str, str] = {}
    for spec in service.get("volumes", []):
        parts = spec.split(":")
        mounts[parts[1]] = parts[0]
    for secret in service.get("secrets", []):
        mounts[f"/run/secrets/{secret}"] = f"secret:{secret}"
    return mounts


def resolve_mount(path: str, mounts: Mapping[str, str]) -> tuple[str, str] | None:
    """(source, rest) of the mount holding ``path`` (the longest matching target), or None."""
    best = max((t for t in mounts if path == t or path.startswith(t.rstrip("/") + "/")), key=len, default=None)
    if best is None:
        return None
    return mounts[best], path[len(best) :].lstrip("/")
