"""The process tree of a selector: its process group and, on Linux, the descendants that left it.

A descendant can leave the group (``setsid()``, ``setpgid()``). On Linux,
:class:`ProcessTree` therefore also finds the live descendants of the selector through
``/proc`` when it kills a selector that is still running (timeout, oversized output, a
worker replaced or closed, a cancelled turn): it stops each with SIGSTOP (so none forks
behind the walk), holds it by a pidfd (so a reused pid is never signalled), then kills the
group and every one of them. A descendant whose parent exited before the kill was
re-parented to init and is no longer anyone's descendant: only a cgroup could find it (see
``docs/exec-protocol.md``, "Process rules").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

from shortlist._events import emit
from shortlist.exec._events import ExecDescendantsKilled

__all__ = ["ProcessTree"]

_HAS_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc/self")
_MAX_ROUNDS = 16


@dataclass(frozen=True, slots=True)
class _Stat:
    state: str
    ppid: int
    pgid: int
    start: int  # clock ticks since boot: with the pid, a process's identity


def _stat(pid: int) -> _Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        fields = data.rsplit(b")", 1)[1].split()  # the command name may hold spaces and parentheses
        return _Stat(fields[0].decode("ascii", "replace"), int(fields[1]), int(fields[2]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def _scan() -> dict[int, _Stat]:
    table: dict[int, _Stat] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            found = _stat(int(name))
            if found is not None:
                table[int(name)] = found
    return table


class _Held:
    """One descendant, held by a pidfd when the platform has them (else by pid and start time)."""

    __slots__ = ("fd", "pgid", "pid", "start")

    def __init__(self, pid: int, stat: _Stat) -> None:
        self.pid, self.pgid, self.start = pid, stat.pgid, stat.start
        self.fd = -1
        pidfd_open: Callable[[int], int] | None = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            with contextlib.suppress(OSError):
                self.fd = pidfd_open(pid)

    def same(self) -> bool:
        """True while the pid still names the process seen in the scan (checked after the pidfd is open)."""
        now = _stat(self.pid)
        return now is not None and now.start == self.start

    def signal(self, sig: int) -> None:
        send: Callable[[int, int], None] | None = getattr(signal, "pidfd_send_signal", None)
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if self.fd >= 0 and send is not None:
                send(self.fd, sig)
            elif self.same():
                os.kill(self.pid, sig)

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class ProcessTree:
    """A spawned selector process and, on Linux, its descendants: what a kill must reach.

    Args:
        pid: the spawned process (our child; a new session, so also its process group id).
        selector: the selector's name, for the event.
        worker: the process is a persistent worker.
    """

    def __init__(self, pid: int, *, selector: str, worker: bool = False) -> None:
        self.pid = pid
        self.selector = selector
        self.worker = worker
        root = _stat(pid) if _HAS_PROC else None
        self._start = root.start if root is not None else None
        self._held: dict[int, _Held] = {}

    def _root_running(self) -> bool:
        """True while ``pid`` is still our live (not exited, not reaped and reused) process."""
        if self._start is None:
            return False
        root = _stat(self.pid)
        return root is not None and root.start == self._start and root.state not in ("Z", "X")

    def _collect(self, *, stop: bool) -> None:
        """Hold every live descendant (stopping each first when ``stop``), until a scan finds no new one."""
        for _ in range(_MAX_ROUNDS):
            table = _scan()
            children: dict[int, list[int]] = {}
            for pid, stat in table.items():
                children.setdefault(stat.ppid, []).append(pid)
            fresh: list[int] = []
            seen: set[int] = set()
            frontier = [self.pid, *self._held]
            while frontier:
                for child in children.get(frontier.pop(), ()):
                    if child != self.pid and child not in self._held and child not in seen:
                        seen.add(child)
                        fresh.append(child)
                        frontier.append(child)
            if not fresh:
                return
            for pid in fresh:
                held = _Held(pid, table[pid])
                if not held.same():  # exited (or its pid reused) between the scan and the pidfd
                    held.close()
                    continue
                if stop:
                    held.signal(signal.SIGSTOP)
                self._held[pid] = held

    def snapshot(self) -> None:
        """Hold the current descendants without stopping them (before a graceful stop lets the root exit)."""
        if self._root_running():
            self._collect(stop=False)

    def kill(self) -> tuple[int, ...]:
        """SIGKILL the process group and every held or live descendant; return the pids outside the group.

        An :class:`~shortlist.exec._events.ExecDescendantsKilled` event names those escapees.
        """
        if self._root_running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGSTOP)  # nothing in the group forks while the tree is walked
            self._collect(stop=True)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        escaped: list[int] = []
        for held in self._held.values():
            held.signal(signal.SIGKILL)
            held.close()
            if held.pgid != self.pid:
                escaped.append(held.pid)
        self._held.clear()
        if escaped:
            emit(ExecDescendantsKilled(selector=self.selector, pid=self.pid, pids=tuple(escaped), worker=self.worker))
        return tuple(escaped)
