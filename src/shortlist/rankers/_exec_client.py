"""The exec client: a :class:`Selector` that asks an external process, per call or as a persistent worker.

Spawn-per-call (the default, like the reference): each :meth:`ExecSelector.select` starts
the program in its own process group, writes one request on stdin, closes it, and reads
one response from stdout. Persistent worker (``worker: true``): one long-lived process
answers newline-delimited requests, so a turn does not pay the start-up.

Every failure raises a :class:`~shortlist.errors.SelectorError` subclass carrying the
selector name, the elapsed time and the stderr tail; the selection core turns it into an
observable fallback. Timeouts kill the whole process group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from shortlist import _telemetry as telemetry
from shortlist._config_sections import SandboxConfig, SelectorConfig
from shortlist._events import emit
from shortlist._types import Candidate, Query, Selection
from shortlist.errors import ConfigError, SelectorError, SelectorProcessError, SelectorProtocolError, SelectorTimeout
from shortlist.exec._aprocess import arun_once
from shortlist.exec._encode import encode_candidates, encode_request
from shortlist.exec._events import ExecKilled, ExecNotAWorker, ExecSpawned, ExecWorkerRestarted
from shortlist.exec._process import RunResult, run_once
from shortlist.exec._protocol import WireResponse, decode_response, response_answers
from shortlist.exec._sandbox import DirectSandbox, Launch, Sandbox, build_sandbox, grant_env
from shortlist.exec._worker import WorkerProcess
from shortlist.selection._base import Selector

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "STDERR_TAIL_BYTES",
    "SUBSET_SLACK",
    "ExecSelector",
    "left_out_of",
]

#: The timeout used when ``timeout_ms`` is 0 or unset.
DEFAULT_TIMEOUT_MS = 10_000
#: The default cap on a response's size.
DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
#: How much of the process's stderr errors and events carry (its end).
STDERR_TAIL_BYTES = 2048
#: A worker request whose candidates are the acknowledged list less at most this many (in its order:
#: a ``find_tools`` search's pool is the catalog less the tools already loaded) goes as that list's
#: ``candidates_ref`` with ``k`` raised by the number left out, and its answer is read back to the
#: asked candidates: at 10,000 tools a search no longer sends (and the worker no longer parses) 5 MB.
SUBSET_SLACK = 64


class ExecSelector(Selector):
    """A selector implemented by an external program speaking the wire protocol v1.

    Args:
        name: the selector's name (errors and events carry it).
        command: the program (resolved against ``PATH`` of the base environment, or a path).
        args: its arguments.
        env: what the process may see besides ``PATH``, ``HOME`` and ``LANG``: ``NAME``
            forwards the host value (skipped when unset), ``NAME=value`` is literal.
        timeout_ms: the deadline of one call; 0 or None means :data:`DEFAULT_TIMEOUT_MS`.
        sandbox: where the process runs (default: :class:`DirectSandbox`).
        worker: keep one process alive and send it newline-delimited requests.
        max_output_bytes: a response larger than this is a protocol error.
        stderr_tail_bytes: how much of stderr errors carry.
    """

    def __init__(
        self,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Sequence[str] = (),
        timeout_ms: int | None = None,
        sandbox: Sandbox | None = None,
        worker: bool = False,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        stderr_tail_bytes: int = STDERR_TAIL_BYTES,
    ) -> None:
        if not command:
            raise ConfigError(f"selector {name!r} needs a command")
        if timeout_ms is not None and timeout_ms < 0:
            raise ConfigError(f"selector {name!r}: timeout_ms must be >= 0")
        if max_output_bytes <= 0:
            raise ConfigError(f"selector {name!r}: max_output_bytes must be positive")
        self.name = name
        self.command = command
        self.args = tuple(args)
        self.env = tuple(env)
        self.timeout_ms = timeout_ms or DEFAULT_TIMEOUT_MS
        self.sandbox = sandbox or DirectSandbox()
        self.worker = worker
        self.max_output_bytes = max_output_bytes
        self.stderr_tail_bytes = stderr_tail_bytes
        self._lock = threading.Lock()
        self._proc: WorkerProcess | None = None
        self._request_id = 0
        self._restarts = 0
        self._restart_reason = ""
        self._last_pid = 0
        self._acked_ref: str | None = None
        self._acked: Sequence[Candidate] = ()  # the list the worker acknowledged (``_acked_ref``'s)

    @classmethod
    def from_config(
        cls, name: str, cfg: SelectorConfig, sandboxes: Mapping[str, SandboxConfig] | None = None
    ) -> ExecSelector:
        """Build the selector declared as ``spec.selectors.<name>``.

        Raises:
            ConfigError: no command, or the sandbox is not declared (or is invalid).
        """
        if not cfg.command:
            raise ConfigError(f"selector {name!r} needs `command:`", path=f"spec.selectors.{name}.command")
        sandboxes = sandboxes or {}
        sandbox: Sandbox
        if not cfg.sandbox or (cfg.sandbox == "direct" and "direct" not in sandboxes):
            sandbox = DirectSandbox()
        elif cfg.sandbox in sandboxes:
            sb = sandboxes[cfg.sandbox]
            sandbox = build_sandbox(cfg.sandbox, sb.mode, sb.options)
        else:
            raise ConfigError(
                f"selector {name!r} names sandbox {cfg.sandbox!r}, which is not declared under spec.sandboxes "
                f"(declared: {sorted(sandboxes) or 'none'})",
                path=f"spec.selectors.{name}.sandbox",
            )
        return cls(
            name,
            cfg.command,
            cfg.args,
            env=cfg.env,
            timeout_ms=cfg.timeout_ms,
            sandbox=sandbox,
            worker=cfg.worker,
            max_output_bytes=cfg.max_output_bytes,
        )

    @property
    def timeout_s(self) -> float:
        """The deadline of one call, in seconds."""
        return self.timeout_ms / 1000

    def launch(self) -> Launch:
        """The argv and environment that would be spawned now (env resolved against the host)."""
        return self.sandbox.wrap((self.command, *self.args), grant_env(self.env))

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Ask the external process.

        Raises:
            SelectorTimeout: no answer within the timeout (the process group was killed).
            SelectorProcessError: the program could not start, or exited non-zero.
            SelectorProtocolError: the output is not exactly one valid response, or too large.
            SelectorError: the selector answered with an ``error``.
        """
        with telemetry.span("shortlist.exec", self._span_attributes(candidates), client=True):  # when installed
            if self.worker:
                return self._worker_select(query, candidates)
            return self._spawn_select(query, candidates)

    def _span_attributes(self, candidates: Sequence[Candidate]) -> dict[str, Any]:
        mode = "worker" if self.worker else "spawn"
        return {
            "shortlist.selector": self.name,
            "shortlist.exec.mode": mode,
            "shortlist.exec.timeout_ms": self.timeout_ms,
            "shortlist.candidates": len(candidates),
        }

    async def aselect(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        """Async twin of :meth:`select`.

        Spawn-per-call runs the same engine in a thread of its own (cancelling the task kills
        the process group and its descendants); worker mode runs the serialised exchange in a thread.
        """
        with telemetry.span("shortlist.exec", self._span_attributes(candidates), client=True):  # when installed
            if self.worker:
                return await asyncio.to_thread(self._worker_select, query, candidates)
            launch = self.launch()
            result = await arun_once(launch, encode_request(query, candidates) + b"\n", **self._run_options(launch))
            return self._answer(result)

    # --- spawn per call ----------------------------------------------------------------

    def _spawn_select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        launch = self.launch()
        result = run_once(launch, encode_request(query, candidates) + b"\n", **self._run_options(launch))
        return self._answer(result)

    def _run_options(self, launch: Launch) -> dict[str, Any]:
        def killed(pid: int, reason: str, ms: float, tail: str) -> None:
            emit(ExecKilled(selector=self.name, pid=pid, reason=reason, elapsed_ms=round(ms, 3), stderr_tail=tail))

        return {
            "timeout_s": self.timeout_s,
            "max_output_bytes": self.max_output_bytes,
            "tail_bytes": self.stderr_tail_bytes,
            "selector": self.name,
            "on_spawn": lambda pid: self._emit_spawned(pid, launch, worker=False),
            "on_kill": killed,
        }

    def _answer(self, result: RunResult) -> Selection:
        try:
            selection, response = decode_response(result.stdout, selector=self.name)
        except SelectorProtocolError as exc:
            raise _with_context(exc, result.elapsed_ms, result.stderr_tail) from None
        return _checked(selection, response, self.name, result.elapsed_ms, result.stderr_tail)

    def _emit_spawned(self, pid: int, launch: Launch, *, worker: bool) -> None:
        emit(ExecSpawned(selector=self.name, pid=pid, sandbox=self.sandbox.name, worker=worker, program=launch.argv[0]))

    # --- persistent worker -------------------------------------------------------------

    def start(self) -> None:
        """Start the worker now instead of on the first call (no effect in spawn-per-call mode).

        Raises:
            SelectorProcessError: the program could not start.
        """
        if not self.worker:
            return
        with self._lock:
            self._ensure_worker(time.monotonic())

    def _ensure_worker(self, started: float) -> WorkerProcess:
        proc = self._proc
        if proc is not None and not proc.alive():
            self._discard(proc, "exited")
            proc = None
        if proc is None:
            launch = self.launch()
            proc = WorkerProcess(launch, selector=self.name, tail_bytes=self.stderr_tail_bytes, started=started)
            self._proc = proc
            self._acked_ref = None
            self._emit_spawned(proc.pid, launch, worker=True)
            if self._restart_reason:
                self._restarts += 1
                emit(
                    ExecWorkerRestarted(
                        selector=self.name,
                        reason=self._restart_reason,
                        restarts=self._restarts,
                        old_pid=self._last_pid,
                        pid=proc.pid,
                    )
                )
                self._restart_reason = ""
        return proc

    def _discard(self, proc: WorkerProcess, reason: str) -> None:
        proc.kill()
        if self._proc is proc:
            self._proc = None
        self._restart_reason = reason
        self._last_pid = proc.pid

    def _worker_select(self, query: Query, candidates: Sequence[Candidate], *, as_asked: bool = False) -> Selection:
        """One request to the worker; ``as_asked``: send ``candidates`` themselves, never the acknowledged list."""
        started = time.monotonic()
        deadline = started + self.timeout_s
        if not self._lock.acquire(timeout=self.timeout_s):
            raise SelectorTimeout(
                f"worker busy for {self.timeout_ms} ms (calls are serialised)",
                selector=self.name,
                elapsed_ms=(time.monotonic() - started) * 1000,
            )
        try:
            proc = self._ensure_worker(started)
            asked, wanted = candidates, query
            left_out = None if as_asked or not self._acked_ref else left_out_of(self._acked, candidates)
            if left_out is not None:  # the acknowledged list stands in for it, asked deeper
                candidates = self._acked
                if query.k:
                    query = dataclasses.replace(query, k=query.k + len(left_out))
            _, ref = encode_candidates(candidates)
            selection, response, elapsed = self._exchange(proc, query, candidates, ref, started, deadline)
            if response.error and self._acked_ref == ref:
                # the worker forgot the list it acknowledged: send it again, once
                self._acked_ref = None
                selection, response, elapsed = self._exchange(proc, query, candidates, ref, started, deadline)
            if response.candidates_ref == ref:
                self._acked_ref, self._acked = ref, candidates
        finally:
            self._lock.release()
        selection = _checked(selection, response, self.name, elapsed, "")
        if left_out:
            selection = _without(selection, left_out, wanted.k)
            if not selection.selected and not selection.abstained and response.selected:
                # everything it chose was left out of the request: ask it about the asked list itself
                return self._worker_select(wanted, asked, as_asked=True)
        return selection

    def _exchange(
        self,
        proc: WorkerProcess,
        query: Query,
        candidates: Sequence[Candidate],
        ref: str,
        started: float,
        deadline: float,
    ) -> tuple[Selection, WireResponse, float]:
        self._request_id += 1
        rid = self._request_id
        payload = encode_request(
            query, candidates, request_id=rid, with_ref=True, include_candidates=self._acked_ref != ref
        )
        try:
            line = proc.exchange(payload, deadline=deadline, max_bytes=self.max_output_bytes, started=started)
            elapsed = (time.monotonic() - started) * 1000
            try:
                selection, response = decode_response(line, selector=self.name)
            except SelectorProtocolError as exc:
                raise _with_context(exc, elapsed, proc.stderr_tail()) from None
            if not response_answers(response.id, rid):
                # a stray line, a stale answer or a look-alike id: reading on would pair every later
                # answer with the wrong request, so the worker is replaced (see response_answers)
                problem = "has no id" if response.id is None else f"id {response.id!r} does not answer it"
                raise SelectorProtocolError(
                    f"worker response to request {rid} {problem} (every response must echo its request's id)",
                    selector=self.name,
                    elapsed_ms=elapsed,
                    stderr_tail=proc.stderr_tail(),
                )
        except SelectorError as exc:
            reason = _restart_reason(exc)
            if isinstance(exc, SelectorTimeout) and proc.never_answered():
                emit(ExecNotAWorker(selector=self.name, pid=proc.pid, elapsed_ms=round(exc.elapsed_ms or 0.0, 3)))
            if not isinstance(exc, SelectorProcessError):
                emit(
                    ExecKilled(
                        selector=self.name,
                        pid=proc.pid,
                        reason=reason,
                        elapsed_ms=round((time.monotonic() - started) * 1000, 3),
                        worker=True,
                        stderr_tail=exc.stderr_tail,
                    )
                )
            self._discard(proc, reason)
            raise
        return selection, response, elapsed

    def close(self) -> None:
        """Stop the worker (EOF on its stdin, then SIGKILL to its group after 1 s). Idempotent."""
        with self._lock:
            proc, self._proc = self._proc, None
            self._restart_reason = ""
        if proc is not None:
            proc.stop()

    def __enter__(self) -> ExecSelector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "worker" if self.worker else "spawn"
        return f"ExecSelector({self.name!r}, {self.command!r}, mode={mode}, sandbox={self.sandbox.name!r})"


def _restart_reason(exc: SelectorError) -> str:
    if isinstance(exc, SelectorTimeout):
        return "timeout"
    if isinstance(exc, SelectorProtocolError):
        return "protocol_error"
    return "crashed"


def _with_context(exc: SelectorError, elapsed_ms: float, stderr_tail: str) -> SelectorError:
    exc.elapsed_ms = elapsed_ms
    exc.stderr_tail = exc.stderr_tail or stderr_tail
    return exc


def left_out_of(acked: Sequence[Candidate], candidates: Sequence[Candidate]) -> frozenset[str] | None:
    """The ids of ``acked`` that ``candidates`` leaves out, when ``candidates`` is ``acked`` in its order less
    1 to :data:`SUBSET_SLACK` of them (the same objects); else None."""
    missing = len(acked) - len(candidates)
    if not 0 < missing <= SUBSET_SLACK or not candidates:
        return None
    out: list[str] = []
    i = 0
    for c in candidates:
        while acked[i] is not c:
            out.append(acked[i].id)
            i += 1
            if len(out) > missing:
                return None
        i += 1
    out.extend(a.id for a in acked[i:])
    return frozenset(out) if len(out) == missing else None


def _without(selection: Selection, left_out: frozenset[str], k: int) -> Selection:
    """``selection`` less the ``left_out`` ids (and their scores), at most ``k`` (0: all)."""
    keep = [n for n, i in enumerate(selection.selected) if i not in left_out]
    if k:
        keep = keep[:k]
    scores = selection.scores
    return dataclasses.replace(
        selection,
        selected=tuple(selection.selected[n] for n in keep),
        scores=None if scores is None else tuple(scores[n] for n in keep),
    )


def _checked(selection: Selection, response: WireResponse, name: str, elapsed_ms: float, tail: str) -> Selection:
    if response.error:
        raise SelectorError(
            f"selector reported an error: {response.error}", selector=name, elapsed_ms=elapsed_ms, stderr_tail=tail
        )
    return selection
