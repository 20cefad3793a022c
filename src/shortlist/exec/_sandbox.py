"""Where an external selector runs: build the command line and the environment for each sandbox.

A sandbox only *rewrites* the launch; the exec client spawns what it returns. Modes:

* ``direct``: the command itself, on this machine;
* ``docker_run``: ``docker run --rm -i [--network=X] [-v M]… [-e NAME]… [extra…] IMAGE CMD ARGS…``;
* ``docker_exec``: ``docker exec -i [--workdir=W] [--user=U] [-e NAME]… [extra…] CONTAINER CMD ARGS…``;
* ``kubectl_exec``: ``kubectl [--kubeconfig=F] [--context=C] exec -i [-n NS] [-c C] [extra…] POD --
  [env NAME=value…] CMD ARGS…``.

Environment rules (unlike the reference, nothing leaks from the host):

* the process gets **only** what the selector's ``env`` grants (bare ``NAME`` forwards the
  host value and is skipped when unset; ``NAME=value`` is literal) plus a minimal base
  (``PATH``, ``HOME``, ``LANG``, copied from the host when set);
* docker: granted variables are passed as ``-e NAME`` flags and their values are put in the
  environment of the local ``docker`` client only, which forwards them into the container
  (so values never appear on a command line); the client also keeps its own connection
  variables (``DOCKER_HOST``, ``DOCKER_CONFIG``, …) when set on the host;
* kubectl: ``kubectl exec`` has no env flag, so the command is wrapped as
  ``env NAME=value … CMD`` (values are visible in the local argv; prefer secrets mounted in
  the pod); the client keeps ``KUBECONFIG`` when set on the host.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shortlist.errors import ConfigError

__all__ = [
    "BASE_ENV_NAMES",
    "SANDBOX_MODES",
    "DirectSandbox",
    "DockerExecSandbox",
    "DockerRunSandbox",
    "KubectlExecSandbox",
    "Launch",
    "Sandbox",
    "base_env",
    "build_sandbox",
    "grant_env",
]

#: Host variables every selector process gets (when set on the host).
BASE_ENV_NAMES: tuple[str, ...] = ("PATH", "HOME", "LANG")

_DOCKER_CLIENT_ENV = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY")
_KUBECTL_CLIENT_ENV = ("KUBECONFIG",)


@dataclass(frozen=True, slots=True)
class Launch:
    """What to spawn locally: the argv and the complete environment of the local process."""

    argv: tuple[str, ...]
    env: dict[str, str]


def base_env(host: Mapping[str, str] | None = None, names: Sequence[str] = BASE_ENV_NAMES) -> dict[str, str]:
    """Return the minimal base environment: ``names`` copied from ``host`` when set."""
    host = os.environ if host is None else host
    return {n: host[n] for n in names if n in host}


def grant_env(entries: Sequence[str], host: Mapping[str, str] | None = None) -> dict[str, str]:
    """Resolve a selector's ``env`` entries against the host environment.

    Args:
        entries: ``NAME`` (forward the host's value; skipped when unset) or ``NAME=value`` (literal).
        host: the host environment (default ``os.environ``).

    Returns:
        The granted variables, in entry order (a later entry overrides an earlier one).
    """
    host = os.environ if host is None else host
    granted: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if sep:
            granted[name] = value
        elif name in host:
            granted[name] = host[name]
    return granted


class Sandbox(ABC):
    """Rewrites a selector's command line and environment for where it runs.

    Args:
        name: the sandbox's name in ``spec.sandboxes`` (``direct`` for the default).
    """

    #: The mode this class implements.
    mode: str = ""

    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def wrap(self, argv: Sequence[str], granted: Mapping[str, str], host: Mapping[str, str] | None = None) -> Launch:
        """Return the local launch for ``argv`` whose process must see ``granted`` (and the base env)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class DirectSandbox(Sandbox):
    """Run the command on this machine with the base environment plus the granted variables."""

    mode = "direct"

    def __init__(self, name: str = "direct") -> None:
        super().__init__(name)

    def wrap(self, argv: Sequence[str], granted: Mapping[str, str], host: Mapping[str, str] | None = None) -> Launch:
        """Return ``argv`` unchanged with an isolated environment."""
        return Launch(tuple(argv), {**base_env(host), **granted})


def _client_env(host: Mapping[str, str] | None, extra_names: Sequence[str]) -> dict[str, str]:
    return base_env(host, (*BASE_ENV_NAMES, *extra_names))


class DockerRunSandbox(Sandbox):
    """``docker run --rm -i …``: a fresh container per spawn (or one long-lived for a worker)."""

    mode = "docker_run"

    def __init__(
        self,
        name: str,
        *,
        image: str,
        network: str | None = None,
        mounts: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        docker_path: str = "docker",
    ) -> None:
        super().__init__(name)
        self.image = image
        self.network = network
        self.mounts = tuple(mounts)
        self.extra_args = tuple(extra_args)
        self.docker_path = docker_path

    def wrap(self, argv: Sequence[str], granted: Mapping[str, str], host: Mapping[str, str] | None = None) -> Launch:
        """Return the ``docker run`` command line; granted variables travel as ``-e NAME``."""
        cmd = [self.docker_path, "run", "--rm", "-i"]
        if self.network:
            cmd.append(f"--network={self.network}")
        for mount in self.mounts:
            cmd += ["-v", mount]
        for name in granted:
            cmd += ["-e", name]
        cmd += [*self.extra_args, self.image, *argv]
        return Launch(tuple(cmd), {**_client_env(host, _DOCKER_CLIENT_ENV), **granted})


class DockerExecSandbox(Sandbox):
    """``docker exec -i …`` into a running container."""

    mode = "docker_exec"

    def __init__(
        self,
        name: str,
        *,
        container: str,
        workdir: str | None = None,
        user: str | None = None,
        extra_args: Sequence[str] = (),
        docker_path: str = "docker",
    ) -> None:
        super().__init__(name)
        self.container = container
        self.workdir = workdir
        self.user = user
        self.extra_args = tuple(extra_args)
        self.docker_path = docker_path

    def wrap(self, argv: Sequence[str], granted: Mapping[str, str], host: Mapping[str, str] | None = None) -> Launch:
        """Return the ``docker exec`` command line; granted variables travel as ``-e NAME``."""
        cmd = [self.docker_path, "exec", "-i"]
        if self.workdir:
            cmd.append(f"--workdir={self.workdir}")
        if self.user:
            cmd.append(f"--user={self.user}")
        for name in granted:
            cmd += ["-e", name]
        cmd += [*self.extra_args, self.container, *argv]
        return Launch(tuple(cmd), {**_client_env(host, _DOCKER_CLIENT_ENV), **granted})


class KubectlExecSandbox(Sandbox):
    """``kubectl exec -i … POD -- CMD``: into a pod (a sidecar container, typically)."""

    mode = "kubectl_exec"

    def __init__(
        self,
        name: str,
        *,
        pod: str,
        namespace: str | None = None,
        container: str | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        extra_args: Sequence[str] = (),
        kubectl_path: str = "kubectl",
    ) -> None:
        super().__init__(name)
        self.pod = pod
        self.namespace = namespace
        self.container = container
        self.kubeconfig = kubeconfig
        self.context = context
        self.extra_args = tuple(extra_args)
        self.kubectl_path = kubectl_path

    def wrap(self, argv: Sequence[str], granted: Mapping[str, str], host: Mapping[str, str] | None = None) -> Launch:
        """Return the ``kubectl exec`` command line; granted variables wrap the command as ``env K=V``."""
        cmd = [self.kubectl_path]
        if self.kubeconfig:
            cmd.append(f"--kubeconfig={self.kubeconfig}")
        if self.context:
            cmd.append(f"--context={self.context}")
        cmd += ["exec", "-i"]
        if self.namespace:
            cmd += ["-n", self.namespace]
        if self.container:
            cmd += ["-c", self.container]
        cmd += [*self.extra_args, self.pod, "--"]
        if granted:
            cmd += ["env", *(f"{k}={v}" for k, v in granted.items())]
        cmd += list(argv)
        return Launch(tuple(cmd), _client_env(host, _KUBECTL_CLIENT_ENV))


# mode -> (class, required keys, optional keys)
_FACTORIES: dict[str, tuple[type[Sandbox], tuple[str, ...], tuple[str, ...]]] = {
    "direct": (DirectSandbox, (), ()),
    "docker_run": (DockerRunSandbox, ("image",), ("network", "mounts", "extra_args", "docker_path")),
    "docker_exec": (DockerExecSandbox, ("container",), ("workdir", "user", "extra_args", "docker_path")),
    "kubectl_exec": (
        KubectlExecSandbox,
        ("pod",),
        ("namespace", "container", "kubeconfig", "context", "extra_args", "kubectl_path"),
    ),
}

#: The sandbox modes that :func:`build_sandbox` knows.
SANDBOX_MODES: tuple[str, ...] = tuple(_FACTORIES)

_LIST_KEYS = frozenset({"mounts", "extra_args"})


def build_sandbox(name: str, mode: str, options: Mapping[str, Any] | None = None) -> Sandbox:
    """Build the sandbox declared as ``spec.sandboxes.<name>``.

    Args:
        name: the sandbox's name (used in error messages).
        mode: one of :data:`SANDBOX_MODES`.
        options: the mode's keys (``image``, ``pod``, ``extra_args``, …).

    Raises:
        ConfigError: unknown mode, a missing required key, an unknown key or a wrongly typed value.
    """
    path = f"spec.sandboxes.{name}"
    if mode not in _FACTORIES:
        raise ConfigError(
            f"sandbox {name!r} has unknown mode {mode!r}; known modes: {', '.join(SANDBOX_MODES)}",
            path=f"{path}.mode",
        )
    cls, required, optional = _FACTORIES[mode]
    opts = dict(options or {})
    known = {*required, *optional}
    for key in opts:
        if key not in known:
            raise ConfigError(
                f"sandbox {name!r} (mode {mode}) has unknown key {key!r}; "
                f"known keys: {', '.join(sorted(known)) or 'none'}",
                path=f"{path}.{key}",
            )
    for key in required:
        if not opts.get(key):
            raise ConfigError(f"sandbox {name!r} (mode {mode}) needs `{key}:`", path=f"{path}.{key}")
    for key, value in opts.items():
        if key in _LIST_KEYS:
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"sandbox {name!r}: {key} must be a list of strings", path=f"{path}.{key}")
        elif value is not None and not isinstance(value, str):
            raise ConfigError(f"sandbox {name!r}: {key} must be a string", path=f"{path}.{key}")
    opts = {k: v for k, v in opts.items() if v is not None}
    if mode == "direct":
        return DirectSandbox(name)
    factory: Any = cls
    built: Sandbox = factory(name, **opts)
    return built
