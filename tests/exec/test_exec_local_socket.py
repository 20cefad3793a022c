"""The exec daemon's socket is this user's alone (issue 27, items 7 and 8), and a fresh machine's first calls.

Another local user can bind a socket path first and receive every query sent there, or plant a
symlink where ``--autostart`` writes its log. A spawned call trusts a socket only when the file
is its user's with mode 0600 and the accepting process runs as its user (``SO_PEERCRED``); the
default socket lives in a private folder; the log is opened ``O_NOFOLLOW``. "Another user" is
played by a real process running as ``nobody`` (uid 65534), so those tests need root.

Item 29: a forwarded call waits for a warming daemon within the caller's deadline and gives up
cleanly before it; ``--warm --catalog`` fills the cache; a killed embedding keeps its progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from promptkit_payload import TOOLS_200
from test_promptkit import SHORTLIST, go_unmarshal_selected, spawn

from loopback import wait_until
from shortlist._events import Event, add_event_hook, remove_event_hook
from shortlist._localsock import UntrustedSocket, default_socket_path, open_private_log, private_dir
from shortlist.embeddings._cache import SAVE_EVERY, VectorStore, cached_embed, text_key
from shortlist.errors import ConfigError
from shortlist.exec._daemon import ExecDaemon, _claim
from shortlist.exec._events import ExecSocketRefused
from shortlist.exec._receiver import answer
from shortlist.rankers._registry import SelectorRegistry, create_builtin_selector

NOBODY = 65534
#: The other user's programs use only the standard library; the system interpreter, which any user may run.
OTHER_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="playing another local user needs root")


def expected_bm25(raw: bytes) -> list[str]:
    selected: list[str] = json.loads(answer(create_builtin_selector("bm25"), raw)[0])["selected"]
    return selected


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A world-writable sticky folder (like /tmp) where another user can bind a socket."""
    path = Path(tempfile.mkdtemp(prefix="shortlist-shared-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


_ATTACKER = textwrap.dedent(
    """
    import os, socket, sys
    path, got, mode, listen_as = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, int(mode, 8))
    if listen_as != os.geteuid():
        os.setuid(listen_as)  # SO_PEERCRED names the process that listened
    s.listen(4)
    print("ready", flush=True)
    conn, _ = s.accept()
    conn.settimeout(5)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except OSError:
        pass
    with open(got, "w") as fh:
        fh.write(str(len(data)))
    """
)


@contextlib.contextmanager
def attacker(path: Path, got: Path, *, mode: str, listen_as: int, user: int | None) -> Iterator[None]:
    """A real process of another user listening on ``path``; it writes how many bytes it received to ``got``."""
    proc = subprocess.Popen(
        [OTHER_PYTHON, "-c", _ATTACKER, str(path), str(got), mode, str(listen_as)],
        stdout=subprocess.PIPE,
        user=user,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        yield
    finally:
        # it may be blocked in accept: let it take one
        with contextlib.suppress(OSError, ValueError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as poke:
            poke.connect(str(path))
        proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()


def refused_then_in_process(proc: subprocess.CompletedProcess[bytes], raw: bytes, why: bytes) -> None:
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"exec.socket_refused" in proc.stderr and b"exec.forward_failed" in proc.stderr
    assert why in proc.stderr
    assert go_unmarshal_selected(proc.stdout) == expected_bm25(raw)


# --- item 7: a socket another user bound first -------------------------------------------------------------------


@pytest.mark.slow
@as_root
def test_a_socket_bound_first_by_another_user_receives_nothing(shared_dir: Path) -> None:
    sock, got = shared_dir / "exec.sock", shared_dir / "got"
    raw = TOOLS_200.read_bytes()
    with attacker(sock, got, mode="777", listen_as=NOBODY, user=NOBODY):
        proc = spawn(raw, "--selector", "bm25", "--connect", str(sock))
    assert got.read_text() == "0"  # the query never reached it
    refused_then_in_process(proc, raw, f"belongs to uid {NOBODY}".encode())


@pytest.mark.slow
@as_root
def test_a_socket_file_of_mine_served_by_another_user_is_refused_by_its_peer_credentials(shared_dir: Path) -> None:
    sock, got = shared_dir / "exec.sock", shared_dir / "got"
    raw = TOOLS_200.read_bytes()
    # the file is root's with mode 0600, but the process that listens runs as nobody
    with attacker(sock, got, mode="600", listen_as=NOBODY, user=None):
        assert sock.stat().st_uid == os.geteuid()
        proc = spawn(raw, "--selector", "bm25", "--connect", str(sock))
    assert got.read_text() == "0"
    refused_then_in_process(proc, raw, f"is served by uid {NOBODY}".encode())


@pytest.mark.slow
def test_a_socket_open_to_other_users_is_refused(tmp_path: Path) -> None:
    sock, got = tmp_path / "exec.sock", tmp_path / "got"
    raw = TOOLS_200.read_bytes()
    with attacker(sock, got, mode="777", listen_as=os.geteuid(), user=None):
        proc = spawn(raw, "--selector", "bm25", "--connect", str(sock))
    assert got.read_text() == "0"
    refused_then_in_process(proc, raw, b"has mode 0777")


def test_the_default_socket_lives_in_a_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    path = Path(default_socket_path())
    assert path == runtime / "shortlist" / "exec.sock"
    st = os.lstat(path.parent)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert Path(default_socket_path()) == tmp_path / "cache" / "shortlist" / "run" / "exec.sock"


def test_a_default_folder_that_is_a_symlink_or_open_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (runtime / "shortlist").symlink_to(elsewhere)
    with pytest.raises(UntrustedSocket, match="not a directory"):
        default_socket_path()
    (runtime / "shortlist").unlink()
    (runtime / "shortlist").mkdir()
    (runtime / "shortlist").chmod(0o777)
    with pytest.raises(UntrustedSocket, match="mode 0777"):
        default_socket_path()


@as_root
def test_a_default_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    with pytest.raises(UntrustedSocket, match=f"belongs to uid {NOBODY}"):
        private_dir(folder)


@as_root
def test_the_daemon_never_replaces_another_users_socket(shared_dir: Path) -> None:
    sock = shared_dir / "exec.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(sock))
    os.chown(sock, NOBODY, NOBODY)
    with pytest.raises(ConfigError, match=f"belongs to uid {NOBODY}"):
        _claim(sock)
    assert sock.exists()


@pytest.mark.slow
@as_root
def test_the_daemon_closes_a_connection_from_another_user_unanswered(shared_dir: Path) -> None:
    sock = shared_dir / "exec.sock"
    events: list[Event] = []  # emitted on the daemon's connection thread: a process-wide hook
    add_event_hook(events.append)
    registry = SelectorRegistry(None)
    daemon = ExecDaemon(registry, default="bm25", config=None)
    ready = threading.Event()
    thread = threading.Thread(target=daemon.serve, args=(sock,), kwargs={"on_ready": ready.set}, daemon=True)
    thread.start()
    try:
        assert ready.wait(30)
        sock.chmod(0o666)  # as if the mode had been loosened: the peer check still holds
        client = textwrap.dedent(
            """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sys.argv[1])
            try:
                s.sendall(b'{"v": 1, "selector": null, "config": null}\\n' + open(sys.argv[2], "rb").read())
                s.shutdown(socket.SHUT_WR)
                print(len(s.recv(65536)))
            except OSError:  # closed by the daemon
                print(0)
            """
        )
        payload = shared_dir / "req.json"
        payload.write_bytes(TOOLS_200.read_bytes())
        payload.chmod(0o644)
        out = subprocess.run(
            [OTHER_PYTHON, "-c", client, str(sock), str(payload)], capture_output=True, user=NOBODY, timeout=30
        )
        assert out.returncode == 0, out.stderr.decode()
        assert out.stdout.strip() == b"0"  # closed, nothing answered
        refusals = [e for e in events if isinstance(e, ExecSocketRefused)]
        assert refusals and refusals[0].side == "daemon" and f"uid {NOBODY}" in refusals[0].reason
        assert daemon.served == 0
    finally:
        daemon.shutdown()
        thread.join(10)
        registry.close()
        remove_event_hook(events.append)


# --- item 8: the autostart log ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_autostart_never_appends_through_a_planted_symlink(tmp_path: Path) -> None:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    sock = folder / "auto.sock"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    Path(f"{sock}.log").symlink_to(victim)
    raw = TOOLS_200.read_bytes()
    proc = spawn(raw, "--selector", "bm25", "--autostart", "--connect", str(sock))
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"daemon not started" in proc.stderr and b"symlink" in proc.stderr
    assert victim.read_text() == "precious\n"
    assert not sock.exists()
    assert go_unmarshal_selected(proc.stdout) == expected_bm25(raw)


@pytest.mark.slow
def test_autostart_refuses_a_socket_folder_other_users_may_write(shared_dir: Path) -> None:
    sock = shared_dir / "auto.sock"
    proc = spawn(TOOLS_200.read_bytes(), "--selector", "bm25", "--autostart", "--connect", str(sock))
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"daemon not started" in proc.stderr and b"mode 1777" in proc.stderr
    assert not Path(f"{sock}.log").exists()


def test_the_private_log_is_created_0600_and_refuses_a_symlink(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    fd = open_private_log(log)
    os.close(fd)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    link = tmp_path / "y.log"
    link.symlink_to(log)
    with pytest.raises(UntrustedSocket, match="symlink"):
        open_private_log(link)


# --- item 29: a fresh machine ------------------------------------------------------------------------------------


def test_a_killed_embedding_keeps_the_parts_it_saved(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.sqlite3")
    texts = [f"tool number {i} does thing {i}" for i in range(SAVE_EVERY * 3)]
    calls = 0

    def compute(batch: list[str]) -> np.ndarray:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt  # the process is killed mid-catalog
        return np.ones((len(batch), 4), dtype=np.float32)

    with pytest.raises(KeyboardInterrupt):
        cached_embed(store, "m", texts, compute)
    kept = store.get("m", [text_key(t) for t in texts])
    assert len(kept) == 2 * SAVE_EVERY
    out, hits, misses = cached_embed(store, "m", texts, lambda b: np.ones((len(b), 4), dtype=np.float32))
    assert (hits, misses) == (2 * SAVE_EVERY, SAVE_EVERY) and out.shape == (len(texts), 4)
    store.close()


@pytest.mark.slow
def test_warm_fills_the_cache_so_a_cold_call_embeds_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {"SHORTLIST_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"}
    warm = subprocess.run(
        [SHORTLIST, "exec-selector", "--warm", "--catalog", str(TOOLS_200)],
        capture_output=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert warm.returncode == 0, warm.stderr.decode()
    summary = json.loads(warm.stdout)
    assert summary["warmed"] == 200 and summary["cache"] == str(cache)
    store = VectorStore(cache / "vectors.sqlite3")
    rows = store.info().vectors
    assert rows >= 200
    assert list((cache / "models").iterdir())  # the model's optimised graph is kept too
    proc = spawn(TOOLS_200.read_bytes(), env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert 0 < len(go_unmarshal_selected(proc.stdout)) < 200
    assert store.info().vectors == rows  # the catalog was all there: nothing embedded again
    store.close()


def test_warm_needs_a_catalog_and_says_so(tmp_path: Path) -> None:
    from shortlist.cli import main

    assert main(["exec-selector", "--warm"]) == 2
    assert main(["exec-selector", "--warm", "--catalog", str(tmp_path / "none.json")]) == 2


@pytest.mark.slow
def test_a_call_gives_up_before_the_callers_deadline_instead_of_being_killed(tmp_path: Path) -> None:
    sock = tmp_path / "warming.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    sock.chmod(0o600)
    listener.listen(4)  # a daemon still warming up: it accepts (the backlog) and does not answer yet
    try:
        start = time.monotonic()
        proc = spawn(TOOLS_200.read_bytes(), "--selector", "bm25", "--connect", str(sock), "--timeout-ms", "1500")
        took = time.monotonic() - start
    finally:
        listener.close()
    assert proc.returncode == 1 and proc.stdout == b""
    first = proc.stderr.splitlines()[0]
    assert json.loads(first) == {"error": f"the daemon on {sock} did not answer within timeout_ms 1500"}
    assert b"exec.forward_failed" in proc.stderr
    assert took < 1.5 + 1.5  # about the caller's deadline (the events are written after the error), not 60 s


@pytest.mark.slow
def test_autostart_uses_the_default_private_socket(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    raw = TOOLS_200.read_bytes()
    proc = spawn(raw, "--selector", "bm25", "--autostart", "--timeout-ms", "60000", env=env)
    sock = runtime / "shortlist" / "exec.sock"
    log = Path(f"{sock}.log")
    assert wait_until(lambda: log.exists() and b"(pid " in log.read_bytes(), seconds=60)
    pid = int(log.read_text().split("(pid ", 1)[1].split(")", 1)[0])
    try:
        assert proc.returncode == 0, proc.stderr.decode()
        assert b"exec.forward_failed" not in proc.stderr
        assert go_unmarshal_selected(proc.stdout) == expected_bm25(raw)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    finally:
        os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not sock.exists(), seconds=30)


def test_no_runtime_and_no_home_folder_is_a_clear_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    with pytest.raises(UntrustedSocket, match="set XDG_RUNTIME_DIR"):
        default_socket_path()
