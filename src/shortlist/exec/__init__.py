"""External selectors: the wire protocol v1, sandboxes, the exec client and the exec-selector server.

The names below are imported on first use (PEP 562), so ``shortlist.exec._events`` loads
without the client's dependencies (a spawned call reports a failed forward cheaply).
"""

from __future__ import annotations

from shortlist._exports import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from shortlist.exec._protocol import PROTOCOL_VERSION, request_schema, response_schema

__all__ = [
    "PROTOCOL_VERSION",
    "request_schema",
    "response_schema",
]

# public name -> the private module that defines it (imported on first use)
_LAZY: dict[str, str] = {
    "PROTOCOL_VERSION": "shortlist.exec._protocol",
    "request_schema": "shortlist.exec._protocol",
    "response_schema": "shortlist.exec._protocol",
}

# names exported before the surface was curated -> (the module that defines them, their public home or None);
# they resolve with a DeprecationWarning until 0.2 removes them
_DEPRECATED: dict[str, tuple[str, str | None]] = {
    "DEFAULT_MAX_OUTPUT_BYTES": ("shortlist.rankers._exec_client", None),
    "DEFAULT_TIMEOUT_MS": ("shortlist.rankers._exec_client", None),
    "DecodedRequest": ("shortlist.exec._protocol", None),
    "DirectSandbox": ("shortlist.exec._sandbox", None),
    "DockerExecSandbox": ("shortlist.exec._sandbox", None),
    "DockerRunSandbox": ("shortlist.exec._sandbox", None),
    "DocumentTooDeep": ("shortlist.exec._protocol", None),
    "ExecDescendantsKilled": ("shortlist.exec._events", None),
    "ExecForwardFailed": ("shortlist.exec._events", None),
    "ExecKilled": ("shortlist.exec._events", None),
    "ExecReasonTruncated": ("shortlist.exec._events", None),
    "ExecRequestFailed": ("shortlist.exec._events", None),
    "ExecSelector": ("shortlist.rankers._exec_client", "shortlist.rankers"),
    "ExecSpawned": ("shortlist.exec._events", None),
    "ExecWorkerRestarted": ("shortlist.exec._events", None),
    "KubectlExecSandbox": ("shortlist.exec._sandbox", None),
    "Launch": ("shortlist.exec._sandbox", None),
    "MAX_DEPTH": ("shortlist.exec._protocol", None),
    "SANDBOX_MODES": ("shortlist.exec._sandbox", None),
    "Sandbox": ("shortlist.exec._sandbox", None),
    "build_sandbox": ("shortlist.exec._sandbox", None),
    "decode_request": ("shortlist.exec._protocol", None),
    "decode_response": ("shortlist.exec._protocol", None),
    "encode_request": ("shortlist.exec._encode", None),
    "encode_response": ("shortlist.exec._encode", None),
    "grant_env": ("shortlist.exec._sandbox", None),
    "parse_request": ("shortlist.exec._protocol", None),
}


def __getattr__(name: str) -> Any:
    return resolve(__name__, name, _LAZY, _DEPRECATED, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
