"""shortlist as an external selector: answer wire-protocol requests on stdin/stdout with any selector.

Single-shot (the reference's spawn-per-call): read one request from stdin until EOF,
write one response on stdout, exit 0; on a bad request or a failing selector write
``{"error": "..."}`` on stderr and exit 1, so the calling runtime falls back.

Warm-up (``--warm --catalog FILE``, :func:`warm_cache`): prepare the selector for that catalog
(:meth:`~shortlist.selection._base.Selector.prepare`) and exit, so the model's optimised graph and
the catalog's vectors are in the persistent cache before the first spawned call (a fresh
machine's calls then fit a 3 s deadline).

Worker (``--worker``): one request per line, one response per line (echoing the request's
``id``), until EOF; a bad line or a failing selector is answered ``{"id": ..., "error":
"..."}`` and the loop goes on. Requests may use the Go reference's capitalised keys.

Every mode answers through the one receiver (:mod:`shortlist.exec._receiver`), which also
serves ``POST /v1/selectors/{name}:select``. While the selector runs, anything it prints goes
to stderr, so stdout carries only protocol documents.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from typing import IO, Any

from shortlist._events import emit
from shortlist._types import Candidate
from shortlist.exec._events import ExecRequestFailed
from shortlist.exec._protocol import parse_request
from shortlist.exec._receiver import CandidateRefs, RequestRefused, answer
from shortlist.exec._request_id import request_id_of
from shortlist.selection._base import Selector

__all__ = [
    "answer_quietly",
    "run_exec_selector",
    "serve_once",
    "serve_worker",
    "warm_cache",
]

logger = logging.getLogger("shortlist.exec")


def answer_quietly(
    selector: Selector, raw: bytes | str, refs: CandidateRefs | None = None
) -> tuple[bytes, int | str | None]:
    """:func:`~shortlist.exec._receiver.answer`, with anything the selector prints sent to stderr.

    Stdout carries only protocol documents.
    """
    with contextlib.redirect_stdout(sys.stderr):
        return answer(selector, raw, refs)


def _error_doc(message: str, request_id: Any = None) -> bytes:
    doc: dict[str, Any] = {"id": request_id} if request_id is not None else {}
    doc["error"] = message
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def _failed(exc: Exception, request_id: int | str | None, *, worker: bool) -> str:
    """Emit the structured event of a request that could not be answered; return the error text."""
    protocol = isinstance(exc, RequestRefused)
    message = str(exc) if protocol else f"{type(exc).__name__}: {exc}"
    emit(ExecRequestFailed(request_id=request_id, error=message[:2048], protocol=protocol, worker=worker))
    return message


def serve_once(selector: Selector, stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> int:
    """Read one request until EOF, write one response; return the exit code (0, or 1 on error)."""
    raw = stdin.read()
    try:
        out = answer_quietly(selector, raw)[0]
    except Exception as exc:  # reported to the caller as a JSON error on stderr and exit 1, and as an event
        logger.debug("exec-selector request failed", exc_info=True)
        stderr.write(_error_doc(_failed(exc, None, worker=False)) + b"\n")
        stderr.flush()
        return 1
    stdout.write(out + b"\n")
    stdout.flush()
    return 0


def serve_worker(selector: Selector, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer newline-delimited requests until EOF; errors are answered in-band. Returns 0.

    A line that cannot be parsed (not JSON, nested too deep, wrongly typed) is answered
    ``{"id": <its top-level id, when one can be found>, "error": "..."}`` and the loop goes on.
    """
    refs = CandidateRefs()
    for line in stdin:
        if not line.strip():
            continue
        try:
            out = answer_quietly(selector, line, refs)[0]
        except Exception as exc:  # answered in-band and reported as an event: the worker keeps serving
            request_id = request_id_of(line)
            out = _error_doc(_failed(exc, request_id, worker=True), request_id)
        stdout.write(out + b"\n")
        stdout.flush()
    return 0


def run_exec_selector(
    *, selector: str | None = None, config: str | None = None, worker: bool = False, stdin: IO[bytes] | None = None
) -> int:
    """Serve the named selector on this process's stdin/stdout (what ``shortlist exec-selector`` runs).

    Args:
        selector: the selector's name (default: :data:`~shortlist.rankers._registry.DEFAULT_SELECTOR`).
        config: a ``runtime.yaml`` declaring selectors (optional).
        worker: serve newline-delimited requests until EOF instead of one request.
        stdin: read the request(s) from here instead of this process's stdin (a forwarding
            client that already read it).

    Returns:
        The process exit code.

    Raises:
        ConfigError: the config is invalid or the selector name does not resolve.
    """
    from shortlist._config import load_runtime_config
    from shortlist.rankers._registry import DEFAULT_SELECTOR, SelectorRegistry

    runtime = load_runtime_config(config) if config else None
    registry = SelectorRegistry(runtime, source=config)
    try:
        chosen = registry.get(selector or DEFAULT_SELECTOR)
        source = sys.stdin.buffer if stdin is None else stdin
        if worker:
            return serve_worker(chosen, source, sys.stdout.buffer)
        return serve_once(chosen, source, sys.stdout.buffer, sys.stderr.buffer)
    finally:
        registry.close()


def _warm_candidates(path: str) -> list[Candidate]:
    """The catalog in ``path``: tool definitions (``load_catalog``), else a request document's candidates."""
    from pathlib import Path

    from shortlist.adapters._catalog import load_catalog
    from shortlist.errors import CatalogError

    try:
        return load_catalog(path)
    except CatalogError as exc:
        try:
            request = parse_request(Path(path).read_bytes())
        except (OSError, ValueError):
            raise exc from None
        if not request.candidates:
            raise exc from None
        return list(request.candidates)


def warm_cache(catalog: str, *, selector: str | None = None, config: str | None = None) -> int:
    """Embed ``catalog`` into the persistent cache with the selector a spawned call would use; print a summary.

    Args:
        catalog: a JSON/JSONL file of tool definitions (OpenAI, Anthropic, MCP, candidates) or a
            request document (PromptKit's bytes).
        selector: the selector's name (default: the built-in default).
        config: a ``runtime.yaml`` declaring selectors.

    Returns:
        0.

    Raises:
        CatalogError: the file holds no catalog.
        ConfigError: the config is invalid or the selector name does not resolve.
    """
    import time

    from shortlist._config import load_runtime_config
    from shortlist.embeddings._cache import cache_location
    from shortlist.rankers._registry import DEFAULT_SELECTOR, SelectorRegistry

    candidates = _warm_candidates(catalog)
    started = time.monotonic()
    runtime = load_runtime_config(config) if config else None
    registry = SelectorRegistry(runtime, source=config)
    try:
        name = selector or DEFAULT_SELECTOR
        with contextlib.redirect_stdout(sys.stderr):
            registry.get(name).prepare(candidates)
    finally:
        registry.close()
    summary = {
        "warmed": len(candidates),
        "selector": name,
        "cache": str(cache_location() or "off"),
        "seconds": round(time.monotonic() - started, 2),
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    sys.stdout.flush()
    return 0
