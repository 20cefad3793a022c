"""Host tool formats to candidates and back: OpenAI, Anthropic, MCP, plain candidate dicts, skills.

Recognised tool shapes (detected per item):

* OpenAI chat-completions ``{"type": "function", "function": {"name", "description", "parameters"}}``
  and the Responses API's flat ``{"type": "function", "name", "description", "parameters"}``;
* Anthropic ``{"name", "description", "input_schema"}``;
* MCP ``{"name", "description", "inputSchema"}`` (a ``tools/list`` result is ``{"tools": [...]}``);
* shortlist candidates ``{"id", "name"?, "description"?, "metadata"?, "parameters"?, "examples"?}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shortlist.errors import CatalogError
from shortlist.skills.parser import Skill
from shortlist.types import Candidate

__all__ = [
    "candidate_from_dict",
    "candidates_from_tools",
    "skill_to_candidate",
    "to_anthropic_tool",
    "to_openai_tool",
]


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
        metadata = {**metadata, "format": fmt}
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


def to_openai_tool(c: Candidate) -> dict[str, Any]:
    """Render a candidate as an OpenAI chat-completions tool definition."""
    return {"type": "function", "function": {"name": c.name, "description": c.description, "parameters": _schema(c)}}


def to_anthropic_tool(c: Candidate) -> dict[str, Any]:
    """Render a candidate as an Anthropic messages tool definition."""
    return {"name": c.name, "description": c.description, "input_schema": _schema(c)}
