"""The exec-selector daemon: keep a selector warm and answer spawned thin clients over a UNIX socket.

``shortlist exec-selector --daemon SOCKET`` loads its registry once (the model, the catalog's
vectors in memory) and answers each connection with :func:`~shortlist.exec._receiver.answer`,
the same core as the spawned and worker modes. A spawned ``shortlist exec-selector`` that
is told the socket (``--connect SOCKET`` or ``SHORTLIST_EXEC_SOCKET``) forwards its stdin
here instead of loading anything (see ``shortlist.cli._exec_forward``).

Framing (local, one request per connection):

* client → daemon: one header line, a JSON object ``{"v": 1, "selector": NAME|null,
  "config": ABS_PATH|null}``, then the request document's bytes unchanged; the client then
  shuts its side down (EOF);
* daemon → client: one status byte, then a body, then the daemon closes: ``+`` and the
  protocol response; ``-`` and ``{"error": ...}`` (the request or the selector failed: the
  spawned process exits 1, as it would in-process); ``!`` and ``{"error": ...}`` when this
  daemon cannot serve the request (another config, an unknown selector): the client answers
  in-process instead.

The socket is created with mode 0600 (only its user may connect) and bound before the model
loads (a call that arrives during the warm-up waits in the queue instead of finding nobody);
the default socket lives in a private directory (:mod:`shortlist._localsock`). A stale socket
file of this user is replaced, a live one refused, another user's refused (never removed). A
connection whose peer is another user is closed unanswered (``exec.socket_refused``). Requests
are answered one at a time: a second call for a catalog being embedded waits for those vectors
instead of embedding it again. With an idle timeout the daemon stops (and removes its socket)
after that long without a request; a spawned call started with ``--autostart`` starts one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from shortlist._events import emit
from shortlist._localsock import UntrustedSocket, check_peer, default_socket_path
from shortlist.errors import ConfigError, UsageError
from shortlist.exec._events import ExecSocketRefused
from shortlist.exec._server import _failed, answer_quietly
from shortlist.rankers._registry import SelectorRegistry
from shortlist.selection._base import Selector

__all__ = ["MAX_REQUEST_BYTES", "STATUS_ERROR", "STATUS_OK", "STATUS_REFUSED", "ExecDaemon", "run_daemon"]

logger = logging.getLogger("shortlist.exec")

STATUS_OK = b"+"
STATUS_ERROR = b"-"
STATUS_REFUSED = b"!"
#: The largest request (header included) a daemon reads; a larger one is answered with an error.
MAX_REQUEST_BYTES = 64 * 1024 * 1024
_HEADER_MAX = 64 * 1024


def _error(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False).encode("utf-8")


class ExecDaemon:
    """Answer exec requests received on a UNIX socket with the selectors of one registry.

    Args:
        registry: the selectors served (closed by the caller).
        default: the selector a request naming none gets.
        config: the ``runtime.yaml`` the registry was built from (absolute), or None; a client
            whose config differs is refused (it answers in-process).
    """

    def __init__(
        self, registry: SelectorRegistry, *, default: str, config: str | None, idle_timeout_s: float | None = None
    ) -> None:
        self.registry = registry
        self.default = default
        self.config = config
        self.idle_timeout_s = idle_timeout_s
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self.served = 0
        self.last_used = time.monotonic()
        self._answering = threading.Lock()

    def warm(self) -> None:
        """Resolve the default selector and prepare it (:meth:`Selector.prepare`: its model loads), so the
        first client does not pay the model load."""
        self.registry.get(self.default).prepare(())

    def handle(self, header: bytes, body: bytes) -> tuple[bytes, bytes]:
        """Answer one request: ``(status, body)``."""
        try:
            meta: Any = json.loads(header)
        except ValueError:
            return STATUS_REFUSED, _error("bad header: not JSON")
        if not isinstance(meta, dict) or meta.get("v") != 1:
            return STATUS_REFUSED, _error("bad header: unknown framing version")
        config = meta.get("config")
        if config != self.config:
            return STATUS_REFUSED, _error(f"this daemon serves config {self.config!r}, not {config!r}")
        name = meta.get("selector") or self.default
        if not isinstance(name, str):
            return STATUS_REFUSED, _error("bad header: selector must be a string")
        try:
            selector: Selector = self.registry.get(name)
        except Exception as exc:  # unknown name or a broken entry: the client answers in-process, with its error
            return STATUS_REFUSED, _error(f"{type(exc).__name__}: {exc}")
        try:
            with self._answering:
                out = answer_quietly(selector, body)[0]
        except Exception as exc:  # the request or the selector failed: the client exits 1, as in-process
            logger.debug("exec daemon request failed", exc_info=True)
            return STATUS_ERROR, _error(_failed(exc, None, worker=False))
        self.served += 1
        return STATUS_OK, out

    def serve(
        self, path: str | os.PathLike[str], *, on_ready: Callable[[], object] | None = None, warm: bool = False
    ) -> None:
        """Listen on ``path`` and answer until :meth:`shutdown` (or SIGTERM/SIGINT in the main thread).

        With ``warm``, :meth:`warm` runs once the socket is bound (calls that connect meanwhile
        wait for it). ``on_ready`` is called once requests are answered.
        """
        sock_path = Path(path)
        _claim(sock_path)
        daemon = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                daemon.last_used = time.monotonic()
                conn: socket.socket = self.request
                conn.settimeout(60.0)
                try:
                    check_peer(conn, "a connection")
                except (UntrustedSocket, OSError) as exc:  # another user: closed unanswered
                    emit(ExecSocketRefused(side="daemon", address=str(sock_path), reason=str(exc)))
                    return
                try:
                    raw = _read_all(conn)
                except (OSError, ValueError) as exc:
                    with contextlib.suppress(OSError):
                        conn.sendall(STATUS_ERROR + _error(f"request not read: {exc}"))
                    return
                header, sep, body = raw.partition(b"\n")
                if not sep:
                    status, out = STATUS_REFUSED, _error("bad header: no newline")
                else:
                    status, out = daemon.handle(header, body)
                with contextlib.suppress(OSError):
                    conn.sendall(status + out)
                daemon.last_used = time.monotonic()

        class Server(socketserver.ThreadingUnixStreamServer):
            request_queue_size = 64  # calls that arrive during the warm-up wait here

        old_umask = os.umask(0o177)
        try:
            server = Server(str(sock_path), Handler)
        finally:
            os.umask(old_umask)
        server.daemon_threads = True
        self._server = server
        try:
            with _stop_on_signals(server):
                if warm:
                    self.warm()
                    self.last_used = time.monotonic()
                if self.idle_timeout_s:
                    threading.Thread(
                        target=self._stop_when_idle, args=(server, self.idle_timeout_s), daemon=True
                    ).start()
                if on_ready is not None:
                    on_ready()
                server.serve_forever(poll_interval=0.2)
        finally:
            server.server_close()
            with contextlib.suppress(FileNotFoundError):
                sock_path.unlink()

    def _stop_when_idle(self, server: socketserver.BaseServer, idle_s: float) -> None:
        while True:
            time.sleep(min(1.0, idle_s))
            if time.monotonic() - self.last_used > idle_s:
                logger.info("exec daemon idle for %.0f s: stopping", idle_s)
                server.shutdown()
                return

    def shutdown(self) -> None:
        """Stop :meth:`serve` (from another thread)."""
        if self._server is not None:
            self._server.shutdown()


def _read_all(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise UsageError(f"request larger than {MAX_REQUEST_BYTES} bytes")
        chunks.append(chunk)


def _claim(path: Path) -> None:
    """Make ``path`` free for a new socket: refuse a live daemon, remove a stale socket file."""
    if not path.parent.is_dir():
        raise ConfigError(f"--daemon {path}: folder {path.parent} does not exist")
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_socket():
        raise ConfigError(f"--daemon {path}: exists and is not a socket; remove it or choose another path")
    owner = path.stat().st_uid
    if owner not in (os.geteuid(), 0):
        raise ConfigError(f"--daemon {path}: the socket belongs to uid {owner}, not to you; choose another path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        path.unlink()  # nobody listens: a stale socket left by a killed daemon
        return
    finally:
        probe.close()
    raise ConfigError(f"--daemon {path}: a daemon already listens there")


@contextlib.contextmanager
def _stop_on_signals(server: socketserver.BaseServer) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_daemon(
    path: str | None, *, selector: str | None = None, config: str | None = None, idle_timeout_s: float | None = None
) -> int:
    """Serve ``selector`` (and the config's other selectors) on the UNIX socket ``path`` until stopped.

    ``path`` None: the default socket, in its private directory. ``idle_timeout_s``: stop after
    that long without a request (None or 0: never).

    Returns:
        The exit code (0 after SIGTERM/SIGINT).

    Raises:
        ConfigError: the config is invalid, the selector does not resolve, or the socket path is taken.
    """
    import sys

    from shortlist._config import load_runtime_config
    from shortlist.rankers._registry import DEFAULT_SELECTOR

    if path is None:
        try:
            path = default_socket_path()
        except OSError as exc:
            raise ConfigError(f"--daemon: no private folder for the default socket: {exc}") from None
    config_path = str(Path(config).resolve()) if config else None
    runtime = load_runtime_config(config_path) if config_path else None
    registry = SelectorRegistry(runtime, source=config_path)
    try:
        daemon = ExecDaemon(
            registry, default=selector or DEFAULT_SELECTOR, config=config_path, idle_timeout_s=idle_timeout_s
        )
        ready = f"shortlist exec daemon listening on {path} (pid {os.getpid()})\n"
        daemon.serve(path, warm=True, on_ready=lambda: sys.stderr.write(ready))
    finally:
        registry.close()
    return 0
