"""``shortlist mcp-proxy``: an MCP server (stdio) that fronts several MCP servers with narrowing."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shortlist.cli._output import fail

if TYPE_CHECKING:
    from shortlist.mcp._proxy import MCPProxy

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``mcp-proxy`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "mcp-proxy",
        help="serve MCP on stdio: a narrowed view of several MCP servers plus a find_tools tool",
        description="Front several MCP servers as one MCP server on stdin/stdout. Clients see find_tools and "
        "the tools their searches surfaced (mcp__<server>__<tool>); calls are forwarded upstream.",
    )
    p.add_argument(
        "--mcp-server",
        action="append",
        required=True,
        metavar="NAME=COMMAND",
        help="an upstream server: NAME=COMMAND (stdio, split like a shell) or NAME=http(s)://URL (repeatable)",
    )
    p.add_argument(
        "--mcp-env",
        action="append",
        default=[],
        metavar="SERVER=NAME[=VALUE]",
        help="grant an upstream stdio server an environment variable: NAME forwards this process's value, "
        "NAME=VALUE sets it (repeatable); a server gets only its grants and a safe minimum (PATH, HOME, LANG, ...)",
    )
    p.add_argument("--selector", help="selector for find_tools (default: the config's binding, else the default)")
    p.add_argument("--config", help="runtime.yaml")
    p.add_argument("--k", type=int, default=5, help="tools returned by a search (default 5)")
    p.add_argument(
        "--always-include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="prefixed tool names or globs always listed (repeatable)",
    )
    p.add_argument(
        "--feedback-db",
        metavar="PATH",
        help="a feedback log (SQLite, created if missing): record every find_tools call, and each call of a "
        "tool a search found as a use for the search's query; searches rank with the log's examples",
    )
    p.add_argument(
        "--state",
        metavar="PATH",
        help="where the tools searches found persist, so a new session lists them (clients that check a name "
        "against tools/list before calling it; a regular file of at most 256 KiB); default: a file per set of "
        "servers in the user cache folder; 'off': this process only",
    )
    p.set_defaults(func=run)


def _state_problem(path: Path) -> str | None:
    """Why ``--state PATH`` cannot be the proxy's state file (None: it can, or it does not exist yet)."""
    from shortlist.mcp._proxy import MAX_STATE_BYTES

    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a FIFO, device, socket or folder); give a file path or 'off'"
    if st.st_size > MAX_STATE_BYTES:
        return f"{st.st_size} bytes, more than a state file holds ({MAX_STATE_BYTES}); remove it or give another path"
    return None


def _stop_on_signals(proxy: MCPProxy) -> None:
    """Make SIGTERM (a supervisor stopping the proxy) and SIGINT (Ctrl-C) end it at once, as a closed
    stdin does.

    The proxy waits on stdin in a thread no cancellation reaches, so a graceful stop would wait for
    the client's next message (SIGINT hung until then): the handler writes the turns of found tools
    called since the last search (:meth:`~shortlist.mcp._proxy.MCPProxy.flush_now`) and exits, 0 on
    SIGTERM and 130 on SIGINT. The upstream servers see their pipes close and exit; the log's writes
    were committed as they were made.
    """

    def stop(code: int) -> None:
        try:
            proxy.flush_now()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    loop = asyncio.get_running_loop()
    for sig, code in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # no signal handlers here
            loop.add_signal_handler(sig, stop, code)


def run(args: argparse.Namespace) -> int:
    """Run ``shortlist mcp-proxy`` until the client disconnects."""
    from shortlist.errors import CatalogError
    from shortlist.feedback._store import FeedbackStore
    from shortlist.mcp._client import MCPClient, grant_server_env, parse_server_arg
    from shortlist.mcp._proxy import MCPProxy, default_state_path
    from shortlist.selection._facade import DEFAULT, Shortlist

    if args.k < 1:
        raise CatalogError("--k must be >= 1")
    specs = grant_server_env([parse_server_arg(v) for v in args.mcp_server], args.mcp_env)
    if args.state is None:
        state = default_state_path([(n, v) for n, _, v in (a.partition("=") for a in args.mcp_server)])
    else:
        state = None if args.state.strip().lower() == "off" else Path(args.state)
        problem = _state_problem(state) if state is not None else None
        if problem:
            return fail(f"mcp-proxy: --state {args.state}: {problem}")

    async def main() -> None:
        with contextlib.ExitStack() as stack:
            feedback = stack.enter_context(FeedbackStore(args.feedback_db)) if args.feedback_db else None
            sl = stack.enter_context(Shortlist(selector=args.selector or DEFAULT, config=args.config, kind="tool"))
            selector = sl.selector_for("tool")
            client = MCPClient(specs)  # connected in the background: initialize is answered at once
            try:
                proxy = MCPProxy(
                    client,
                    selector=selector,
                    k=args.k,
                    policy=sl.policy,
                    always_include=args.always_include,
                    feedback=feedback,
                    state_path=state,
                )
                _stop_on_signals(proxy)
                await proxy.serve_stdio()
            finally:
                await client.close()

    asyncio.run(main())
    return 0
