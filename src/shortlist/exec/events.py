"""The events of the exec client (logger ``shortlist.exec``): spawns, kills and worker restarts."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shortlist.events import Event

__all__ = ["ExecKilled", "ExecSpawned", "ExecWorkerRestarted"]


@dataclass(frozen=True, kw_only=True)
class ExecSpawned(Event):
    """An external selector process was started (every call, or once per worker)."""

    name: str = "exec.spawned"
    area: str = "exec"
    level: int = logging.DEBUG
    selector: str = ""
    pid: int = 0
    sandbox: str = "direct"
    worker: bool = False
    program: str = ""


@dataclass(frozen=True, kw_only=True)
class ExecKilled(Event):
    """An external selector's process group was killed (``timeout``, ``oversized``, ``protocol_error``…)."""

    name: str = "exec.killed"
    area: str = "exec"
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

    name: str = "exec.worker_restarted"
    area: str = "exec"
    level: int = logging.WARNING
    selector: str = ""
    reason: str = ""
    restarts: int = 0
    old_pid: int = 0
    pid: int = 0
