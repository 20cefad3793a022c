"""Helpers of the MCP tests (a uniquely named module: every test folder has its own conftest)."""

from __future__ import annotations

import os


def child_pids(fragment: str) -> list[int]:
    """Direct children of this process whose command line contains ``fragment`` (Linux /proc)."""
    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z" and fragment.encode() in cmd:
            out.append(int(entry))
    return out
