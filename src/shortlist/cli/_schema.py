"""``shortlist schema``: print the JSON Schema of the runtime config or of the exec wire protocol."""

from __future__ import annotations

import argparse
from typing import Any

from shortlist.cli._output import write_json

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``schema`` subcommand."""
    p: argparse.ArgumentParser = sub.add_parser("schema", help="print a JSON Schema")
    p.add_argument("which", choices=["runtime", "exec-request", "exec-response"], help="which schema")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``shortlist schema``."""
    if args.which == "runtime":
        from shortlist._config import runtime_config_schema

        write_json(runtime_config_schema())
        return 0
    from shortlist.exec import _protocol as protocol

    write_json(protocol.request_schema() if args.which == "exec-request" else protocol.response_schema())
    return 0
