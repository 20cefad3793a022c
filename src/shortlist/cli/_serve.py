"""``shortlist serve``: run the HTTP service under uvicorn, one process per worker.

Refuses (exit 2) to bind a non-loopback address when no API key is configured. With more
than one worker, the settings travel to the workers in ``SHORTLIST_SERVER_SETTINGS`` and
Prometheus runs in multiprocess mode so ``/metrics`` adds up every worker.

It binds its address first (a taken port is one line and exit 2, before anything is
announced), then says on stderr where it starts, and when it is ready: when ``/readyz`` answers
200 (catalogs loaded, selectors built, models loaded and warmed) *naming this command's
instance* (``SHORTLIST_INSTANCE_ID``, shared by its workers), so another server on the same
port is never taken for this one; with the time it took.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
from typing import Any

from shortlist.cli._output import fail
from shortlist.cli._progress import add_progress_flag, progress_line
from shortlist.errors import MissingDependencyError

__all__ = ["register"]

logger = logging.getLogger("shortlist.server")

# Connection defaults (see shortlist.server._protocol): a whole request header within 10 s (nginx's
# client_header_timeout is 60 s), idle kept-alive connections closed after 5 s (uvicorn's default),
# at most 1,000 open connections per worker, and 100 of them from one source address (so one
# client holding idle sockets cannot fill the cap; a load balancer in front limits per client).
DEFAULT_TIMEOUT_HEADER = 10.0
DEFAULT_TIMEOUT_KEEP_ALIVE = 5.0
DEFAULT_LIMIT_CONNECTIONS = 1000
DEFAULT_LIMIT_CONNECTIONS_PER_CLIENT = 100


def _catalog(value: str) -> tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {value!r}")
    return name, path


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the HTTP service (selection, retrieval, memory, reduction)",
        description="Serve the shortlist HTTP API. API keys come from SHORTLIST_API_KEYS (comma-separated) "
        "and --api-keys-file; with none, only loopback clients are answered.",
    )
    p.add_argument("--config", help="runtime.yaml")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--catalog", type=_catalog, action="append", default=[], metavar="NAME=FILE", help="catalog to load at start-up"
    )
    p.add_argument("--corpus", help="documents for /v1/retrieve: a folder of .md/.txt files or a JSONL file")
    p.add_argument(
        "--corpus-index",
        help="an index built by 'shortlist index build' (embedded folder or a Qdrant collection's description)",
    )
    p.add_argument(
        "--corpus-scoring", choices=["hybrid", "lexical", "overlap"], default="hybrid", help="corpus retrieval scoring"
    )
    p.add_argument("--selector", help="selector of /v1/select (default: the config's binding, else the default)")
    p.add_argument("--api-keys-file", help="file of API keys, one per line, optionally with memory scopes")
    p.add_argument(
        "--memory",
        default=os.environ.get("SHORTLIST_MEMORY_URL", "memory:"),
        help="memory store: memory:, sqlite:///PATH or postgresql://... (default $SHORTLIST_MEMORY_URL or memory:)",
    )
    p.add_argument("--max-body-bytes", type=int, default=4 * 1024 * 1024, help="largest request body (413 above)")
    p.add_argument(
        "--threads",
        type=int,
        default=32,
        help="threads per worker running selectors and embeddings (default 32)",
    )
    p.add_argument("--max-candidates", type=int, default=5000, help="most inline candidates per request (413 above)")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds (504 after)")
    p.add_argument(
        "--breaker-threshold",
        type=int,
        default=3,
        help="consecutive failures of an external selector that open its circuit breaker (0: no breaker)",
    )
    p.add_argument("--breaker-cooldown", type=float, default=5.0, help="seconds an open breaker refuses calls")
    p.add_argument(
        "--timeout-header",
        type=float,
        default=DEFAULT_TIMEOUT_HEADER,
        help=f"seconds a client has to send a whole request header, else 408 and closed "
        f"(default {DEFAULT_TIMEOUT_HEADER:g}; 0: no deadline)",
    )
    p.add_argument(
        "--timeout-keep-alive",
        type=float,
        default=DEFAULT_TIMEOUT_KEEP_ALIVE,
        help=f"seconds an idle kept-alive connection stays open (default {DEFAULT_TIMEOUT_KEEP_ALIVE:g}); "
        "keep it above the load balancer's upstream keepalive_timeout",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_LIMIT_CONNECTIONS,
        help=f"open connections per worker before new ones get 503 and are closed "
        f"(default {DEFAULT_LIMIT_CONNECTIONS}; 0: no cap)",
    )
    p.add_argument(
        "--max-connections-per-client",
        type=int,
        default=DEFAULT_LIMIT_CONNECTIONS_PER_CLIENT,
        help=f"open connections per worker from one source address before new ones get 503 and are closed "
        f"(default {DEFAULT_LIMIT_CONNECTIONS_PER_CLIENT}; 0: no cap, e.g. behind a load balancer that limits "
        "per client itself)",
    )
    p.add_argument(
        "--health-port",
        type=int,
        help="also listen on this port for /healthz and /readyz only, with its own connection count, so probes "
        "are never refused because the service port is full (default: none)",
    )
    p.add_argument(
        "--startup-timeout",
        type=float,
        default=600.0,
        help="seconds a worker may take to start (load models, warm selectors) before it is replaced (default 600)",
    )
    p.add_argument(
        "--worker-healthcheck-timeout",
        type=float,
        default=30.0,
        help="seconds a started worker has to answer the supervisor's health check before it is replaced "
        "(--workers > 1; default 30)",
    )
    p.add_argument("--access-log", action="store_true", help="log one line per request on stderr")
    p.add_argument(
        "--examples",
        metavar="FEEDBACK_DB",
        help="a feedback log (a SQLite file, or a postgresql:// URL every replica shares): its logged turns "
        "are the tools' usage examples and co-usage, and POST /v1/feedback records into it "
        "(default: the config's selection.examples)",
    )
    add_progress_flag(p)
    p.set_defaults(func=run)


_APP = "shortlist.server._app:app_from_env"

# ServerSettings field -> the argparse destination of the flag that sets it: builds the settings
# and names the flag when a value is out of range.
_FIELDS = {
    "config_path": "config",
    "catalogs": "catalog",
    "selector": "selector",
    "memory_url": "memory",
    "max_body_bytes": "max_body_bytes",
    "max_candidates": "max_candidates",
    "selection_threads": "threads",
    "request_timeout_s": "timeout",
    "corpus_path": "corpus",
    "corpus_index": "corpus_index",
    "corpus_scoring": "corpus_scoring",
    "breaker_threshold": "breaker_threshold",
    "breaker_cooldown_s": "breaker_cooldown",
    "examples_path": "examples",
    "health_port": "health_port",
}


def _connection_flags(args: argparse.Namespace) -> tuple[tuple[str, float, float], ...]:
    """(flag, value, lowest allowed) of the connection and worker flags uvicorn takes."""
    return (
        ("--timeout-header", args.timeout_header, 0.0),
        ("--timeout-keep-alive", args.timeout_keep_alive, 0.1),
        ("--max-connections", args.max_connections, 0),
        ("--max-connections-per-client", args.max_connections_per_client, 0),
        ("--startup-timeout", args.startup_timeout, 1.0),
        ("--worker-healthcheck-timeout", args.worker_healthcheck_timeout, 1.0),
    )


def _flag_of(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else ""
    return "--" + _FIELDS.get(field, field).replace("_", "-")


def run(args: argparse.Namespace) -> int:
    """Run ``shortlist serve`` until interrupted."""
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        from shortlist._install import pip_install

        raise MissingDependencyError(
            f"shortlist serve needs the 'server' extra ({exc.name or exc} is missing): {pip_install('server')}"
        ) from exc

    from shortlist.server._auth import is_loopback
    from shortlist.server._listen import ReusePortSocket, bind_exclusive, reuseport_supported
    from shortlist.server._settings import ServerSettings

    if args.workers < 1:
        return fail("serve: --workers must be >= 1")
    for flag, value, low in _connection_flags(args):
        if not value >= low:
            return fail(f"serve: {flag} must be >= {low:g}, not {value:g}")
    from pydantic import ValidationError

    try:
        fields = {name: getattr(args, dest) for name, dest in _FIELDS.items()}
        fields["catalogs"] = dict(fields["catalogs"])
        settings = ServerSettings.build(api_keys_file=args.api_keys_file, **fields)
    except ValidationError as exc:
        problems = "; ".join(f"{_flag_of(err['loc'])}: {err['msg']}" for err in exc.errors())
        return fail(f"serve: {problems}")
    if args.health_port is not None and args.health_port == args.port:
        return fail(f"serve: --health-port must differ from --port ({args.port})")
    if not settings.api_keys and not is_loopback(args.host):
        return fail(
            f"serve: refusing to bind {args.host} without an API key; set SHORTLIST_API_KEYS or --api-keys-file, "
            "or bind 127.0.0.1"
        )
    started = time.monotonic()
    # bind first: a taken port fails here, before anything is announced or loaded
    reuseport = args.workers > 1 and reuseport_supported()
    try:
        # one listening socket per worker (SO_REUSEPORT): the kernel spreads connections evenly;
        # bind_exclusive first, so a port another server holds (even with SO_REUSEPORT) is refused
        sock: socket.socket = bind_exclusive(args.host, args.port, keep=not reuseport)
        if reuseport:
            sock = ReusePortSocket(args.host, args.port)
    except OSError as exc:
        return fail(f"serve: cannot bind {args.host}:{args.port}: {exc.strerror or exc}")
    with sock:
        if args.health_port is None:
            return _serve_on([sock], args, settings, started)
        try:  # one socket the workers share: a probe needs no balancing
            health = bind_exclusive(args.host, args.health_port)
        except OSError as exc:
            return fail(f"serve: cannot bind {args.host}:{args.health_port} (--health-port): {exc.strerror or exc}")
        with health:
            return _serve_on([sock, health], args, settings, started)


def _serve_on(sockets: list[socket.socket], args: argparse.Namespace, settings: Any, started: float) -> int:
    """Check the start-up, then run uvicorn on the bound ``sockets`` (the service's, then the health
    listener's, if any) until interrupted."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from shortlist.server._listen import ReusePortSocket
    from shortlist.server._protocol import ServiceConfig
    from shortlist.server._settings import ENV_INSTANCE, ENV_SETTINGS

    sock = sockets[0]
    port = int(sock.getsockname()[1])
    instance = secrets.token_hex(16)
    os.environ[ENV_INSTANCE] = instance  # every worker's /readyz names it (set before any is built)
    health = f", health checks on port {args.health_port}" if args.health_port is not None else ""
    _say(
        f"starting on http://{_url_host(args.host)}:{port} ({args.workers} worker(s){health}); "
        "loading catalogs and models"
    )
    app: Any = _APP
    with progress_line(args):
        if args.workers > 1:
            _check_start_up(settings)
        else:  # the one worker is this process: start it here, so any start-up error is one line
            app = _started_app(settings)
    if args.workers > 1 and settings.memory_url.startswith("memory:"):
        logger.warning("memory: is per process; with %d workers each has its own memories", args.workers)
    os.environ[ENV_SETTINGS] = settings.to_env()
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="shortlist-metrics-")
    if args.access_log:
        logging.getLogger("shortlist.server.access").setLevel(logging.INFO)
    config = ServiceConfig(
        app,
        factory=app is _APP,
        host=args.host,
        port=port,
        workers=args.workers,
        log_level="info" if args.verbose else "warning",
        access_log=False,
        timeout_graceful_shutdown=30,
        timeout_keep_alive=args.timeout_keep_alive,
        timeout_worker_healthcheck=args.worker_healthcheck_timeout,
        timeout_header=args.timeout_header,
        limit_connections=args.max_connections or None,
        limit_connections_per_client=args.max_connections_per_client or None,
        health_port=args.health_port,
        startup_timeout=args.startup_timeout,
    )
    if isinstance(sock, ReusePortSocket):
        sock.backlog = config.backlog
    if args.workers > 1:
        from shortlist.server._supervisor import ServiceSupervisor

        _announce_ready(args.host, port, started, instance)
        ServiceSupervisor(config, sockets=sockets).run()
        return 0
    server = uvicorn.Server(config)
    _announce_ready(args.host, port, started, instance)
    with progress_line(args):
        server.run(sockets=sockets)
    started_ok: bool = server.started
    return 0 if started_ok else STARTUP_FAILURE


