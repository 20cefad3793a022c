"""File access for skills without blocking and without a check-then-use gap (POSIX).

* :func:`read_regular_file` opens a file non-blocking, refuses anything but a regular file
  (a FIFO, device or socket is never read, so it cannot hang a turn) and reads a bounded
  number of bytes.
* :func:`open_beneath` opens a path *beneath* a folder the way ``openat2(RESOLVE_BENEATH)``
  does: every component is opened with ``O_NOFOLLOW`` relative to the file descriptor of the
  directory before it, so no component can be swapped for a symlink between a check and the
  open. Symlinks met on the way are read with ``readlinkat`` and followed by hand, only while
  they stay inside the folder: an absolute target, or a ``..`` that climbs above the folder,
  is an escape. ``..`` pops the walk's own stack of directory descriptors, never the
  kernel's ``..``.

Limit: a directory that is *moved* (renamed) out of the folder while a walk holds its
descriptor is still read from; that needs write access outside the folder, which the
threat this guards (a skill folder's own content) does not have.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MAX_SYMLINKS", "BeneathError", "open_beneath", "read_at_most", "read_regular_file"]

#: The most symlinks one :func:`open_beneath` walk follows (Linux's own limit is 40).
MAX_SYMLINKS = 40

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class BeneathError(Exception):
    """A refused open; ``reason`` is a stable code, ``detail`` an optional explanation."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def read_at_most(fd: int, limit: int) -> bytes:
    """Read up to ``limit`` bytes from ``fd`` (fewer only at end of file)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_open_file(fd: int, limit: int) -> bytes:
    """Refuse a non-regular ``fd``, then read at most ``limit + 1`` bytes (so "too large" shows)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise BeneathError("not_regular_file")
    return read_at_most(fd, limit + 1)


def read_regular_file(path: Path, limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes of the regular file ``path`` (symlinks are followed).

    Raises:
        BeneathError: ``not_regular_file``; ``missing``; ``unreadable`` (with the OS message).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        raise BeneathError("missing") from None
    except OSError as exc:
        raise BeneathError("unreadable", exc.strerror or str(exc)) from None
    try:
        return _read_open_file(fd, limit)
    except OSError as exc:
        raise BeneathError("unreadable", exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def _is_final(pending: Sequence[str]) -> bool:
    return all(p in ("", ".") for p in pending)


def _follow(name: str, dir_fd: int, open_error: OSError) -> str:
    """The target of the symlink ``name`` that ``O_NOFOLLOW`` refused to open."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        raise BeneathError("changed") from None
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise BeneathError("unreadable", exc.strerror or str(exc)) from None
    # not a symlink: a file where a directory was needed, or an entry swapped since the open
    if open_error.errno == errno.ENOTDIR:
        raise BeneathError("missing", "a component of the path is not a directory")
    raise BeneathError("changed")


def open_beneath(base: Path, parts: Sequence[str], limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes of the regular file ``parts`` beneath the folder ``base``.

    ``base`` itself is opened as given (it may be reached through symlinks: it is configured,
    not supplied by the model).

    Raises:
        BeneathError: ``escapes`` (an absolute symlink, or ``..`` above ``base``),
            ``symlink_loop`` (more than :data:`MAX_SYMLINKS`), ``missing``, ``not_regular_file``
            (a directory, FIFO, device or socket), ``changed`` (an entry changed during the
            walk), ``unreadable``.
    """
    try:
        root = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    except FileNotFoundError:
        raise BeneathError("missing", "the skill's folder does not exist") from None
    except OSError as exc:
        raise BeneathError("unreadable", exc.strerror or str(exc)) from None
    stack = [root]
    pending = list(reversed(parts))  # the next component is pending[-1]
    hops = 0
    try:
        while pending:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) == 1:
                    raise BeneathError("escapes")
                os.close(stack.pop())
                continue
            final = _is_final(pending)
            flags = os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC | (os.O_NONBLOCK if final else os.O_DIRECTORY)
            try:
                fd = os.open(part, flags, dir_fd=stack[-1])
            except FileNotFoundError:
                raise BeneathError("missing") from None
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise BeneathError("unreadable", exc.strerror or str(exc)) from None
                target = _follow(part, stack[-1], exc)
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise BeneathError("symlink_loop") from None
                if target.startswith("/"):
                    raise BeneathError("escapes", "through a symlink to an absolute path") from None
                pending.extend(reversed(target.split("/")))
                continue
            if not final:
                stack.append(fd)
                continue
            try:
                return _read_open_file(fd, limit)
            except OSError as exc:
                raise BeneathError("unreadable", exc.strerror or str(exc)) from None
            finally:
                os.close(fd)
        raise BeneathError("not_regular_file")  # the path names a directory (the folder itself)
    finally:
        for fd in stack:
            os.close(fd)
