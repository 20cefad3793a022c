"""The ``memory__*`` tools: JSON-Schema definitions for the model and executors bound to one scope.

The model never sees or chooses the scope: :class:`MemoryTools` is built for one subject and
every call acts in that scope. The tools are hidden (no definitions, every call refused) when
the scope names no ``user_id`` (an anonymous user) or when they are disabled ("retrieval on,
tools off"). Mistakes the model can fix (empty content, unknown tool, bad argument types) come
back as ``{"error": ...}`` results rather than exceptions, so a tool call never breaks a turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from shortlist._events import Event, emit
from shortlist.errors import MemoryValueError
from shortlist.memory._record import Memory, Provenance, validate_scope
from shortlist.memory._store import MemoryStore

__all__ = [
    "DEFAULT_CONFIDENCE",
    "MEMORY_TOOL_NAMES",
    "MemoryToolCalled",
    "MemoryTools",
    "ToolDefinition",
]

#: The confidence ``memory__remember`` uses when the model sends none (or a value <= 0).
DEFAULT_CONFIDENCE = 0.8
#: The tool names, in the order they are offered.
MEMORY_TOOL_NAMES = ("memory__remember", "memory__recall", "memory__list", "memory__forget")
_RECALL_DEFAULT_LIMIT = 10
_LIST_DEFAULT_LIMIT = 50
_MAX_LIMIT = 200
_TYPED_REMEMBER_ARGS = frozenset({"content", "type", "confidence", "category", "metadata"})


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One tool offered to the model.

    Args:
        name: the tool name (``memory__remember`` …).
        description: what the model reads to decide whether to call it.
        parameters: the JSON Schema of its arguments.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI Chat Completions ``tools[]`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages ``tools[]`` entry."""
        return {"name": self.name, "description": self.description, "input_schema": dict(self.parameters)}


@dataclass(frozen=True, kw_only=True)
class MemoryToolCalled(Event):
    """A ``memory__*`` tool ran (``ok`` False when it answered with an error)."""

    name: ClassVar[str] = "memory.tool_called"
    area: ClassVar[str] = "memory"
    tool: str = ""
    ok: bool = True
    error: str = ""


_TYPES_SCHEMA = {"type": "array", "items": {"type": "string"}, "description": "Only these memory types."}

_DEFINITIONS = (
    ToolDefinition(
        "memory__remember",
        "Remember a fact about the user for future conversations. Use when the user asks you to "
        "remember something, or states a lasting preference or fact about themselves.",
        {
            "type": "object",
            "properties": {
                "content": {"type": "string", "description": "The fact, as a short sentence."},
                "type": {
                    "type": "string",
                    "description": "Kind of memory: preference, fact, episodic, general (default).",
                },
                "confidence": {"type": "number", "description": "0..1, how sure you are (default 0.8)."},
                "category": {
                    "type": "string",
                    "description": "Consent category, e.g. memory:preferences, memory:identity, memory:health.",
                },
                "metadata": {"type": "object", "description": "Extra key/value data to keep with it."},
            },
            "required": ["content"],
        },
    ),
    ToolDefinition(
        "memory__recall",
        "Search what you remember about the user. Any word of the query may match.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for; empty lists recent memories."},
                "types": _TYPES_SCHEMA,
                "limit": {"type": "integer", "minimum": 1, "description": "Most results (default 10)."},
                "min_confidence": {"type": "number", "description": "Only memories at least this sure."},
            },
            "required": ["query"],
        },
    ),
    ToolDefinition(
        "memory__list",
        "List what you remember about the user, oldest first, a page at a time.",
        {
            "type": "object",
            "properties": {
                "types": _TYPES_SCHEMA,
                "limit": {"type": "integer", "minimum": 1, "description": "Page size (default 50)."},
                "offset": {"type": "integer", "minimum": 0, "description": "Memories to skip (default 0)."},
            },
        },
    ),
    ToolDefinition(
        "memory__forget",
        "Forget one memory by its id (from memory__recall or memory__list).",
        {
            "type": "object",
            "properties": {"memory_id": {"type": "string", "description": "The id of the memory to forget."}},
            "required": ["memory_id"],
        },
    ),
)


class _ArgError(ValueError):
    pass


