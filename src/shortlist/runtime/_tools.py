"""Host tools: a Python function offered to the model, with its JSON Schema and executor."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shortlist._types import Candidate
from shortlist.errors import UsageError

__all__ = ["Tool", "tool"]

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def _schema_from_signature(func: Callable[..., Any]) -> dict[str, Any]:
    sig = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolved annotations: fall back to untyped parameters
        hints = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = typing.get_origin(hints.get(name)) or hints.get(name)
        props[name] = {"type": _JSON_TYPES[hint]} if hint in _JSON_TYPES else {}
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


@dataclass(frozen=True)
class Tool:
    """A host tool: what the model sees and the function that runs it.

    Args:
        name: the tool name (unique in the pack).
        description: what it does (what selectors rank).
        parameters: its JSON Schema.
        func: called with the model's arguments as keywords; sync or async; its result is
            sent back to the model (JSON-encoded unless it is a string).
    """

    name: str
    description: str
    func: Callable[..., Any] | None = None
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_function(
        cls, func: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """Build a tool from a function's name, docstring and signature."""
        doc = inspect.getdoc(func) or ""
        return cls(
            name=name or func.__name__,
            description=description or doc.split("\n\n")[0].strip(),
            func=func,
            parameters=_schema_from_signature(func),
        )

    @property
    def candidate(self) -> Candidate:
        """The candidate a selector ranks for this tool."""
        return Candidate(self.name, self.name, self.description, dict(self.metadata), dict(self.parameters))

    async def acall(self, arguments: Mapping[str, Any] | str) -> str:
        """Run the tool and return its result as text for the model.

        Raises:
            ValueError: the arguments are not a JSON object.
            Exception: whatever the tool raises (the runtime reports it to the model as an error).
        """
        if self.func is None:
            raise RuntimeError(f"tool {self.name!r} has no implementation")
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        if not isinstance(args, dict):
            raise UsageError("tool arguments must be a JSON object")
        out = self.func(**args)
        if inspect.isawaitable(out):
            out = await out
        return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str)


def tool(func: Callable[..., Any]) -> Tool:
    """Decorator: turn a documented, annotated function into a :class:`Tool`."""
    return Tool.from_function(func)
