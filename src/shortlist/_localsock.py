"""Private local sockets for the exec daemon: where the default one lives, and what makes one trusted.

Standard library only: the spawned thin client (``shortlist.cli._exec_forward``) imports it
before anything heavy. A UNIX socket path is a name another local user can take first (bind
it, mode 0777, and receive every query sent there), so:

* the default socket lives in a private directory: ``$XDG_RUNTIME_DIR/shortlist/`` when that is
  set, else ``$XDG_CACHE_HOME/shortlist/run/`` (``~/.cache/shortlist/run/``); the directory is
  created mode 0700 and refused when it is a symlink, another user's, or open to others;
* a client trusts a socket only when the file is its user's, of mode 0600 (no group or other
  bits), and the process that accepted the connection runs as its user (``SO_PEERCRED``);
* the daemon's log is opened ``O_NOFOLLOW`` (a planted symlink is refused) and must be a
  regular file of its user.

Refusals raise :class:`UntrustedSocket` (an ``OSError``: the caller's failure rules for a
daemon that is down apply, with the reason).
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from pathlib import Path

__all__ = [
    "DEFAULT_SOCKET_NAME",
    "UntrustedSocket",
    "check_peer",
    "check_socket_file",
    "connect_trusted",
    "default_socket_path",
    "open_private_log",
    "private_dir",
]

#: The default socket's file name inside the private directory.
DEFAULT_SOCKET_NAME = "exec.sock"
#: The longest path a UNIX socket address holds on Linux (``sun_path``, NUL included).
_SUN_PATH_MAX = 107


class UntrustedSocket(OSError):
    """A socket, its directory, its peer or its log is not this user's alone: refused."""


def _me() -> int:
    return os.geteuid()


def _trusted_uid(uid: int) -> bool:
    return uid in (_me(), 0)


def private_dir(path: str | os.PathLike[str], *, create: bool = True) -> Path:
    """``path`` as a directory only this user can enter, created mode 0700 (with its parents) when missing.

    Raises:
        UntrustedSocket: it is a symlink or not a directory, another user's, or group/other may use it.
    """
    p = Path(path)
    if create and not p.exists() and not p.is_symlink():
        p.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # made by a concurrent call: checked below like any other
            p.mkdir(mode=0o700)
    st = os.lstat(p)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UntrustedSocket(f"{p} is not a directory (a symlink or a file): refused as the socket's folder")
    if st.st_uid != _me():
        raise UntrustedSocket(f"{p} belongs to uid {st.st_uid}, not to you (uid {_me()}): refused")
    if st.st_mode & 0o077:
        raise UntrustedSocket(
            f"{p} has mode {stat.S_IMODE(st.st_mode):04o}: other users may use it; `chmod 700 {p}` or choose another"
        )
    return p


def default_socket_dir() -> Path:
    """The private directory of the default socket (not created).

    Raises:
        UntrustedSocket: there is no runtime folder and no home folder.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "shortlist"
    cache = os.environ.get("XDG_CACHE_HOME", "").strip()
    if cache and os.path.isabs(cache):
        return Path(cache) / "shortlist" / "run"
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no passwd entry
        raise UntrustedSocket("no home folder for the default socket; set XDG_RUNTIME_DIR") from None
    return home / ".cache" / "shortlist" / "run"


def default_socket_path(*, create: bool = True) -> str:
    """The default daemon socket, ``exec.sock`` in :func:`default_socket_dir`, its directory made private.

    Raises:
        UntrustedSocket: the directory cannot be trusted (see :func:`private_dir`), or the path is
            longer than a socket address holds.
    """
    folder = private_dir(default_socket_dir(), create=create) if create else default_socket_dir()
    path = str(folder / DEFAULT_SOCKET_NAME)
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise UntrustedSocket(f"socket path {path} is longer than {_SUN_PATH_MAX} bytes; set XDG_RUNTIME_DIR")
    return path


def check_socket_file(path: str | os.PathLike[str]) -> None:
    """Refuse a socket file that is not this user's with mode 0600 (another user may have bound it first).

    Raises:
        FileNotFoundError: nothing there.
        UntrustedSocket: not a socket, another user's, or open to group/other.
    """
    st = os.stat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise UntrustedSocket(f"{path} is not a socket: refused")
    if not _trusted_uid(st.st_uid):
        raise UntrustedSocket(f"socket {path} belongs to uid {st.st_uid}, not to you (uid {_me()}): refused")
    if st.st_mode & 0o077:
        raise UntrustedSocket(
            f"socket {path} has mode {stat.S_IMODE(st.st_mode):04o} (a daemon's is 0600): refused, another "
            "user may have bound it"
        )


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected UNIX socket, or None where the OS cannot say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    raw = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


def check_peer(conn: socket.socket, what: str) -> None:
    """Refuse a connection whose peer runs as another user (root excepted).

    Raises:
        UntrustedSocket: the peer's uid is not this user's.
    """
    uid = peer_uid(conn)
    if uid is not None and not _trusted_uid(uid):
        raise UntrustedSocket(f"{what} is served by uid {uid}, not by you (uid {_me()}): refused")


def connect_trusted(path: str, timeout_s: float) -> socket.socket:
    """Connect to the daemon socket ``path``, then check the file and who accepted, before anything is sent.

    Raises:
        FileNotFoundError, ConnectionRefusedError: nobody listens there.
        UntrustedSocket: the socket or its peer is another user's.
        OSError: any other connection failure.
    """
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout_s)
        conn.connect(path)  # refused or missing: nothing is sent, the caller's rules for a daemon that is down apply
        check_socket_file(path)
        check_peer(conn, f"socket {path}")
    except BaseException:
        conn.close()
        raise
    return conn


def open_private_log(path: str | os.PathLike[str]) -> int:
    """Open ``path`` for appending, mode 0600, never through a symlink; return the descriptor.

    Raises:
        UntrustedSocket: ``path`` is a symlink, not a regular file, another user's, or has other links.
        OSError: it cannot be opened.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise UntrustedSocket(f"log {path} is a symlink: refused") from None
        raise exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != _me() or st.st_nlink != 1:
        os.close(fd)
        raise UntrustedSocket(f"log {path} is not a regular file of yours with one link: refused")
    return fd
