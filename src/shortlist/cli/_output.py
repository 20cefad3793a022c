"""The CLI's only way to write: JSON or text on stdout, one-line errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["fail", "write_json", "write_text"]


def write_json(obj: Any) -> None:
    """Write one JSON document (and a newline) on stdout."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str))
    sys.stdout.write("\n")
    sys.stdout.flush()


def write_text(text: str) -> None:
    """Write text (and a newline) on stdout."""
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()


def fail(message: str, code: int = 2) -> int:
    """Write ``shortlist: error: MESSAGE`` on one line of stderr and return ``code``."""
    one_line = " ".join(message.split())
    sys.stderr.write(f"shortlist: error: {one_line}\n")
    sys.stderr.flush()
    return code
