"""The ``shortlist`` command line: parse, call the library's core, render. No logic of its own.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``; it sets ``func`` on its parser to a handler
``(args: argparse.Namespace) -> int`` returning the exit code. Errors the user can fix
(bad files, bad config) are :class:`~shortlist.errors.ShortlistError` and become a one-line
message on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from shortlist.cli._output import fail
from shortlist.errors import ShortlistError

__all__ = ["main"]

# Subcommand modules, in the order `shortlist --help` lists them.
_COMMANDS = (
    "select",
    "offer",
    "exec_selector",
    "eval",
    "feedback",
    "index",
    "reduce",
    "schema",
    "serve",
    "mcp_proxy",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="shortlist",
        description="Decide what enters an LLM agent's context each turn.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (repeatable)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"shortlist.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"shortlist.cli.{name}":
                continue  # subcommand not part of this build
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = func(args)
    except ShortlistError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