def _say(message: str) -> None:
    try:
        sys.stderr.write(f"shortlist serve: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _announce_ready(host: str, port: int, started: float, instance: str, *, poll_s: float = 0.1) -> threading.Thread:
    """Say on stderr when ``/readyz`` first answers 200 naming ``instance`` (polled on loopback from a
    daemon thread); another server's answer on the address is not this one's readiness."""
    import json
    import urllib.error
    import urllib.request

    local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    url = f"http://{_url_host(local)}:{port}/readyz"

    def wait() -> None:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:  # loopback, our own URL
                    body = json.loads(response.read(65536)) if response.status == 200 else None
                if isinstance(body, dict) and body.get("instance") == instance:
                    _say(f"ready on http://{_url_host(host)}:{port} after {time.monotonic() - started:.1f} s")
                    return
            except (OSError, ValueError):  # not listening yet, 503 while starting (HTTPError), not JSON
                pass
            time.sleep(poll_s)

    thread = threading.Thread(target=wait, name="shortlist-serve-ready", daemon=True)
    thread.start()
    return thread


def _started_app(settings: Any) -> Any:
    """The app of a single-worker service, its state built, checked and started (selectors built
    and warmed, models loaded) in this process before uvicorn runs it.

    Raises:
        ShortlistError: any start-up error (bad config, catalog, store, selector).
    """
    from shortlist.server._app import create_app
    from shortlist.server._state import ServiceState

    state = ServiceState(settings)
    try:
        state.shortlist.check_selectors()
        state.start()
    except BaseException:
        state.close()
        raise
    return create_app(settings, service=state)


def _check_start_up(settings: Any) -> None:
    """Fail fast (exit 2 via ConfigError/CatalogError) on a bad config, catalog or store, before forking."""
    from shortlist.server._state import ServiceState

    state = ServiceState(settings)
    try:
        state.shortlist.check_selectors()  # an unknown --selector name: one line here, not a worker's traceback
    finally:
        state.close()
