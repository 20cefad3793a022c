"""Run a command with stderr on a pseudo-terminal: how the tests see what a user's terminal would draw."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Mapping, Sequence


def run_on_terminal(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 180
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run ``args`` with stdout piped and stderr on a pty; return the process and every byte drawn."""
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            list(args), stdout=subprocess.PIPE, stderr=secondary, timeout=timeout, env=dict(env) if env else None
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(primary)
    return proc, b"".join(chunks)
