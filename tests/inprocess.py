"""The CLI called in this process, answered as a finished subprocess would be: for tests of a message or an exit
code, which need not pay for a Python start and the imports of a process each (the fast loop).

``run_cli("select", "weather")`` calls ``shortlist.cli.main`` with stdin, stdout and stderr swapped for buffers
and returns a ``subprocess.CompletedProcess`` with the exit code (an argparse ``SystemExit`` included) and the
text written. A test that uses the ``cli_mode`` fixture (``tests/conftest.py``) runs twice: in this process,
and, marked ``slow``, with ``run_cli`` starting ``python -m shortlist.cli`` as before (the full run proves what
it proved). What needs a process of its own (a signal, a missing module, two processes racing) runs one, in a
test marked ``slow``.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Iterator
from contextvars import ContextVar

from shortlist.cli import main

__all__ = ["as_process", "run_cli"]

_AS_PROCESS: ContextVar[bool] = ContextVar("run_cli_as_process", default=False)


@contextlib.contextmanager
def as_process(enabled: bool = True) -> Iterator[None]:
    """Within the block, ``run_cli`` starts ``python -m shortlist.cli`` instead of calling it in-process."""
    token = _AS_PROCESS.set(enabled)
    try:
        yield
    finally:
        _AS_PROCESS.reset(token)


class _Text(io.TextIOWrapper):
    """A text stream over bytes, as ``sys.stdout`` is (``.buffer`` included), that reads back what was written."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8", newline="")

    def text(self) -> str:
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return raw.getvalue().decode("utf-8").replace("\r\n", "\n")


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``shortlist ARGS`` in this process: its exit code, stdout and stderr (as ``subprocess.run(text=True)``)."""
    if _AS_PROCESS.get():
        command = [sys.executable, "-m", "shortlist.cli", *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120, check=False)
    out, err = _Text(), _Text()
    source = _Text((stdin or "").encode("utf-8"))
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = source, out, err
    try:
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        with contextlib.suppress(ValueError):
            out.flush()
            err.flush()
    return subprocess.CompletedProcess(["shortlist", *args], code, out.text(), err.text())
