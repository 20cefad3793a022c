"""Host tool formats to candidates and back: OpenAI, Anthropic, MCP, plain candidate dicts, skills.

Recognised tool shapes (detected per item):

* OpenAI chat-completions ``{"type": "function", "function": {"name", "description", "parameters"}}``
  and the Responses API's flat ``{"type": "function", "name", "description", "parameters"}``;
* Anthropic ``{"name", "description", "input_schema"}``;
* MCP ``{"name", "description", "inputSchema"}`` (a ``tools/list`` result is ``{"tools": [...]}``);
* shortlist candidates ``{"id", "name"?, "description"?, "metadata"?, "parameters"?, "examples"?}``.

**Lossless round trip.** A tool read from a host format keeps its exact definition in
``metadata["definition"]`` (``strict``, ``cache_control``, MCP ``annotations``/``outputSchema``
and any field shortlist does not know), and rendering it back to the *same* format returns that
definition unchanged (only ``name``/``description``/schema are taken from the candidate, so an
edited candidate is rendered as edited). Rendering to another format carries only the fields
that format has. :func:`render_tools` turns a turn's ids into the ``tools=[...]`` of a request.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from shortlist._types import Candidate
from shortlist.errors import CatalogError, UsageError
from shortlist.skills._parser import Skill

__all__ = [
    "candidate_from_dict",
    "candidates_from_tools",
    "render_tools",
    "skill_to_candidate",
    "to_anthropic_tool",
    "to_mcp_tool",
    "to_openai_responses_tool",
    "to_openai_tool",
]

#: The formats :func:`render_tools` renders to.
ToolFormat = Literal["openai", "openai-responses", "anthropic", "mcp"]
#: The metadata key holding a tool's definition exactly as it was read.
DEFINITION_KEY = "definition"


def _str(value: Any, what: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CatalogError(f"{where}: {what} must be a string, not {type(value).__name__}")
    return value


def candidate_from_dict(item: Mapping[str, Any], *, where: str = "item") -> Candidate:
    """Build a candidate from one tool definition in any recognised shape.

    Raises:
        CatalogError: the item has no usable name/id or a field of the wrong type.
    """
    if not isinstance(item, Mapping):
        raise CatalogError(f"{where}: expected an object, got {type(item).__name__}")
    fmt = "candidate"
    body: Mapping[str, Any] = item
    if item.get("type") == "function" and isinstance(item.get("function"), Mapping):
        body, fmt = item["function"], "openai"
    elif item.get("type") == "function":
        fmt = "openai"
    elif "input_schema" in item:
        fmt = "anthropic"
    elif "inputSchema" in item:
        fmt = "mcp"
    cid = body.get("id") if fmt == "candidate" else None
    name = body.get("name")
    if cid is None:
        cid = name
    if not isinstance(cid, str) or not cid.strip():
        raise CatalogError(f"{where}: a tool needs a non-empty `name` (or `id`)")
    params = body.get("parameters", body.get("input_schema", body.get("inputSchema")))
    if params is not None and not isinstance(params, Mapping):
        raise CatalogError(f"{where} ({cid}): parameters must be a JSON Schema object")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise CatalogError(f"{where} ({cid}): metadata must be an object")
    examples = body.get("examples") or ()
    if isinstance(examples, str) or not all(isinstance(e, str) for e in examples):
        raise CatalogError(f"{where} ({cid}): examples must be a list of strings")
    if fmt != "candidate":
        metadata = {**metadata, "format": fmt, DEFINITION_KEY: copy.deepcopy(dict(item))}
    return Candidate(
        id=cid,
        name=_str(name, "name", where) or cid,
        description=_str(body.get("description"), "description", where),
        metadata=dict(metadata),
        parameters=dict(params) if params is not None else None,
        examples=tuple(examples),
    )


def _tool_items(obj: Any) -> Sequence[Any]:
    if isinstance(obj, Mapping):
        if "result" in obj and isinstance(obj["result"], Mapping):  # a JSON-RPC envelope
            obj = obj["result"]
        for key in ("tools", "candidates"):
            if key in obj:
                obj = obj[key]
                break
        else:
            raise CatalogError("expected a list of tools, or an object with a `tools` list")
    if not isinstance(obj, list):
        raise CatalogError("expected a list of tools")
    return obj


def candidates_from_tools(obj: Any, *, source: str = "catalog") -> list[Candidate]:
    """Convert a list of tool definitions (or an MCP ``tools/list`` result) to candidates.

    Raises:
        CatalogError: malformed items, duplicate ids, or an empty catalog.
    """
    items = _tool_items(obj)
    out = [candidate_from_dict(item, where=f"{source}[{i}]") for i, item in enumerate(items)]
    check_unique(out, source=source)
    return out


def check_unique(candidates: Iterable[Candidate], *, source: str) -> None:
    """Raise :class:`CatalogError` on an empty catalog or duplicate ids."""
    seen: set[str] = set()
    dupes: list[str] = []
    count = 0
    for c in candidates:
        count += 1
        if c.id in seen:
            dupes.append(c.id)
        seen.add(c.id)
    if count == 0:
        raise CatalogError(f"{source}: the catalog is empty")
    if dupes:
        raise CatalogError(f"{source}: duplicate ids: {', '.join(sorted(set(dupes))[:5])}")


def skill_to_candidate(skill: Skill) -> Candidate:
    """The candidate a selector sees for a skill (``id == name``)."""
    meta: dict[str, Any] = dict(skill.metadata)
    if skill.path is not None:
        meta["path"] = str(skill.path)
    if skill.allowed_tools:
        meta["allowed_tools"] = list(skill.allowed_tools)
    return Candidate(id=skill.name, name=skill.name, description=skill.description, metadata=meta)


def _schema(c: Candidate) -> dict[str, Any]:
    return dict(c.parameters) if c.parameters is not None else {"type": "object", "properties": {}}


def _source(c: Candidate, shape: str) -> dict[str, Any] | None:
    """A deep copy of the definition ``c`` was read from, when it had ``shape``."""
    original = c.metadata.get(DEFINITION_KEY)
    if not isinstance(original, Mapping):
        return None
    fmt = c.metadata.get("format")
    nested = isinstance(original.get("function"), Mapping)
    actual = {"anthropic": "anthropic", "mcp": "mcp"}.get(str(fmt), "")
    if fmt == "openai":
        actual = "openai" if nested else "openai-responses"
    return copy.deepcopy(dict(original)) if actual == shape else None


def _put(body: dict[str, Any], c: Candidate, schema_key: str) -> dict[str, Any]:
    """Write the candidate's name, description and schema into ``body`` where they differ.

    A field the original left out stays out while the candidate's value is the empty default.
    """
    if body.get("name") != c.name:
        body["name"] = c.name
    if body.get("description", "") != c.description:
        body["description"] = c.description
    if c.parameters is not None and body.get(schema_key) != dict(c.parameters):
        body[schema_key] = dict(c.parameters)
    return body


def to_openai_tool(c: Candidate) -> dict[str, Any]:
    """Render a candidate as an OpenAI chat-completions tool definition.

    A tool read from this shape comes back exactly as it was (``strict`` and unknown fields
    included); one read from the Responses API's flat shape keeps ``strict``.
    """
    original = _source(c, "openai")
    if original is not None:
        original["function"] = _put(dict(original["function"]), c, "parameters")
        return original
    function: dict[str, Any] = {"name": c.name, "description": c.description, "parameters": _schema(c)}
    flat = _source(c, "openai-responses")
    if flat is not None and "strict" in flat:
        function["strict"] = flat["strict"]
    return {"type": "function", "function": function}


def to_openai_responses_tool(c: Candidate) -> dict[str, Any]:
    """Render a candidate as an OpenAI Responses API (flat) function tool."""
    original = _source(c, "openai-responses")
    if original is not None:
        return _put(original, c, "parameters")
    out: dict[str, Any] = {"type": "function", "name": c.name, "description": c.description}
    out["parameters"] = _schema(c)
    nested = _source(c, "openai")
    if nested is not None and "strict" in nested["function"]:
        out["strict"] = nested["function"]["strict"]
    return out


def to_anthropic_tool(c: Candidate) -> dict[str, Any]:
    """Render a candidate as an Anthropic messages tool definition.

    A tool read from this shape comes back exactly as it was (``cache_control``,
    ``defer_loading``, ``strict`` and unknown fields included).
    """
    original = _source(c, "anthropic")
    if original is not None:
        return _put(original, c, "input_schema")
    return {"name": c.name, "description": c.description, "input_schema": _schema(c)}


def to_mcp_tool(c: Candidate) -> dict[str, Any]:
    """Render a candidate as an MCP ``tools/list`` tool.

    A tool read from this shape comes back exactly as it was (``title``, ``annotations``,
    ``outputSchema``, ``_meta`` and unknown fields included).
    """
    original = _source(c, "mcp")
    if original is not None:
        return _put(original, c, "inputSchema")
    return {"name": c.name, "description": c.description, "inputSchema": _schema(c)}


_RENDERERS = {
    "openai": to_openai_tool,
    "openai-responses": to_openai_responses_tool,
    "anthropic": to_anthropic_tool,
    "mcp": to_mcp_tool,
}


def render_tools(catalog: Iterable[Candidate], ids: Iterable[str], fmt: ToolFormat = "openai") -> list[dict[str, Any]]:
    """The ``tools=[...]`` of a model request: the candidates named by ``ids``, in that order.

    ``ids`` is usually ``turn.ids`` of :meth:`shortlist.Shortlist.select`; ``fmt`` is
    ``"openai"`` (chat completions), ``"openai-responses"``, ``"anthropic"`` or ``"mcp"``.

    Raises:
        KeyError: an id that is not in ``catalog``.
        ValueError: an unknown format.
    """
    try:
        render = _RENDERERS[fmt]
    except KeyError:
        raise UsageError(f"unknown tool format {fmt!r}; use one of {', '.join(_RENDERERS)}") from None
    by_id = {c.id: c for c in catalog}
    out = []
    for cid in ids:
        if cid not in by_id:
            raise KeyError(f"{cid!r} is not in the catalog")
        out.append(render(by_id[cid]))
    return out
