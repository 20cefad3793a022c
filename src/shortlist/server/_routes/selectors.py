"""``POST /v1/selectors/{name}:select``: the external-selector wire protocol v1 over HTTP.

The body is a protocol request (the Go reference's capitalised keys accepted), the answer a
protocol response: this is the selector's own answer, without narrowing or pins, given by
the same receiver as ``shortlist exec-selector`` (:mod:`shortlist.exec._receiver`), so both
answer a request byte for byte alike. A selector
that fails answers 502 and one past its deadline 504, both with ``{"error": ...}`` in the
protocol's response shape, so a runtime calling us falls back as it would for a process.
A body that is not a valid request answers 422 ``invalid_request``, one nested deeper than
``shortlist.exec._protocol.MAX_DEPTH`` 422 ``too_deep`` (never a 500).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from shortlist.errors import SelectorError, SelectorTimeout
from shortlist.exec._protocol import DocumentTooDeep, WireRequest, WireResponse
from shortlist.exec._receiver import RequestRefused, aanswer, receive
from shortlist.rankers._timeout import with_deadline
from shortlist.server._auth import require_key
from shortlist.server._errors import ApiError
from shortlist.server._responses import FastJSONResponse
from shortlist.server._routes import state_of

__all__ = ["router"]

router = APIRouter(tags=["selection"], dependencies=[Depends(require_key)])


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its local ``$defs`` references inlined (OpenAPI resolves refs from the root)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(dict(defs[ref.rsplit("/", 1)[1]]))
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {"application/json": {"schema": _inlined(WireRequest.model_json_schema())}},
}


def _wire_error(status: int, message: str) -> FastJSONResponse:
    return FastJSONResponse({"selected": None, "reason": None, "scores": None, "error": message}, status_code=status)


@router.post(
    "/v1/selectors/{name}:select",
    response_model=WireResponse,
    response_model_exclude_none=False,
    summary="Ask one selector (wire protocol v1 over HTTP)",
    openapi_extra={"requestBody": _REQUEST_BODY},
    responses={502: {"model": WireResponse}, 504: {"model": WireResponse}},
)
async def select_with(name: str, request: Request) -> Response:
    """Answer a wire-protocol request with the selector called ``name``."""
    state = state_of(request)
    if name not in state.selector_names():
        raise ApiError(404, "unknown_selector", f"no selector named {name!r}")
    raw = await request.body()
    try:  # parsed by the protocol module, which refuses documents nested deeper than MAX_DEPTH
        received = receive(raw)
    except RequestRefused as exc:
        code = "too_deep" if isinstance(exc.cause, DocumentTooDeep) else "invalid_request"
        raise ApiError(422, code, str(exc.cause)) from None
    if len(received.candidates) > state.settings.max_candidates:
        raise ApiError(
            413,
            "too_many_candidates",
            f"{len(received.candidates)} candidates sent; this server accepts at most {state.settings.max_candidates}",
        )
    query = received.query
    # spec.selection.timeout_ms, as on /v1/select: a TimeoutSelector (the one deadline mechanism)
    selector = with_deadline(state.shortlist.registry.get(name), state.shortlist.policy.timeout_s)
    try:
        body = (await aanswer(selector, received))[0]
    except (TimeoutError, SelectorTimeout) as exc:
        state.metrics.observe_selection(query.kind, name, "timeout")
        return _wire_error(504, f"selector {name!r} timed out: {exc}" if str(exc) else f"selector {name!r} timed out")
    except Exception as exc:  # a failing selector is contained and reported, as the exec client would see it
        state.metrics.observe_selection(query.kind, name, "error")
        detail = str(exc) if isinstance(exc, SelectorError) else type(exc).__name__
        return _wire_error(502, f"selector {name!r} failed: {detail}")
    state.metrics.observe_selection(query.kind, name, None)
    return Response(content=body, media_type="application/json")
