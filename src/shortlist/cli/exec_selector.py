"""``shortlist exec-selector``: serve a selector over the exec wire protocol, spawned, as a worker or a daemon.

A spawned call (what PromptKit runs on every turn) is cheap when a daemon or a service is
up: :func:`forward_fast` runs *before* the CLI's parser is built and imports only the
standard library (``socket``, ``json``; ``http.client`` for a service), forwards the
request's bytes unchanged and prints the answer. When no target is configured, or the
target is down or cannot serve the request, the request is answered in-process (the cold
path, with the persisted catalog vectors the embedder factory gives), after an
``exec.forward_failed`` event when a target was configured. See ``docs/exec-protocol.md``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

__all__ = [
    "AUTOSTART_IDLE_S",
    "DEFAULT_SELECTOR_NAME",
    "ENV_API_KEY",
    "ENV_AUTOSTART",
    "ENV_FORWARD_TIMEOUT",
    "ENV_SOCKET",
    "ENV_URL",
    "FORWARD_TIMEOUT_S",
    "forward_fast",
    "register",
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

_VALUE_FLAGS = {"--selector": "selector", "--config": "config", "--connect": "connect", "--url": "url"}


def register(subparsers: Any) -> None:
    """Add the ``exec-selector`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "exec-selector",
        help="act as an external selector (wire protocol v1 on stdin/stdout), or as its daemon",
        description=(
            "Read a selection request on stdin and answer on stdout, so other runtimes (PromptKit, the Go "
            "reference) can use shortlist's selectors. Without --worker: one request, one response, exit 0 "
            "(errors: JSON on stderr, exit 1); forwarded to a daemon (--connect, $SHORTLIST_EXEC_SOCKET) or a "
            "`shortlist serve` (--url, $SHORTLIST_EXEC_URL) when one is given, answered in-process when it is "
            "down. With --worker: one request per line, one response per line, until EOF. With --daemon SOCKET: "
            "keep the selector warm and answer spawned calls on a UNIX socket until SIGTERM."
        ),
    )
    parser.add_argument(
        "--selector", metavar="NAME", default=None, help="selector to serve (default: the built-in default)"
    )
    parser.add_argument("--config", metavar="FILE", default=None, help="runtime.yaml declaring selectors")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--worker", action="store_true", help="serve newline-delimited requests until EOF")
    mode.add_argument("--daemon", metavar="SOCKET", default=None, help="serve spawned calls on this UNIX socket")
    parser.add_argument(
        "--connect", metavar="SOCKET", default=None, help=f"forward to the daemon on SOCKET (default: ${ENV_SOCKET})"
    )
    parser.add_argument(
        "--url", metavar="URL", default=None, help=f"forward to a `shortlist serve` at URL (default: ${ENV_URL})"
    )
    parser.add_argument(
        "--autostart",
        action="store_true",
        help=f"no daemon on the --connect socket: start one in the background (it stops after "
        f"{AUTOSTART_IDLE_S:.0f} s idle); this call answers in-process (default: ${ENV_AUTOSTART}=1)",
    )
    parser.add_argument(
        "--idle-timeout", type=float, default=None, metavar="S", help="--daemon: stop after S seconds without a request"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.daemon:
        from shortlist.exec.daemon import run_daemon

        return run_daemon(args.daemon, selector=args.selector, config=args.config, idle_timeout_s=args.idle_timeout)
    from shortlist.exec.server import run_exec_selector

    if not args.worker:
        code = _forward(args.selector, args.config, args.connect, args.url, autostart=args.autostart)
        if code is not None:
            return code
    return run_exec_selector(selector=args.selector, config=args.config, worker=args.worker)


def _scan(argv: list[str]) -> dict[str, str] | None:
    """The options of a plain spawned call, or None when argparse must look (help, worker, daemon, anything odd)."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--autostart":
            opts["autostart"] = "1"
            i += 1
            continue
        flag, eq, value = arg.partition("=")
        if flag not in _VALUE_FLAGS:
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None
            value = argv[i + 1]
            i += 1
        opts[_VALUE_FLAGS[flag]] = value
        i += 1
    return opts


def forward_fast(argv: list[str]) -> int | None:
    """Answer a spawned call through its daemon or service, before the CLI's parser is built.

    Called by ``shortlist.cli.main`` with the arguments after ``exec-selector``. Returns the exit
    code, or None when this is not a plain spawned call with a target configured (the full CLI
    handles it then).
    """
    opts = _scan(argv)
    if opts is None:
        return None
    selector, config = opts.get("selector"), opts.get("config")
    return _forward(selector, config, opts.get("connect"), opts.get("url"), autostart="autostart" in opts)


def _forward(
    selector: str | None, config: str | None, connect: str | None, url: str | None, *, autostart: bool = False
) -> int | None:
    """Forward stdin to the configured target; answer in-process when it fails. None: no target configured."""
    autostart = autostart or os.environ.get(ENV_AUTOSTART, "").strip() == "1"
    connect = connect or os.environ.get(ENV_SOCKET) or None
    url = url or os.environ.get(ENV_URL) or None
    if not connect and not url:
        return None
    raw = sys.stdin.buffer.read()
    failures: list[tuple[str, str, str]] = []
    if connect:
        try:
            status, body = _via_socket(connect, raw, selector, config)
        except (OSError, ValueError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            if autostart and isinstance(exc, (FileNotFoundError, ConnectionRefusedError)):
                reason += f"; {_start_daemon(connect, selector, config)}"
            failures.append(("socket", connect, reason))
        else:
            if status != b"!":
                return _deliver(status == b"+", body)
            failures.append(("socket", connect, f"refused: {body.decode('utf-8', 'replace')[:512]}"))
    if url:
        try:
            code, body = _via_http(url, raw, selector)
        except (OSError, ValueError) as exc:
            failures.append(("http", url, f"{type(exc).__name__}: {exc}"))
        else:
            if code == 200:
                return _deliver(True, body)
            if code in (422, 502, 504):  # the request or the selector failed there: it would here too
                return _deliver(False, body)
            failures.append(("http", url, f"HTTP {code}: {body.decode('utf-8', 'replace')[:512]}"))
    return _in_process(raw, selector, config, failures)


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


def _via_socket(path: str, raw: bytes, selector: str | None, config: str | None) -> tuple[bytes, bytes]:
    import json
    import socket

    header = json.dumps({"v": 1, "selector": selector, "config": os.path.realpath(config) if config else None})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(_forward_timeout())
        conn.connect(path)
        conn.sendall(header.encode("utf-8") + b"\n" + raw)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(1 << 16):
            chunks.append(chunk)
    reply = b"".join(chunks)
    if not reply or reply[:1] not in (b"+", b"-", b"!"):
        raise ValueError("the daemon closed the connection without an answer")
    return reply[:1], reply[1:]


def _start_daemon(path: str, selector: str | None, config: str | None) -> str:
    """Start ``exec-selector --daemon path`` detached (its own session, no inherited pipes); say what happened."""
    import subprocess

    cmd = [sys.executable, "-m", "shortlist.cli", "exec-selector", "--daemon", path]
    cmd += ["--idle-timeout", str(AUTOSTART_IDLE_S)]
    if selector:
        cmd += ["--selector", selector]
    if config:
        cmd += ["--config", os.path.realpath(config)]
    try:
        with open(f"{path}.log", "ab") as log:  # not our stdout/stderr: the caller must not wait on the daemon
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True
            )
    except OSError as exc:
        return f"daemon not started: {type(exc).__name__}: {exc}"
    return f"daemon started (pid {proc.pid}, log {path}.log)"


def _via_http(url: str, raw: bytes, selector: str | None) -> tuple[int, bytes]:
    import http.client
    from urllib.parse import quote, urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.hostname, parts.port, timeout=_forward_timeout())
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(ENV_API_KEY)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    path = f"{parts.path.rstrip('/')}/v1/selectors/{quote(selector or DEFAULT_SELECTOR_NAME, safe='')}:select"
    try:
        conn.request("POST", path, body=raw, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _in_process(raw: bytes, selector: str | None, config: str | None, failures: list[tuple[str, str, str]]) -> int:
    import io
    import logging

    from shortlist.cli._output import fail
    from shortlist.errors import ShortlistError
    from shortlist.events import emit
    from shortlist.exec.events import ExecForwardFailed
    from shortlist.exec.server import run_exec_selector

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for target, address, reason in failures:
        emit(ExecForwardFailed(target=target, address=address, reason=reason))
    try:
        return run_exec_selector(selector=selector, config=config, stdin=io.BytesIO(raw))
    except ShortlistError as exc:  # a configuration mistake: one line and exit 2, as the full CLI does
        return fail(str(exc))
