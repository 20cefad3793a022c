"""``shortlist exec-selector``, a spawned call forwarded: to its daemon or service, within the caller's deadline.

The request's bytes go unchanged to a daemon's UNIX socket (a trusted one only, started
detached when ``--autostart`` finds none) or to a ``shortlist serve``; the answer is printed.
When the target is down or cannot serve the request, the call is answered in-process after
an ``exec.forward_failed`` event; when the caller's deadline is near, it gives up with a
one-line error and exit 1. Standard library only at the top (``shortlist.cli._exec_selector``
imports it before the CLI's parser is built): anything heavier is imported where it is used.
"""

from __future__ import annotations

import os
import sys
import time

from shortlist._localsock import UntrustedSocket, connect_trusted, default_socket_path, open_private_log, private_dir

__all__ = [
    "AUTOSTART_IDLE_S",
    "DEFAULT_SELECTOR_NAME",
    "ENV_API_KEY",
    "ENV_AUTOSTART",
    "ENV_FORWARD_TIMEOUT",
    "ENV_SOCKET",
    "ENV_TIMEOUT_MS",
    "ENV_URL",
    "FORWARD_TIMEOUT_S",
    "TIMEOUT_MS",
    "forward",
]

#: A UNIX socket of ``shortlist exec-selector --daemon`` to forward to (as ``--connect``).
ENV_SOCKET = "SHORTLIST_EXEC_SOCKET"
#: A ``shortlist serve`` base URL to forward to (as ``--url``), e.g. ``http://127.0.0.1:8000``.
ENV_URL = "SHORTLIST_EXEC_URL"
#: The bearer key sent to the service, when it has keys.
ENV_API_KEY = "SHORTLIST_API_KEY"
#: ``selection.registry.DEFAULT_SELECTOR``, repeated so the thin path imports nothing (a test holds them equal).
DEFAULT_SELECTOR_NAME = "hybrid"
#: How long a forwarded call may take before the spawned process answers in-process instead. Long:
#: a daemon's first call for a new catalog embeds it, and answering in-process would cost as much.
FORWARD_TIMEOUT_S = 60.0
#: Overrides :data:`FORWARD_TIMEOUT_S` (seconds).
ENV_FORWARD_TIMEOUT = "SHORTLIST_EXEC_FORWARD_TIMEOUT_S"
#: ``1``: a spawned call that finds no daemon on its socket starts one (as ``--autostart``).
ENV_AUTOSTART = "SHORTLIST_EXEC_AUTOSTART"
#: How long an auto-started daemon waits for a request before it stops.
AUTOSTART_IDLE_S = 900.0
#: The caller's deadline when ``--timeout-ms`` is not given: PromptKit's default ``timeout_ms``.
TIMEOUT_MS = 3000
#: Overrides :data:`TIMEOUT_MS` (``--timeout-ms`` wins).
ENV_TIMEOUT_MS = "SHORTLIST_EXEC_TIMEOUT_MS"
#: How long before the caller's deadline a forwarded call gives up (to write its error and exit).
_MARGIN_S = 0.3
_POLL_S = 0.05


class _Deadline:
    """The caller's deadline, less a margin to write the answer: how long a forwarded call may still wait."""

    def __init__(self, timeout_ms: int | None) -> None:
        if timeout_ms is None:
            try:
                timeout_ms = int(os.environ.get(ENV_TIMEOUT_MS, "") or TIMEOUT_MS)
            except ValueError:
                timeout_ms = TIMEOUT_MS
        self.timeout_ms = timeout_ms if timeout_ms > 0 else TIMEOUT_MS
        self.at = time.monotonic() - _process_age() + self.timeout_ms / 1000 - _MARGIN_S

    def left(self) -> float:
        return self.at - time.monotonic()

    def wait_s(self) -> tuple[float, bool]:
        """How long the next wait may last, and whether the deadline (not the forward timeout) bounds it."""
        left = max(self.left(), 0.001)
        forward = _forward_timeout()
        return (left, True) if left < forward else (forward, False)


def _process_age() -> float:
    """Seconds since this process started (the caller's clock started then), 0 where the OS does not say."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            started = int(fh.read().rsplit(b")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime", "rb") as fh:
            now = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return min(max(now - started, 0.0), 5.0)


class _GiveUp(Exception):
    """The caller's deadline is near and the target has not answered: exit 1 now rather than be killed."""


