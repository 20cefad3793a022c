"""Sandboxes: the command lines each mode builds, env translation per backend, config errors, direct for real."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from exec_helpers import BEHAVE, PYTHON

from shortlist._config import parse_runtime_config
from shortlist._config_sections import SandboxConfig, SelectorConfig
from shortlist._types import Candidate, Query
from shortlist.errors import ConfigError
from shortlist.exec._sandbox import DirectSandbox, build_sandbox, grant_env
from shortlist.rankers._exec_client import ExecSelector

HOST = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "SECRET": "hunter2", "DOCKER_HOST": "tcp://d"}
GRANTED = {"API_KEY": "k1", "MODE": "fast"}


def test_grant_env_forwards_named_literal_and_skips_unset() -> None:
    host = {"API_KEY": "from-host", "OTHER": "x"}
    assert grant_env(["API_KEY", "MODE=a=b", "MISSING"], host) == {"API_KEY": "from-host", "MODE": "a=b"}


def test_direct_keeps_argv_and_isolates_env() -> None:
    launch = DirectSandbox().wrap(["python", "sel.py"], GRANTED, HOST)
    assert launch.argv == ("python", "sel.py")
    assert launch.env == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", **GRANTED}


def test_docker_run_command_line_and_env() -> None:
    sb = build_sandbox(
        "box",
        "docker_run",
        {
            "image": "ranker:1",
            "network": "none",
            "mounts": ["/models:/models:ro", "/cache:/cache"],
            "extra_args": ["--memory=512m"],
            "docker_path": "/opt/docker",
        },
    )
    launch = sb.wrap(["python", "/sel/rerank.py", "--fast"], GRANTED, HOST)
    assert launch.argv == (
        "/opt/docker", "run", "--rm", "-i", "--network=none",
        "-v", "/models:/models:ro", "-v", "/cache:/cache",
        "-e", "API_KEY", "-e", "MODE",
        "--memory=512m", "ranker:1", "python", "/sel/rerank.py", "--fast",
    )  # fmt: skip
    # values travel through the docker client's environment (`-e NAME`), never on the command line
    assert launch.env == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "DOCKER_HOST": "tcp://d", **GRANTED}
    assert "hunter2" not in launch.env.values()
    assert "k1" not in " ".join(launch.argv)


def test_docker_run_minimal() -> None:
    launch = build_sandbox("box", "docker_run", {"image": "img"}).wrap(["sel"], {}, {})
    assert launch.argv == ("docker", "run", "--rm", "-i", "img", "sel")


def test_docker_exec_command_line_and_env() -> None:
    sb = build_sandbox(
        "side",
        "docker_exec",
        {"container": "c1", "workdir": "/w", "user": "1000", "extra_args": ["--privileged=false"]},
    )
    launch = sb.wrap(["python", "sel.py"], GRANTED, HOST)
    assert launch.argv == (
        "docker", "exec", "-i", "--workdir=/w", "--user=1000", "-e", "API_KEY", "-e", "MODE",
        "--privileged=false", "c1", "python", "sel.py",
    )  # fmt: skip
    assert launch.env["API_KEY"] == "k1" and "SECRET" not in launch.env
    assert build_sandbox("s", "docker_exec", {"container": "c"}).wrap(["x"], {}, {}).argv == (
        "docker", "exec", "-i", "c", "x",
    )  # fmt: skip


def test_kubectl_exec_command_line_wraps_env() -> None:
    sb = build_sandbox(
        "sidecar",
        "kubectl_exec",
        {
            "pod": "agent-0",
            "namespace": "default",
            "container": "hooks",
            "kubeconfig": "/k/config",
            "context": "prod",
            "extra_args": ["--quiet"],
            "kubectl_path": "/usr/local/bin/kubectl",
        },
    )
    launch = sb.wrap(["python", "/selectors/rerank.py"], GRANTED, {**HOST, "KUBECONFIG": "/k"})
    assert launch.argv == (
        "/usr/local/bin/kubectl", "--kubeconfig=/k/config", "--context=prod", "exec", "-i",
        "-n", "default", "-c", "hooks", "--quiet", "agent-0", "--",
        "env", "API_KEY=k1", "MODE=fast", "python", "/selectors/rerank.py",
    )  # fmt: skip
    assert launch.env == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "KUBECONFIG": "/k"}


def test_kubectl_exec_without_env_has_no_wrapper() -> None:
    launch = build_sandbox("s", "kubectl_exec", {"pod": "p"}).wrap(["sel", "a"], {}, {})
    assert launch.argv == ("kubectl", "exec", "-i", "p", "--", "sel", "a")


@pytest.mark.parametrize(
    ("mode", "options", "match"),
    [
        ("podman", {}, "sandbox 'sb' has unknown mode 'podman'"),
        ("docker_run", {}, "sandbox 'sb' .*needs `image:`"),
        ("docker_exec", {"workdir": "/w"}, "sandbox 'sb' .*needs `container:`"),
        ("kubectl_exec", {"namespace": "n"}, "sandbox 'sb' .*needs `pod:`"),
        ("docker_run", {"image": "i", "imagee": "x"}, "sandbox 'sb' .*unknown key 'imagee'"),
        ("docker_run", {"image": "i", "mounts": "/a:/b"}, "mounts must be a list of strings"),
        ("kubectl_exec", {"pod": 3}, "pod must be a string"),
    ],
)
def test_sandbox_config_errors_name_the_sandbox(mode: str, options: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_sandbox("sb", mode, options)


def test_from_config_without_sandbox_uses_direct() -> None:  # spec §9 item 23
    sel = ExecSelector.from_config("r", SelectorConfig(command="python", args=["r.py"]), {})
    assert isinstance(sel.sandbox, DirectSandbox)
    assert sel.launch().argv == ("python", "r.py")


def test_from_config_applies_declared_sandbox_and_env() -> None:
    sandboxes = {
        "sidecar": SandboxConfig.model_validate({"mode": "kubectl_exec", "pod": "agent-0", "namespace": "default"})
    }
    cfg = SelectorConfig(command="python", args=["/s/rerank.py"], env=["TOKEN=abc"], sandbox="sidecar")
    launch = ExecSelector.from_config("rerank", cfg, sandboxes).launch()
    assert launch.argv == (
        "kubectl",
        "exec",
        "-i",
        "-n",
        "default",
        "agent-0",
        "--",
        "env",
        "TOKEN=abc",
        "python",
        "/s/rerank.py",
    )


def test_unknown_sandbox_name_fails_at_load_and_at_apply() -> None:  # spec §9 item 24
    data = {"spec": {"selectors": {"r": {"command": "python", "sandbox": "nowhere"}}}}
    with pytest.raises(ConfigError, match="nowhere"):
        parse_runtime_config(data)
    with pytest.raises(ConfigError, match="selector 'r' names sandbox 'nowhere'"):
        ExecSelector.from_config("r", SelectorConfig(command="python", sandbox="nowhere"), {})


def _fake_docker(tmp_path: Path) -> str:
    """A stand-in `docker` that runs `docker run --rm -i [-e NAME]... IMAGE CMD...` like a container would."""
    script = tmp_path / "fake_docker.py"
    script.write_text(
        "import os, sys\n"
        "args = sys.argv[1:]\n"
        "assert args[:3] == ['run', '--rm', '-i'], args\n"
        "args = args[3:]\n"
        "env = {'PATH': os.environ.get('PATH', '')}\n"
        "while args[0] == '-e':\n"
        "    name = args[1]\n"
        "    if name in os.environ:\n"
        "        env[name] = os.environ[name]\n"
        "    args = args[2:]\n"
        "os.execve(args[1], args[1:], env)  # args[0] is the image\n"
    )
    wrapper = tmp_path / "docker"
    wrapper.write_text(f'#!/bin/sh\nexec "{PYTHON}" "{script}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.mark.slow  # an exec selector process
def test_env_reaches_the_process_inside_a_docker_like_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORTLIST_TEST_SECRET", "do-not-leak")
    monkeypatch.setenv("RERANK_API_KEY", "granted-key")
    sandbox = build_sandbox("box", "docker_run", {"image": "img", "docker_path": _fake_docker(tmp_path)})
    sel = ExecSelector("in-box", PYTHON, [BEHAVE, "env"], env=["RERANK_API_KEY", "MODE=x"], sandbox=sandbox)
    env = json.loads(sel.select(Query("q"), [Candidate("a")]).reason)
    assert env["RERANK_API_KEY"] == "granted-key"
    assert env["MODE"] == "x"
    assert "SHORTLIST_TEST_SECRET" not in env
    assert os.environ["SHORTLIST_TEST_SECRET"] == "do-not-leak"
