"""External selectors: the wire protocol v1, sandboxes, the exec client and the exec-selector server."""

from __future__ import annotations

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