def forward(
    selector: str | None,
    config: str | None,
    connect: str | None,
    url: str | None,
    *,
    autostart: bool = False,
    timeout_ms: int | None = None,
) -> int | None:
    """Forward stdin to the configured target; answer in-process when it fails. None: no target configured."""
    deadline = _Deadline(timeout_ms)
    autostart = autostart or os.environ.get(ENV_AUTOSTART, "").strip() == "1"
    connect = connect or os.environ.get(ENV_SOCKET) or None
    url = url or os.environ.get(ENV_URL) or None
    failures: list[tuple[str, str, str]] = []
    refusals: list[tuple[str, str]] = []
    if autostart and not connect:
        try:
            connect = default_socket_path()
        except OSError as exc:  # the private folder is not ours: never send the query there
            refusals.append(("default socket", str(exc)))
            failures.append(("socket", "default socket", f"{type(exc).__name__}: {exc}"))
    if not connect and not url and not failures:
        return None
    raw = sys.stdin.buffer.read()
    if connect:
        try:
            status, body = _via_socket(connect, raw, selector, config, deadline)
        except UntrustedSocket as exc:
            refusals.append((connect, str(exc)))
            failures.append(("socket", connect, f"refused: {exc}"))
        except _GiveUp as exc:
            return _give_up(str(exc), [("socket", connect, str(exc))], refusals)
        except (OSError, ValueError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            if autostart and isinstance(exc, (FileNotFoundError, ConnectionRefusedError)):
                started, note = _start_daemon(connect, selector, config)
                reason += f"; {note}"
                if started:
                    try:
                        status, body = _await_daemon(connect, raw, selector, config, deadline)
                    except _GiveUp as exc:
                        why = f"{reason}; {exc}; the next call will use it"
                        return _give_up(f"{exc}; the next call will use it", [("socket", connect, why)], refusals)
                    except UntrustedSocket as exc:
                        refusals.append((connect, str(exc)))
                        failures.append(("socket", connect, f"{reason}; refused: {exc}"))
                    except (OSError, ValueError) as exc:
                        failures.append(("socket", connect, f"{reason}; {type(exc).__name__}: {exc}"))
                    else:
                        if status != b"!":
                            return _deliver(status == b"+", body)
                        failures.append(("socket", connect, f"refused: {body.decode('utf-8', 'replace')[:512]}"))
                else:
                    failures.append(("socket", connect, reason))
            else:
                failures.append(("socket", connect, reason))
        else:
            if status != b"!":
                return _deliver(status == b"+", body)
            failures.append(("socket", connect, f"refused: {body.decode('utf-8', 'replace')[:512]}"))
    if url:
        try:
            code, body = _via_http(url, raw, selector, deadline)
        except _GiveUp as exc:
            return _give_up(str(exc), [*failures, ("http", url, str(exc))], refusals)
        except (OSError, ValueError) as exc:
            failures.append(("http", url, f"{type(exc).__name__}: {exc}"))
        else:
            if code == 200:
                return _deliver(True, body)
            if code in (422, 502, 504):  # the request or the selector failed there: it would here too
                return _deliver(False, body)
            failures.append(("http", url, f"HTTP {code}: {body.decode('utf-8', 'replace')[:512]}"))
    return _in_process(raw, selector, config, failures, refusals)


def _forward_timeout() -> float:
    try:
        value = float(os.environ.get(ENV_FORWARD_TIMEOUT, "") or FORWARD_TIMEOUT_S)
    except ValueError:
        return FORWARD_TIMEOUT_S
    return value if value > 0 else FORWARD_TIMEOUT_S


def _deliver(ok: bool, body: bytes) -> int:
    stream = sys.stdout.buffer if ok else sys.stderr.buffer
    stream.write(body.strip() + b"\n")
    stream.flush()
    return 0 if ok else 1


def _via_socket(
    path: str, raw: bytes, selector: str | None, config: str | None, deadline: _Deadline
) -> tuple[bytes, bytes]:
    """Send the request to the daemon on ``path`` (a trusted socket only) and read its answer.

    Raises:
        _GiveUp: no answer before the caller's deadline.
        UntrustedSocket: the socket or its peer is not this user's.
        OSError, ValueError: the daemon is down or broke the framing.
    """
    import json
    import socket

    header = json.dumps({"v": 1, "selector": selector, "config": os.path.realpath(config) if config else None})
    wait, bounded = deadline.wait_s()
    try:
        with connect_trusted(path, wait) as conn:
            conn.sendall(header.encode("utf-8") + b"\n" + raw)
            conn.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := conn.recv(1 << 16):
                chunks.append(chunk)
    except TimeoutError:
        if bounded:
            raise _GiveUp(f"the daemon on {path} did not answer within timeout_ms {deadline.timeout_ms}") from None
        raise
    reply = b"".join(chunks)
    if not reply or reply[:1] not in (b"+", b"-", b"!"):
        raise ValueError("the daemon closed the connection without an answer")
    return reply[:1], reply[1:]


def _await_daemon(
    path: str, raw: bytes, selector: str | None, config: str | None, deadline: _Deadline
) -> tuple[bytes, bytes]:
    """Forward to the daemon this call just started: try its socket until it listens, within the deadline.

    Raises:
        _GiveUp: it did not listen, or answer, before the caller's deadline.
        UntrustedSocket, OSError, ValueError: as :func:`_via_socket`.
    """
    while True:
        try:
            return _via_socket(path, raw, selector, config, deadline)
        except (FileNotFoundError, ConnectionRefusedError):
            if deadline.left() <= _POLL_S:
                raise _GiveUp(
                    f"the daemon started on {path} did not listen within timeout_ms {deadline.timeout_ms}"
                ) from None
            time.sleep(_POLL_S)


def _give_up(message: str, failures: list[tuple[str, str, str]], refusals: list[tuple[str, str]]) -> int:
    """The deadline is near: the error on stderr first (it must reach the caller), then the events; exit 1."""
    import json

    sys.stderr.buffer.write(json.dumps({"error": message}).encode("utf-8") + b"\n")
    sys.stderr.buffer.flush()
    _emit_failures(failures, refusals)
    return 1


def _emit_failures(failures: list[tuple[str, str, str]], refusals: list[tuple[str, str]]) -> None:
    import logging

    from shortlist._events import emit
    from shortlist.exec._events import ExecForwardFailed, ExecSocketRefused

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for address, reason in refusals:
        emit(ExecSocketRefused(side="client", address=address, reason=reason))
    for target, address, reason in failures:
        emit(ExecForwardFailed(target=target, address=address, reason=reason))


def _start_daemon(path: str, selector: str | None, config: str | None) -> tuple[bool, str]:
    """Start ``exec-selector --daemon path`` detached (its own session, no inherited pipes); say what happened.

    Its log, ``path.log``, is opened in the socket's folder only when that folder is private
    (this user's, mode 0700), and never through a symlink.
    """
    import subprocess

    cmd = [sys.executable, "-m", "shortlist.cli", "exec-selector", "--daemon", path]
    cmd += ["--idle-timeout", str(AUTOSTART_IDLE_S)]
    if selector:
        cmd += ["--selector", selector]
    if config:
        cmd += ["--config", os.path.realpath(config)]
    try:
        private_dir(os.path.dirname(os.path.abspath(path)), create=False)
        log = open_private_log(f"{path}.log")  # not our stdout/stderr: the caller must not wait on the daemon
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
            )
        finally:
            os.close(log)
    except OSError as exc:
        return False, f"daemon not started: {type(exc).__name__}: {exc}"
    return True, f"daemon started (pid {proc.pid}, log {path}.log)"


