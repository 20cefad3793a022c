"""The fixed tool surface for providers without deferred loading: ``find_tools`` plus ``call_tool``.

Chat completions (and every OpenAI-compatible endpoint: vLLM, Ollama, Gemini's compatibility
layer) can only call a tool listed in the request's ``tools`` array, so a tool a search found
would have to join that array, re-writing the cached prefix. The bridge keeps the array fixed:
the search's result carries the found definitions (in the history, after the cached prefix) and
the model calls any of them through one more fixed tool, ``call_tool(name, arguments)``. This
module holds that tool's definition (one for every surface and for the cost model) and
:func:`check_bridge_call`, which reads a ``call_tool`` call and validates its arguments against
the found tool's JSON Schema (``jsonschema``), so a call of a tool not found yet, or with
arguments its schema refuses, is answered with a clear tool error instead of being run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shortlist.offer._search import SEARCH_TOOL_DEFINITION
from shortlist.offer._state import Offer

__all__ = [
    "CALL_TOOL_DEFINITION",
    "CALL_TOOL_DESCRIPTION",
    "CALL_TOOL_NAME",
    "CALL_TOOL_PARAMETERS",
    "BridgeCall",
    "check_bridge_call",
    "offer_json",
    "schema_errors",
    "uses_bridge",
]

#: The bridge tool's name, description and JSON Schema (as every format and the cost model render it).
CALL_TOOL_NAME = "call_tool"
CALL_TOOL_DESCRIPTION = (
    "Call a tool that find_tools returned: give its name and its arguments, an object that "
    "matches the parameters find_tools listed for it."
)
CALL_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "the tool's name, as find_tools returned it"},
        "arguments": {"type": "object", "description": "the tool's arguments"},
    },
    "required": ["name", "arguments"],
}
#: The bridge tool as offered beside ``find_tools``.
CALL_TOOL_DEFINITION: dict[str, Any] = {
    "name": CALL_TOOL_NAME,
    "description": CALL_TOOL_DESCRIPTION,
    "parameters": CALL_TOOL_PARAMETERS,
}


def uses_bridge(fmt: str | None, policy: str) -> bool:
    """Whether a conversation in request format ``fmt`` under ``policy`` calls loaded tools through
    ``call_tool``: chat completions (``"openai"``) under ``deferred``, whose loaded tools are never
    in the ``tools`` array. Anthropic and the Responses API defer tools natively. The runtime,
    ``POST /v1/offer`` and ``shortlist offer`` all ask here."""
    return fmt == "openai" and policy == "deferred"


def offer_json(offer: Offer, fmt: str | None) -> dict[str, Any]:
    """``offer.to_dict()`` with what a client in request format ``fmt`` must offer beside the
    block: ``bridge`` (loaded tools are called through ``call_tool``) and ``fixed_tools`` (the
    definitions of ``find_tools`` when the offer has the search tool, and of ``call_tool`` under
    the bridge). ``POST /v1/offer`` and ``shortlist offer --json`` answer this."""
    bridge = uses_bridge(fmt, offer.policy)
    fixed = [SEARCH_TOOL_DEFINITION] if offer.search_tool else []
    fixed += [CALL_TOOL_DEFINITION] if bridge else []
    return {**offer.to_dict(), "bridge": bridge, "fixed_tools": fixed}


@dataclass(frozen=True, slots=True)
class BridgeCall:
    """One ``call_tool`` call, read: the tool it names and its arguments, or why it is refused.

    Attributes:
        name: the tool named ("" when the call named none).
        arguments: the tool's arguments (empty when unreadable).
        error: why the call is refused (None: run it).
        reason: a short code for the event: ``bad_call``, ``not_found``, ``invalid_arguments``,
            ``invalid_schema``.
    """

    name: str
    arguments: dict[str, Any]
    error: str | None = None
    reason: str = ""


def schema_errors(schema: Mapping[str, Any], arguments: Any, *, limit: int = 3) -> list[str]:
    """What ``schema`` (a JSON Schema, any draft ``$schema`` names; 2020-12 otherwise) refuses in ``arguments``.

    Each error is one line: the path in the arguments and the validator's message.

    Raises:
        jsonschema.SchemaError: ``schema`` is not a valid JSON Schema.
    """
    import jsonschema

    cls = jsonschema.validators.validator_for(dict(schema), default=jsonschema.Draft202012Validator)
    cls.check_schema(dict(schema))
    out = []
    for err in sorted(cls(dict(schema)).iter_errors(arguments), key=lambda e: list(e.absolute_path))[:limit]:
        where = "/".join(str(p) for p in err.absolute_path) or "(arguments)"
        out.append(f"{where}: {err.message[:200]}")
    return out


def check_bridge_call(
    arguments: Mapping[str, Any] | str,
    schemas: Mapping[str, Mapping[str, Any]],
) -> BridgeCall:
    """Read a ``call_tool`` call and check it against the tools it may call.

    Args:
        arguments: the call's arguments (a JSON text or an object): ``{"name", "arguments"}``;
            ``arguments`` may itself be a JSON text of an object.
        schemas: the JSON Schema of every tool the bridge may call now (the found ones).
    """
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        return BridgeCall("", {}, f"{CALL_TOOL_NAME} needs a JSON object of arguments ({exc})", "bad_call")
    if not isinstance(args, dict) or not isinstance(args.get("name"), str) or not args["name"]:
        return BridgeCall("", {}, f'{CALL_TOOL_NAME} needs {{"name": "<tool>", "arguments": {{...}}}}', "bad_call")
    name = args["name"]
    inner = args.get("arguments", {})
    if isinstance(inner, str):
        try:
            inner = json.loads(inner) if inner.strip() else {}
        except json.JSONDecodeError:
            return BridgeCall(name, {}, f"the arguments of {name!r} are not a JSON object", "bad_call")
    if inner is None:
        inner = {}
    if not isinstance(inner, dict):
        return BridgeCall(
            name, {}, f"the arguments of {name!r} must be an object, not {type(inner).__name__}", "bad_call"
        )
    if name not in schemas:
        return BridgeCall(
            name, inner, f"tool {name!r} has not been found yet: search for it with find_tools first", "not_found"
        )
    import jsonschema

    try:
        errors = schema_errors(schemas[name], inner)
    except jsonschema.SchemaError as exc:
        return BridgeCall(
            name, inner, f"tool {name!r} has an invalid parameters schema: {exc.message[:200]}", "invalid_schema"
        )
    if errors:
        return BridgeCall(name, inner, f"invalid arguments for {name!r}: " + "; ".join(errors), "invalid_arguments")
    return BridgeCall(name, inner)
