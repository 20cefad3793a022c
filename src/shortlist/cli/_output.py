"""The CLI's only way to write: JSON or text on stdout, one-line errors on stderr.

A reader that stops early (``shortlist select ... | head -1``) closes the pipe: the write's
``BrokenPipeError`` ends the command quietly with exit code 141 (128 + SIGPIPE, what a shell
reports for a program killed by the signal) instead of a traceback, whichever command wrote.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

__all__ = [
    "BROKEN_PIPE_EXIT",
    "BrokenPipe",
    "fail",
    "missing_module_hint",
    "quiet_broken_pipe",
    "write_json",
    "write_text",
]

#: The exit code when the reader closed stdout early (128 + SIGPIPE).
BROKEN_PIPE_EXIT = 141

#: Top-level modules of the optional extras -> the extra that installs them.
_EXTRAS = {
    "fastapi": "server",
    "uvicorn": "server",
    "starlette": "server",
    "prometheus_client": "server",
    "mcp": "mcp",
    "qdrant_client": "qdrant",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
}


class BrokenPipe(Exception):
    """stdout's reader went away; the command ends with :data:`BROKEN_PIPE_EXIT`."""


def quiet_broken_pipe() -> int:
    """Point stdout at /dev/null (so the interpreter's final flush cannot fail too) and return 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to silence
        pass
    return BROKEN_PIPE_EXIT


def _write(*parts: str) -> None:
    try:
        for part in parts:
            sys.stdout.write(part)
        sys.stdout.flush()
    except BrokenPipeError:
        raise BrokenPipe from None


def write_json(obj: Any) -> None:
    """Write one JSON document (and a newline) on stdout."""
    _write(json.dumps(obj, ensure_ascii=False, default=str), "\n")


def write_text(text: str) -> None:
    """Write text (and a newline) on stdout."""
    _write(text, "" if text.endswith("\n") else "\n")


def fail(message: str, code: int = 2) -> int:
    """Write ``shortlist: error: MESSAGE`` on one line of stderr and return ``code``."""
    one_line = " ".join(message.split())
    try:
        sys.stderr.write(f"shortlist: error: {one_line}\n")
        sys.stderr.flush()
    except BrokenPipeError:  # stderr's reader is gone too: the exit code still says it
        pass
    return code


def missing_module_hint(exc: ModuleNotFoundError) -> str | None:
    """The install hint for an optional module that is not installed, or None when it is not one of ours."""
    top = (exc.name or "").split(".")[0]
    extra = _EXTRAS.get(top)
    if extra is None:
        return None
    from shortlist._install import pip_install

    return f"this command needs the '{extra}' extra ({top} is not installed): {pip_install(extra)}"
