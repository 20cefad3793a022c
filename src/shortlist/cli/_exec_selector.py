"""``shortlist exec-selector``: serve a selector over the exec wire protocol, spawned, as a worker or a daemon.

A spawned call (what PromptKit runs on every turn) is cheap when a daemon or a service is
up: :func:`forward_fast` runs *before* the CLI's parser is built and imports only the
standard library (``socket``, ``json``; ``http.client`` for a service), forwards the
request's bytes unchanged and prints the answer. When no target is configured, or the
target is down or cannot serve the request, the request is answered in-process (the cold
path, with the persisted catalog vectors the embedder factory gives), after an
``exec.forward_failed`` event when a target was configured.

A forwarded call keeps the caller's deadline (``--timeout-ms``, PromptKit's ``timeout_ms``,
3000 by default): it waits for a daemon that is warming up, or that this call just started
(``--autostart``), until shortly before that deadline, and then gives up with a one-line error
and exit 1 rather than being killed. A socket that is not this user's alone is refused
(:mod:`shortlist._localsock`). ``--warm --catalog FILE`` embeds a catalog into the persistent
cache once, so that the first turns of a fresh machine are not spent on it. See
``docs/exec-protocol.md``.

This module is the subcommand (its parser, its modes, the scan of a plain spawned call's
arguments); forwarding a call is :mod:`shortlist.cli._exec_forward`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shortlist.cli._exec_forward import (
    AUTOSTART_IDLE_S,
    ENV_AUTOSTART,
    ENV_SOCKET,
    ENV_TIMEOUT_MS,
    ENV_URL,
    TIMEOUT_MS,
    forward,
)

if TYPE_CHECKING:
    import argparse

__all__ = ["forward_fast", "register"]

_VALUE_FLAGS = {
    "--selector": "selector",
    "--config": "config",
    "--connect": "connect",
    "--url": "url",
    "--timeout-ms": "timeout_ms",
}


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
    mode.add_argument(
        "--daemon",
        metavar="SOCKET",
        nargs="?",
        const="",
        default=None,
        help="serve spawned calls on this UNIX socket (default: exec.sock in a private folder, "
        "$XDG_RUNTIME_DIR/shortlist/ or ~/.cache/shortlist/run/)",
    )
    mode.add_argument(
        "--warm",
        action="store_true",
        help="embed --catalog into the persistent cache (and keep the model's optimised graph) once, then exit",
    )
    parser.add_argument(
        "--catalog",
        metavar="FILE",
        default=None,
        help="--warm: the tools (JSON/JSONL definitions, or a request document such as PromptKit's)",
    )
    parser.add_argument(
        "--connect", metavar="SOCKET", default=None, help=f"forward to the daemon on SOCKET (default: ${ENV_SOCKET})"
    )
    parser.add_argument(
        "--url", metavar="URL", default=None, help=f"forward to a `shortlist serve` at URL (default: ${ENV_URL})"
    )
    parser.add_argument(
        "--autostart",
        action="store_true",
        help=f"no daemon on the socket (--connect, else the default one): start one in the background (it "
        f"stops after {AUTOSTART_IDLE_S:.0f} s idle) and wait for its answer within --timeout-ms "
        f"(default: ${ENV_AUTOSTART}=1)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help=f"the caller's deadline (PromptKit's timeout_ms): a forwarded call waits for a warming daemon "
        f"until shortly before it, then gives up (exit 1) (default: ${ENV_TIMEOUT_MS}, else {TIMEOUT_MS})",
    )
    parser.add_argument(
        "--idle-timeout", type=float, default=None, metavar="S", help="--daemon: stop after S seconds without a request"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.daemon is not None:
        from shortlist.exec._daemon import run_daemon

        return run_daemon(
            args.daemon or None, selector=args.selector, config=args.config, idle_timeout_s=args.idle_timeout
        )
    if args.warm:
        from shortlist.exec._server import warm_cache

        if not args.catalog:
            from shortlist.errors import ConfigError

            raise ConfigError("--warm needs --catalog FILE (the tools the caller will send)")
        return warm_cache(args.catalog, selector=args.selector, config=args.config)
    from shortlist.exec._server import run_exec_selector

    if not args.worker:
        code = forward(
            args.selector, args.config, args.connect, args.url, autostart=args.autostart, timeout_ms=args.timeout_ms
        )
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
    try:
        timeout_ms = int(opts["timeout_ms"]) if "timeout_ms" in opts else None
    except ValueError:
        return None  # argparse says what is wrong
    return forward(
        selector, config, opts.get("connect"), opts.get("url"), autostart="autostart" in opts, timeout_ms=timeout_ms
    )
