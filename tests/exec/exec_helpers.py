"""Helpers of the exec tests: fixture script paths and process checks."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

SELECTORS = Path(__file__).resolve().parent.parent / "fixtures" / "selectors"
BEHAVE = str(SELECTORS / "behave.py")
RERANK = str(SELECTORS / "rerank.py")
PYTHON = sys.executable


def process_gone(pid: int, within_s: float = 2.0) -> bool:
    """True once ``pid`` no longer exists (or is a zombie), polling up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, IndexError):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
