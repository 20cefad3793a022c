"""``shortlist exec-selector``: serve a shortlist selector over the exec wire protocol on stdin/stdout."""

from __future__ import annotations

import argparse
from typing import Any

from shortlist.exec.server import run_exec_selector

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``exec-selector`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "exec-selector",
        help="act as an external selector (wire protocol v1 on stdin/stdout)",
        description=(
            "Read a selection request on stdin and answer on stdout, so other runtimes (the Go "
            "reference included) can use shortlist's selectors. Without --worker: one request, one "
            "response, exit 0 (errors: JSON on stderr, exit 1). With --worker: one request per line, "
            "one response per line, until EOF."
        ),
    )
    parser.add_argument(
        "--selector", metavar="NAME", default=None, help="selector to serve (default: the built-in default)"
    )
    parser.add_argument("--config", metavar="FILE", default=None, help="runtime.yaml declaring selectors")
    parser.add_argument("--worker", action="store_true", help="serve newline-delimited requests until EOF")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_exec_selector(selector=args.selector, config=args.config, worker=args.worker)
