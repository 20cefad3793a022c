"""Wire protocol v1: the ``id`` of a request line, salvaged even when the line does not parse.

What the exec-selector echoes in an in-band error, so the caller can match the error to its
request; it tokenises strings and brackets instead of recursing into a document too deep to parse.
"""

from __future__ import annotations

import json
import re
from typing import Any

from shortlist.exec._protocol import _fold

__all__ = ["request_id_of"]

_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]', re.DOTALL)
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip_space(text: str, pos: int) -> int:
    match = _JSON_SPACE.match(text, pos)
    return match.end() if match else pos


def _wire_id(value: Any) -> int | str | None:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def request_id_of(raw: bytes | str) -> int | str | None:
    """The top-level ``id`` of a request line, even one that does not parse (too deep, wrongly typed).

    What the exec-selector echoes in an in-band error, so the caller can match the error to its
    request. Finds the key case-insensitively; a value that is not an integer or a string
    (a bool, an object) is no id. Never raises and never recurses.
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _scan_id(text)
    if not isinstance(data, dict):
        return None
    found = [v for k, v in data.items() if _fold(str(k)) == "id"]
    return _wire_id(data["id"] if "id" in data else found[0] if found else None)


def _scan_id(text: str) -> int | str | None:
    """Find ``"id": <scalar>`` directly inside the outermost object by tokenising strings and brackets."""
    start = _skip_space(text, 0)
    if not text.startswith("{", start):
        return None
    depth = 0
    for match in _JSON_TOKEN.finditer(text, start):
        token = match.group()
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1:
            after = _skip_space(text, match.end())
            if not text.startswith(":", after):
                continue  # a value, not a key
            try:
                key = json.loads(token)
            except ValueError:
                return None
            if _fold(key) != "id":
                continue
            value_at = _skip_space(text, after + 1)
            if text.startswith(("{", "["), value_at):
                return None
            try:
                value, _ = _DECODER.raw_decode(text, value_at)
            except ValueError:
                return None
            return _wire_id(value)
    return None
