"""One source for the version: ``__version__`` in ``src/shortlist/__init__.py``.

The package metadata is built from it (``[tool.hatch.version]``); the deployment files cannot
read Python, so their image tags are copies this test holds to it.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import shortlist

ROOT = Path(__file__).resolve().parent.parent
COPIES = [
    "deploy/compose.yaml",
    "deploy/k8s/shortlist.yaml",
    "deploy/k8s/index-job.yaml",
    "deploy/Dockerfile",
    "docs/deploy.md",
]


def test_the_package_metadata_is_built_from_dunder_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "src/shortlist/__init__.py"
    assert metadata.version("shortlist") == shortlist.__version__


def test_every_deployment_image_tag_is_the_version() -> None:
    for name in COPIES:
        tags = re.findall(r"\bshortlist:(\d[\w.+-]*)", (ROOT / name).read_text(encoding="utf-8"))
        assert tags, f"{name}: no shortlist image tag"
        assert set(tags) == {shortlist.__version__}, name


def test_the_cli_prints_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    from shortlist.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"shortlist {shortlist.__version__}\n"
