"""External selectors: the wire protocol v1, sandboxes, the exec client and the exec-selector server.

The names below are imported on first use (PEP 562), so ``shortlist.exec.events`` loads
without the client's dependencies (a spawned call reports a failed forward cheaply).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shortlist.exec.client import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_MS, ExecSelector
    from shortlist.exec.events import (
        ExecDescendantsKilled,
        ExecForwardFailed,
        ExecKilled,
        ExecReasonTruncated,
        ExecRequestFailed,
        ExecSpawned,
        ExecWorkerRestarted,
    )
    from shortlist.exec.protocol import (
        MAX_DEPTH,
        PROTOCOL_VERSION,
        DecodedRequest,
        DocumentTooDeep,
        decode_request,
        decode_response,
        encode_request,
        encode_response,
        parse_request,
        request_schema,
        response_schema,
    )
    from shortlist.exec.sandbox import (
        SANDBOX_MODES,
        DirectSandbox,
        DockerExecSandbox,
        DockerRunSandbox,
        KubectlExecSandbox,
        Launch,
        Sandbox,
        build_sandbox,
        grant_env,
    )

_HOMES = {
    "DEFAULT_MAX_OUTPUT_BYTES": "client",
    "DEFAULT_TIMEOUT_MS": "client",
    "ExecSelector": "client",
    "ExecDescendantsKilled": "events",
    "ExecForwardFailed": "events",
    "ExecKilled": "events",
    "ExecReasonTruncated": "events",
    "ExecRequestFailed": "events",
    "ExecSpawned": "events",
    "ExecWorkerRestarted": "events",
    "MAX_DEPTH": "protocol",
    "PROTOCOL_VERSION": "protocol",
    "DecodedRequest": "protocol",
    "DocumentTooDeep": "protocol",
    "decode_request": "protocol",
    "decode_response": "protocol",
    "encode_request": "protocol",
    "encode_response": "protocol",
    "parse_request": "protocol",
    "request_schema": "protocol",
    "response_schema": "protocol",
    "SANDBOX_MODES": "sandbox",
    "DirectSandbox": "sandbox",
    "DockerExecSandbox": "sandbox",
    "DockerRunSandbox": "sandbox",
    "KubectlExecSandbox": "sandbox",
    "Launch": "sandbox",
    "Sandbox": "sandbox",
    "build_sandbox": "sandbox",
    "grant_env": "sandbox",
}

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "MAX_DEPTH",
    "PROTOCOL_VERSION",
    "SANDBOX_MODES",
    "DecodedRequest",
    "DirectSandbox",
    "DockerExecSandbox",
    "DockerRunSandbox",
    "DocumentTooDeep",
    "ExecDescendantsKilled",
    "ExecForwardFailed",
    "ExecKilled",
    "ExecReasonTruncated",
    "ExecRequestFailed",
    "ExecSelector",
    "ExecSpawned",
    "ExecWorkerRestarted",
    "KubectlExecSandbox",
    "Launch",
    "Sandbox",
    "build_sandbox",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "grant_env",
    "parse_request",
    "request_schema",
    "response_schema",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'shortlist.exec' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"shortlist.exec.{home}"), name)
    globals()[name] = value
    return value
