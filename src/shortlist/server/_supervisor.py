"""The worker supervisor of ``shortlist serve --workers N``: never kill a worker that is still starting.

uvicorn's supervisor (0.54, ``uvicorn.supervisors.Multiprocess``) pings every worker every 0.5 s
through a pipe and kills one that does not answer within ``timeout_worker_healthcheck`` (5 s),
from the moment it is spawned. A worker answers from a thread it starts only once the new
interpreter has imported uvicorn and unpickled its config, and it answers late whenever a
long C call holds the GIL (importing onnxruntime, building an index, loading the embedding
model); under load a fresh worker missed the 5 s repeatedly, was killed and respawned, and
readiness took 108 s.

:class:`ServiceSupervisor` keeps uvicorn's supervisor (signals, restarts, ``SIGHUP`` reloads) and
changes one rule: a worker that has not yet reported *started* (its lifespan done: catalogs,
selectors built and warmed, models loaded, socket listening) is only checked for being alive as
an OS process, and asked without blocking whether it has started. It gets
``startup_timeout`` seconds (``serve --startup-timeout``, default 600); past that it is replaced,
with a :class:`WorkerEvent` ``startup_timeout`` (ERROR). Once started, the usual ping with
``timeout_worker_healthcheck`` (``serve --worker-healthcheck-timeout``) applies. Each worker's
start-up time is a :class:`WorkerEvent` ``started`` (INFO), a hung worker's kill ``unresponsive``
(ERROR) and a death ``died`` (WARNING).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from socket import socket
from typing import ClassVar

from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from shortlist._events import Event, emit
from shortlist.server._protocol import ServiceConfig

__all__ = ["ServiceSupervisor", "WorkerEvent"]

logger = logging.getLogger("shortlist.server")


@dataclass(frozen=True, kw_only=True)
class WorkerEvent(Event):
    """A worker process of ``serve --workers N`` started, died, hung or did not start in time.

    ``state``: ``started`` (``seconds`` = time from spawn to serving), ``died``, ``unresponsive``
    (no answer to a health check within ``timeout_s``; killed) or ``startup_timeout`` (not started
    within ``timeout_s``; killed and replaced).
    """

    name: ClassVar[str] = "server.worker"
    area: ClassVar[str] = "server"
    level: int = logging.INFO
    state: str = ""
    pid: int = 0
    seconds: float = 0.0
    timeout_s: float = 0.0
    exitcode: int | None = None


class _Starting:
    """A worker not yet started: when it was spawned, and whether a ping is waiting for its answer."""

    def __init__(self) -> None:
        self.since = time.monotonic()
        self.pinged = False


class ServiceSupervisor(Multiprocess):
    """uvicorn's ``Multiprocess`` with a start-up grace period per worker (see the module docs).

    Args:
        config: the service's uvicorn config (its ``startup_timeout`` bounds a worker's start).
        sockets: the listening socket(s) (or the ``SO_REUSEPORT`` reservation) for the workers.
    """

    def __init__(self, config: ServiceConfig, sockets: list[socket]) -> None:
        super().__init__(config, sockets)
        self.startup_timeout = config.startup_timeout
        self._starting: dict[int, _Starting] = {}

    def _spawn(self) -> Process:
        process = Process(self.config, self.sockets)
        process.start()
        self._starting[id(process)] = _Starting()
        return process

    def init_processes(self) -> None:
        """Start the workers (each in its start-up grace period)."""
        for _ in range(self.processes_num):
            self.processes.append(self._spawn())

    def _has_started(self, process: Process, state: _Starting) -> bool:
        """Ask without blocking whether ``process`` finished start-up (one ping in flight at a time)."""
        try:
            if not state.pinged:
                process.parent_conn.send(b"ping")
                state.pinged = True
            if process.parent_conn.poll(0):
                state.pinged = False
                return bool(process.parent_conn.recv())
        except (OSError, EOFError):
            return False
        return False

    def keep_subprocess_alive(self) -> None:
        """Replace dead or hung workers; give starting ones until ``startup_timeout``."""
        if self.should_exit.is_set():
            return
        for idx, process in enumerate(self.processes):
            state = self._starting.get(id(process))
            alive = process.process.is_alive()
            if alive and state is not None:
                elapsed = time.monotonic() - state.since
                if self._has_started(process, state):
                    del self._starting[id(process)]
                    emit(WorkerEvent(state="started", pid=process.pid or 0, seconds=round(elapsed, 3)))
                    continue
                if elapsed <= self.startup_timeout:
                    continue
                emit(
                    WorkerEvent(
                        state="startup_timeout",
                        level=logging.ERROR,
                        pid=process.pid or 0,
                        seconds=round(elapsed, 3),
                        timeout_s=self.startup_timeout,
                    )
                )
            elif alive:
                if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                    continue
                emit(
                    WorkerEvent(
                        state="unresponsive",
                        level=logging.ERROR,
                        pid=process.pid or 0,
                        timeout_s=float(self.config.timeout_worker_healthcheck),
                    )
                )
            self._starting.pop(id(process), None)
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                # the app, config or socket is broken and would fail the same way on every restart
                logger.error("worker %s failed to start (exit %d); stopping", process.pid, STARTUP_FAILURE)
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            if not alive:
                emit(WorkerEvent(state="died", level=logging.WARNING, pid=process.pid or 0, exitcode=process.exitcode))
            self.processes[idx] = self._spawn()

    def restart_all(self) -> None:
        """``SIGHUP``: replace each worker once its replacement has started (within ``startup_timeout``)."""
        for idx, old in enumerate(self.processes):
            if self.should_exit.is_set():
                return
            new = Process(self.config, self.sockets)
            new.start()
            if not new.wait_until_ready(self.startup_timeout, self.should_exit):
                new.kill()
                new.join()
                if not self.should_exit.is_set():
                    emit(
                        WorkerEvent(
                            state="startup_timeout",
                            level=logging.ERROR,
                            pid=new.pid or 0,
                            timeout_s=self.startup_timeout,
                        )
                    )
                    logger.error("restart aborted: the new worker did not start; keeping worker %s", old.pid)
                return
            old.terminate()
            old.join()
            self.processes[idx] = new

    def handle_ttin(self) -> None:
        """``SIGTTIN``: one more worker (in its start-up grace period)."""
        logger.info("SIGTTIN: adding a worker")
        self.processes_num += 1
        self.processes.append(self._spawn())