def _int_arg(args: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise _ArgError(f"{name} must be an integer")
    if int(value) < minimum:
        return default if minimum > 0 and int(value) <= 0 else minimum
    return min(int(value), _MAX_LIMIT) if name == "limit" else int(value)


def _types_arg(args: Mapping[str, Any]) -> list[str] | None:
    value = args.get("types")
    if value in (None, "", []):
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _ArgError("types must be a list of strings")
    return list(value)


def _float_arg(args: Mapping[str, Any], name: str) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _ArgError(f"{name} must be a number")
    return float(value)


class MemoryTools:
    """The four ``memory__*`` tools bound to one store and one scope.

    Args:
        store: where memories are read and written.
        scope: the subject; the tools are hidden unless it has a non-empty ``user_id``.
        enabled: False hides the tools (ambient retrieval may still use the store).
        session_id: recorded on memories the model saves.

    Example:
        >>> tools = MemoryTools(InMemoryStore(), {"user_id": "u1"})
        >>> tools.execute("memory__remember", {"content": "prefers tea"})["status"]
        'remembered'
    """

    def __init__(
        self,
        store: MemoryStore,
        scope: Mapping[str, str],
        *,
        enabled: bool = True,
        session_id: str = "",
    ) -> None:
        self.store = store
        self.scope = dict(scope)
        self.enabled = enabled
        self.session_id = session_id

    @property
    def visible(self) -> bool:
        """Whether the tools are offered: enabled and the scope names a user."""
        return self.enabled and bool(self.scope.get("user_id"))

    def definitions(self) -> list[ToolDefinition]:
        """The tool definitions to offer this turn (empty when hidden)."""
        return list(_DEFINITIONS) if self.visible else []

    def handles(self, name: str) -> bool:
        """Whether ``name`` is one of the memory tools."""
        return name in MEMORY_TOOL_NAMES

    def execute(self, name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        """Run one tool call and return its JSON-ready result.

        Args:
            name: the tool name.
            arguments: the call's arguments, as a mapping or a JSON string.

        Returns:
            The tool result; ``{"error": message}`` when the call cannot be honoured.
        """
        try:
            if not self.visible:
                raise _ArgError("memory tools are not available in this conversation")
            args = self._parse(arguments)
            validate_scope(self.scope)
            if name == "memory__remember":
                result = self._remember(args)
            elif name == "memory__recall":
                result = self._recall(args)
            elif name == "memory__list":
                result = self._list(args)
            elif name == "memory__forget":
                result = self._forget(args)
            else:
                raise _ArgError(f"unknown memory tool {name!r}")
        except (_ArgError, MemoryValueError) as exc:  # bad arguments: answered to the model, nothing stored
            emit(MemoryToolCalled(tool=name, ok=False, error=str(exc)))
            return {"error": str(exc)}
        emit(MemoryToolCalled(tool=name))
        return result

    @staticmethod
    def _parse(arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        if arguments is None or arguments == "":
            return {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise _ArgError(f"arguments are not valid JSON: {exc}") from None
            except RecursionError:
                raise _ArgError("arguments are nested too deeply") from None
        if not isinstance(arguments, Mapping):
            raise _ArgError("arguments must be a JSON object")
        return dict(arguments)

    def _remember(self, args: dict[str, Any]) -> dict[str, Any]:
        content = args.get("content")
        if not isinstance(content, str) or not content.strip():
            raise _ArgError("content is required and must be a non-empty string")
        mtype = args.get("type") or "general"
        if not isinstance(mtype, str):
            raise _ArgError("type must be a string")
        confidence = _float_arg(args, "confidence")
        if confidence is None or confidence <= 0:
            confidence = DEFAULT_CONFIDENCE
        confidence = min(confidence, 1.0)
        extra = args.get("metadata") or {}
        if not isinstance(extra, Mapping):
            raise _ArgError("metadata must be an object")
        # Unknown top-level arguments first, then the explicit metadata object, then the
        # typed fields: on a conflict the typed field wins, and provenance always does.
        metadata: dict[str, Any] = {k: v for k, v in args.items() if k not in _TYPED_REMEMBER_ARGS}
        metadata.update(extra)
        category = args.get("category")
        if category not in (None, ""):
            if not isinstance(category, str):
                raise _ArgError("category must be a string")
            metadata["consent_category"] = category
        metadata["provenance"] = Provenance.USER_REQUESTED.value
        stored = self.store.save(
            Memory(
                type=mtype,
                content=content.strip(),
                scope=self.scope,
                metadata=metadata,
                confidence=confidence,
                session_id=self.session_id,
            )
        )
        return {"status": "remembered", "id": stored.id}

    def _recall(self, args: dict[str, Any]) -> dict[str, Any]:
        query = args.get("query", "")
        if query is None:
            query = ""
        if not isinstance(query, str):
            raise _ArgError("query must be a string")
        found = self.store.retrieve(
            self.scope,
            query,
            types=_types_arg(args),
            limit=_int_arg(args, "limit", _RECALL_DEFAULT_LIMIT, 1),
            min_confidence=_float_arg(args, "min_confidence") or 0.0,
        )
        return {"memories": [m.to_dict(include_scope=False) for m in found], "count": len(found)}

    def _list(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self.store.list(
            self.scope,
            types=_types_arg(args),
            limit=_int_arg(args, "limit", _LIST_DEFAULT_LIMIT, 1),
            offset=_int_arg(args, "offset", 0, 0),
        )
        return {"memories": [m.to_dict(include_scope=False) for m in found], "count": len(found)}

    def _forget(self, args: dict[str, Any]) -> dict[str, Any]:
        memory_id = args.get("memory_id")
        if not isinstance(memory_id, str) or not memory_id:
            raise _ArgError("memory_id is required and must be a string")
        self.store.delete(self.scope, memory_id)
        return {"status": "forgotten", "memory_id": memory_id}
