"""Install hints name the command that works for this installation (issue 27, item 23).

A clone installed with ``pip install -e .`` was told ``pip install 'shortlist[server]'``, which
fails (the package is not on the index for it) or would replace the clone. The origin is read
from the distribution's ``direct_url.json`` (PEP 610); the subprocess cases put a real
``.dist-info`` directory first on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shortlist._install import InstallOrigin, _from_direct_url, pip_install_for

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.parametrize(
    ("direct_url", "origin"),
    [
        (
            {"url": "file:///home/me/shortlist", "dir_info": {"editable": True}},
            InstallOrigin(Path("/home/me/shortlist"), True),
        ),
        ({"url": "file:///home/me/my%20clone", "dir_info": {}}, InstallOrigin(Path("/home/me/my clone"), False)),
        ({"url": "file:///tmp/shortlist-0.1.0.tar.gz", "archive_info": {}}, None),
        ({"url": "https://github.com/x/shortlist", "vcs_info": {"vcs": "git"}}, None),
        ("not json", None),
        ([], None),
        (None, None),
    ],
)
def test_direct_url_says_where_shortlist_came_from(direct_url: object, origin: InstallOrigin | None) -> None:
    text = direct_url if direct_url is None or isinstance(direct_url, str) else json.dumps(direct_url)
    assert _from_direct_url(text) == origin


def test_the_command_for_each_origin(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    assert pip_install_for(InstallOrigin(), "server") == "pip install 'shortlist[server]'"
    assert pip_install_for(InstallOrigin(), None) == "pip install shortlist"
    editable = InstallOrigin(clone, editable=True)
    assert pip_install_for(editable, "server", cwd=clone) == "pip install -e '.[server]'"
    assert pip_install_for(editable, "server", cwd=tmp_path) == f"pip install -e '{clone}[server]'"
    assert pip_install_for(InstallOrigin(clone), "mcp", cwd=clone) == "pip install '.[mcp]'"
    assert pip_install_for(editable, None, cwd=clone) == "pip install -e '.'"


def _site(tmp_path: Path, direct_url: dict[str, object] | None) -> Path:
    site = tmp_path / "site"
    info = site / "shortlist-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shortlist\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return site


def _run(site: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(SRC)])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.slow  # subprocesses with a real dist-info directory on sys.path
def test_a_clone_installed_editable_is_told_pip_install_e(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    clone.mkdir()
    site = _site(tmp_path, {"url": clone.as_uri(), "dir_info": {"editable": True}})
    code = (
        "import sys; sys.modules['fastapi'] = None\n"
        "from shortlist.cli import main; sys.exit(main(['serve', '--port', '0']))"
    )
    out = _run(site, code, cwd=clone)
    assert out.returncode == 2, out.stderr
    assert "pip install -e '.[server]'" in out.stderr, out.stderr
    assert "'shortlist[server]'" not in out.stderr
    elsewhere = _run(
        site,
        "from shortlist.cli._output import missing_module_hint as h\n"
        "print(h(ModuleNotFoundError('x', name='psycopg')))",
        cwd=tmp_path,
    )
    assert elsewhere.stdout.strip().endswith(f"pip install -e '{clone}[postgres]'"), elsewhere.stderr


@pytest.mark.slow
def test_an_index_install_is_told_the_package_name(tmp_path: Path) -> None:
    site = _site(tmp_path, None)
    out = _run(site, "from shortlist._install import pip_install; print(pip_install('server'))", cwd=tmp_path)
    assert out.stdout.strip() == "pip install 'shortlist[server]'", out.stderr


@pytest.mark.slow
def test_a_source_tree_that_is_not_installed_is_told_pip_install_e(tmp_path: Path) -> None:
    # -S: no site-packages, so no installed distribution; shortlist is imported from src/
    code = (
        f"import sys; sys.path.insert(0, {str(SRC)!r})\n"
        "from shortlist._install import pip_install\nprint(pip_install('qdrant'))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.stdout.strip() == f"pip install -e '{SRC.parent}[qdrant]'", out.stderr
