"""The ``shortlist`` command line: parse, call the library's core, render. No logic of its own.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``; it sets ``func`` on its parser to a handler
``(args: argparse.Namespace) -> int`` returning the exit code. Errors the user can fix
(bad files, bad config) are :class:`~shortlist.errors.ShortlistError` and become a one-line
message on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["main"]
# The module imports nothing more at its top: a spawned `exec-selector` forwarded to a daemon
# must start in tens of milliseconds (see main()); the parser's imports come with build_parser().

# Subcommand modules, in the order `shortlist --help` lists them.
_COMMANDS = (
    "select",
    "offer",
    "exec_selector",
    "eval",
    "feedback",
    "catalog",
    "index",
    "cache",
    "reduce",
    "schema",
    "serve",
    "mcp_proxy",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser with every available subcommand registered (or just ``only``).

    Registering one subcommand imports one module: ``shortlist select`` does not pay for the
    imports of ``reduce``, ``exec-selector`` and the rest (about 0.3 s).
    """
    import argparse
    import importlib

    parser = argparse.ArgumentParser(
        prog="shortlist",
        description="Decide what enters an LLM agent's context each turn.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (repeatable)")
    from shortlist import __version__

    parser.add_argument("--version", action="version", version=f"shortlist {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only in _COMMANDS else _COMMANDS:
        try:
            module = importlib.import_module(f"shortlist.cli._{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"shortlist.cli._{name}":
                continue  # subcommand not part of this build
            raise
        module.register(sub)
    return parser


def _invoked(argv: Sequence[str] | None) -> str | None:
    """The subcommand module named on the command line (the first word that is not an option), if any."""
    for word in sys.argv[1:] if argv is None else argv:
        if not word.startswith("-"):
            return word.replace("-", "_")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["exec-selector"]:  # a spawned call forwarded to a daemon: before anything heavy is imported
        from shortlist.cli._exec_selector import forward_fast

        forwarded = forward_fast(words[1:])
        if forwarded is not None:
            return forwarded
    import logging

    from shortlist.cli._output import fail
    from shortlist.errors import ShortlistError

    parser = build_parser(only=_invoked(argv))
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    from shortlist.cli._output import BrokenPipe, missing_module_hint, quiet_broken_pipe

    try:
        code: int = func(args)
    except ShortlistError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except (BrokenPipeError, BrokenPipe):  # the reader of stdout stopped early (`| head`): no traceback
        return quiet_broken_pipe()
    except ModuleNotFoundError as exc:  # an optional extra that is not installed: the install hint
        hint = missing_module_hint(exc)
        if hint is None:
            raise
        return fail(hint)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
