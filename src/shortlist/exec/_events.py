"""The events of the exec area (logger ``shortlist.exec``): spawns, kills, restarts, truncations, refusals."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from shortlist._events import Event

__all__ = [
    "ExecDescendantsKilled",
    "ExecForwardFailed",
    "ExecKilled",
    "ExecNotAWorker",
    "ExecReasonTruncated",
    "ExecRequestFailed",
    "ExecSocketRefused",
    "ExecSpawned",
    "ExecWorkerRestarted",
]


@dataclass(frozen=True, kw_only=True)
class ExecSpawned(Event):
    """An external selector process was started (every call, or once per worker)."""

    name: ClassVar[str] = "exec.spawned"
    area: ClassVar[str] = "exec"
    level: int = logging.DEBUG
    selector: str = ""
    pid: int = 0
    sandbox: str = "direct"
    worker: bool = False
    program: str = ""


@dataclass(frozen=True, kw_only=True)
class ExecKilled(Event):
    """An external selector's process group was killed (``timeout``, ``oversized``, ``protocol_error``…)."""

    name: ClassVar[str] = "exec.killed"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    selector: str = ""
    pid: int = 0
    reason: str = ""
    elapsed_ms: float = 0.0
    worker: bool = False
    stderr_tail: str = ""


@dataclass(frozen=True, kw_only=True)
class ExecWorkerRestarted(Event):
    """A persistent worker was started again because the previous one died or was killed."""

    name: ClassVar[str] = "exec.worker_restarted"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    selector: str = ""
    reason: str = ""
    restarts: int = 0
    old_pid: int = 0
    pid: int = 0


@dataclass(frozen=True, kw_only=True)
class ExecDescendantsKilled(Event):
    """Descendants of a selector that had left its process group (``setsid``/``setpgid``) were killed.

    ``pids`` are those escapees; the group itself is killed as usual (``exec.killed`` says why).
    """

    name: ClassVar[str] = "exec.descendants_killed"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    selector: str = ""
    pid: int = 0
    pids: tuple[int, ...] = ()
    worker: bool = False


@dataclass(frozen=True, kw_only=True)
class ExecReasonTruncated(Event):
    """A selector's ``reason`` was longer than ``MAX_REASON_CHARS`` and was cut at the protocol boundary."""

    name: ClassVar[str] = "exec.reason_truncated"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    selector: str = ""
    chars: int = 0
    kept: int = 0


@dataclass(frozen=True, kw_only=True)
class ExecRequestFailed(Event):
    """``shortlist exec-selector`` could not answer a request (a bad document or a failing selector).

    ``protocol`` is True when the request itself was refused (not JSON, too deep, wrongly typed);
    the caller got ``{"id": ..., "error": ...}`` in-band (worker) or on stderr with exit 1.
    """

    name: ClassVar[str] = "exec.request_failed"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    request_id: int | str | None = None
    error: str = ""
    protocol: bool = False
    worker: bool = False


@dataclass(frozen=True, kw_only=True)
class ExecForwardFailed(Event):
    """A spawned ``exec-selector`` could not forward to its daemon or service; it answered in-process.

    ``target`` is ``socket`` or ``http``; ``reason`` says why (refused, no socket, reset, a
    daemon serving another config, an HTTP status…).
    """

    name: ClassVar[str] = "exec.forward_failed"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    target: str = ""
    address: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class ExecSocketRefused(Event):
    """A daemon socket, its folder, its peer or its log was not this user's alone, and was refused.

    ``side`` is ``client`` (a spawned call would not send its query there: it answers as the
    exec client's failure rules say, after ``exec.forward_failed``) or ``daemon`` (a connection
    from another user was closed unanswered).
    """

    name: ClassVar[str] = "exec.socket_refused"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    side: str = "client"
    address: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class ExecNotAWorker(Event):
    """A ``worker: true`` program answered no line at all before its deadline.

    It may not speak the line protocol: a program that reads stdin to its end (a spawn-per-call
    selector) waits for an EOF that a worker never gets. ``exec.killed`` follows.
    """

    name: ClassVar[str] = "exec.not_a_worker"
    area: ClassVar[str] = "exec"
    level: int = logging.WARNING
    selector: str = ""
    pid: int = 0
    elapsed_ms: float = 0.0
