"""A strict check of a request dict against the official SDKs' request TypedDicts.

``pydantic`` validates the SDKs' ``Iterable[...]`` fields lazily and ignores unknown keys of a
TypedDict, so it would accept a misspelt ``defer_loadin``. This walks the SDK's own type
annotations instead: a TypedDict admits only its declared keys and needs its required ones,
a union admits a value one of its members admits, a literal only its values.
"""

from __future__ import annotations

import collections.abc
import typing
from typing import Any

import typing_extensions


class ShapeError(AssertionError):
    """The value is not accepted by the SDK type."""


def _is_typeddict(tp: Any) -> bool:
    return typing_extensions.is_typeddict(tp)


def check(value: Any, tp: Any, path: str = "$") -> None:
    """Raise :class:`ShapeError` unless ``tp`` (an SDK param type) accepts ``value``."""
    if tp is Any or tp is object:
        return
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            raise ShapeError(f"{path}: expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        unknown = set(value) - set(hints)
        if unknown:
            raise ShapeError(f"{path}: {tp.__name__} has no field(s) {sorted(unknown)}")
        missing = set(tp.__required_keys__) - set(value)
        if missing:
            raise ShapeError(f"{path}: {tp.__name__} needs {sorted(missing)}")
        for key, item in value.items():
            check(item, hints[key], f"{path}.{key}")
        return
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        check(value, args[0], path)
        return
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        errors = []
        for member in args:
            try:
                check(value, member, path)
                return
            except ShapeError as exc:
                errors.append(str(exc))
        raise ShapeError(f"{path}: no member of the union accepts the value: " + " | ".join(errors[:6]))
    if origin in (typing.Literal, typing_extensions.Literal):
        if value not in args:
            raise ShapeError(f"{path}: {value!r} is not one of {args}")
        return
    if tp is type(None):
        if value is not None:
            raise ShapeError(f"{path}: expected null")
        return
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise ShapeError(f"{path}: expected an object")
        for key, item in value.items():
            check(item, args[1] if args else Any, f"{path}.{key}")
        return
    if origin is not None and (
        origin in (list, tuple, collections.abc.Iterable, collections.abc.Sequence)
        or getattr(origin, "__name__", "") == "SequenceNotStr"
    ):
        if not isinstance(value, list):
            raise ShapeError(f"{path}: expected an array, got {type(value).__name__}")
        for i, item in enumerate(value):
            check(item, args[0] if args else Any, f"{path}[{i}]")
        return
    if tp in (str, int, float, bool):
        ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
        if tp is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise ShapeError(f"{path}: expected {tp.__name__}, got {type(value).__name__}")
        return
    raise ShapeError(f"{path}: the checker does not know type {tp!r}")