def _via_http(url: str, raw: bytes, selector: str | None, deadline: _Deadline) -> tuple[int, bytes]:
    import http.client
    from urllib.parse import quote, urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    wait, bounded = deadline.wait_s()
    conn = conn_type(parts.hostname, parts.port, timeout=wait)
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(ENV_API_KEY)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    path = f"{parts.path.rstrip('/')}/v1/selectors/{quote(selector or DEFAULT_SELECTOR_NAME, safe='')}:select"
    try:
        conn.request("POST", path, body=raw, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    except TimeoutError:
        if bounded:
            raise _GiveUp(f"the service at {url} did not answer within timeout_ms {deadline.timeout_ms}") from None
        raise
    finally:
        conn.close()


def _in_process(
    raw: bytes,
    selector: str | None,
    config: str | None,
    failures: list[tuple[str, str, str]],
    refusals: list[tuple[str, str]],
) -> int:
    import io

    from shortlist.cli._output import fail
    from shortlist.errors import ShortlistError
    from shortlist.exec._server import run_exec_selector

    _emit_failures(failures, refusals)
    try:
        return run_exec_selector(selector=selector, config=config, stdin=io.BytesIO(raw))
    except ShortlistError as exc:  # a configuration mistake: one line and exit 2, as the full CLI does
        return fail(str(exc))
