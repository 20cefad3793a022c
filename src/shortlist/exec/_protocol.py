"""Wire protocol v1 of external selectors: the request and response documents, their schemas, and parsing them.

One request is a JSON object::

    {"version": 1,
     "query": {"text": "...", "kind": "tool", "pack_id": "", "agent_id": "", "k": 5},
     "candidates": [{"id": "...", "name": "...", "description": "...", "metadata": {}}]}

and one response is a JSON object ``{"selected": [ids], "reason": "...", "scores": [...]}``.

*What we send* uses exactly these snake_case keys (plus ``parameters``/``examples`` on a
candidate when it has them, and ``id`` and ``candidates_ref`` on the envelope in worker
mode: a worker that echoes ``candidates_ref`` may then receive requests that omit an
unchanged candidate list; see ``docs/exec-protocol.md``).

*What we accept* is lenient where the reference is: keys match case-insensitively and
ignoring underscores (the Go reference sends ``Text``, ``PackID``, ``ID``, ``Metadata: null``
…), a missing ``version`` means 1, ``null`` means "absent", unknown keys are ignored.

*What a response must be* is strict: exactly one JSON object (surrounding whitespace
allowed). A log line before or after it, empty output, or a wrongly typed field is a
:class:`~shortlist.errors.SelectorProtocolError`.

Encoding what we send is :mod:`shortlist.exec._encode`; salvaging the ``id`` of a request
line that does not parse is :mod:`shortlist.exec._request_id`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from shortlist._events import emit
from shortlist._types import Candidate, Query, Selection, cap_reason
from shortlist.errors import DocumentTooDeep, SelectorProtocolError
from shortlist.exec._events import ExecReasonTruncated

__all__ = [
    "MAX_DEPTH",
    "PROTOCOL_VERSION",
    "DecodedRequest",
    "DocumentTooDeep",
    "WireCandidate",
    "WireQuery",
    "WireRequest",
    "WireResponse",
    "decode_request",
    "decode_response",
    "parse_request",
    "request_schema",
    "response_answers",
    "response_schema",
    "selector_k",
]

#: The protocol version this module speaks.
PROTOCOL_VERSION = 1
#: The deepest nesting of arrays and objects a document may have (the document itself is level 1).
MAX_DEPTH = 100

#: A correlation id: an integer the client chose (a JSON ``true`` is not one), or a string.
WireId = StrictInt | StrictStr | None


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WireQuery(_Wire):
    """``request.query``: what the selector is asked."""

    text: str = Field(default="", description="The latest user turn's text.")
    kind: str = Field(default="tool", description='"tool" or "skill" (open to more kinds).')
    pack_id: str = Field(default="", description="The pack (agent definition) of the turn.")
    agent_id: str = Field(default="", description="The agent within the pack.")
    k: int = Field(default=0, ge=0, description="The most ids wanted; 0 lets the selector choose.")


class WireCandidate(_Wire):
    """One element of ``request.candidates``."""

    id: str = Field(min_length=1, description="Stable identifier; what the selector returns.")
    name: str = Field(default="", description="Display name (the id when empty).")
    description: str = Field(default="", description="The text rankers work on.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form data (tags, namespace…).")
    parameters: dict[str, Any] | None = Field(
        default=None, description="JSON Schema of a tool's parameters; sent only when the tool has one."
    )
    examples: list[str] = Field(
        default_factory=list, description="Example queries this candidate answers; sent only when non-empty."
    )


class WireRequest(_Wire):
    """A whole request document."""

    version: int = Field(default=PROTOCOL_VERSION, description="Protocol version; missing means 1.")
    id: WireId = Field(default=None, description="Correlation id (worker mode); echoed in the response.")
    query: WireQuery
    candidates_ref: str | None = Field(
        default=None,
        description=(
            "Worker mode: a digest naming this candidate list. A worker that echoes it in its response may "
            "later receive requests carrying only the ref (no candidates) while the list is unchanged."
        ),
    )
    candidates: list[WireCandidate] = Field(default_factory=list)


class WireResponse(_Wire):
    """A whole response document."""

    id: WireId = Field(default=None, description="The request's id (worker mode).")
    selected: list[str] | None = Field(
        default=None, description="Chosen ids, best first; null, missing or [] means no opinion (fallback)."
    )
    reason: str | None = Field(default=None, description="Free text, logged and reported.")
    scores: list[float] | None = Field(default=None, description="One score per selected id.")
    abstained: bool = Field(default=False, description="True: nothing fits (as opposed to no answer).")
    error: str | None = Field(default=None, description="The selector could not answer this request.")
    candidates_ref: str | None = Field(
        default=None, description="Worker mode: echo of the request's candidates_ref, meaning 'I kept this list'."
    )


# --- decoding (what we accept) -----------------------------------------------------------


def _fold(key: str) -> str:
    return key.replace("_", "").lower()


def _canonical(obj: Any, fields: Mapping[str, str]) -> dict[str, Any]:
    """Map keys case- and underscore-insensitively onto ``fields``; drop nulls and unknown keys."""
    if not isinstance(obj, Mapping):
        raise TypeError(f"expected a JSON object, got {type(obj).__name__}")
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = fields.get(_fold(str(key)))
        if name is None or value is None:
            continue
        if name not in out or key == name:  # an exact snake_case key wins over a variant
            out[name] = value
    return out


def _folded(model: type[BaseModel]) -> dict[str, str]:
    return {_fold(name): name for name in model.model_fields}


_REQUEST_KEYS = _folded(WireRequest)
_QUERY_KEYS = _folded(WireQuery)
_CANDIDATE_KEYS = _folded(WireCandidate)
_RESPONSE_KEYS = _folded(WireResponse)


def _check_depth(data: Any, what: str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`DocumentTooDeep` when ``data`` nests deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            raise DocumentTooDeep(what, limit)
        kind = type(node)
        if kind is dict or (kind is not list and isinstance(node, Mapping)):
            children: Any = node.values()
        else:
            children = node
        below = depth + 1
        for child in children:
            ckind = type(child)
            if ckind is dict or ckind is list or (ckind is not str and isinstance(child, (Mapping, list, tuple))):
                push((child, below))


def _loads_document(raw: bytes | str, what: str) -> Any:
    text = raw.decode("utf-8", errors="strict") if isinstance(raw, bytes) else raw
    if not text.strip():
        raise ValueError(f"empty {what}")
    try:
        data = json.loads(text)
    except RecursionError:  # the C scanner gives up around 1,000 levels: a clear, typed refusal instead
        raise DocumentTooDeep(what, MAX_DEPTH) from None
    except json.JSONDecodeError as exc:
        first = text.strip().splitlines()[0][:120]
        raise ValueError(
            f"{what} is not exactly one JSON document ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"it starts with {first!r}"
        ) from None
    _check_depth(data, what)
    return data


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """A parsed request: the query, the candidates, and the envelope's worker-mode fields."""

    query: Query
    candidates: list[Candidate]
    id: int | str | None = None
    candidates_ref: str | None = None
    has_candidates: bool = True


def parse_request(raw: bytes | str | Mapping[str, Any]) -> DecodedRequest:
    """Parse a request, accepting the Go reference's capitalised keys and a missing version.

    Raises:
        DocumentTooDeep: the document nests deeper than :data:`MAX_DEPTH` (a ValueError).
        ValueError: not a JSON object, a wrong version, or a field of the wrong type.
    """
    if isinstance(raw, Mapping):
        _check_depth(raw, "request")
        data: Any = raw
    else:
        data = _loads_document(raw, "request")
    try:
        doc = _canonical(data, _REQUEST_KEYS)
        has_candidates = "candidates" in doc
        if "query" in doc:
            doc["query"] = _canonical(doc["query"], _QUERY_KEYS)
        if has_candidates:
            if not isinstance(doc["candidates"], list):
                raise TypeError("candidates must be a list")
            doc["candidates"] = [_canonical(c, _CANDIDATE_KEYS) for c in doc["candidates"]]
        request = WireRequest.model_validate(doc)
    except TypeError as exc:
        raise ValueError(f"invalid request: {exc}") from None
    except ValidationError as exc:
        raise ValueError(f"invalid request: {_first_error(exc)}") from None
    if request.version != PROTOCOL_VERSION:
        raise ValueError(f"unsupported protocol version {request.version}; this side speaks {PROTOCOL_VERSION}")
    q = request.query
    query = Query(text=q.text, kind=q.kind or "tool", k=q.k, pack_id=q.pack_id, agent_id=q.agent_id)
    candidates = [
        Candidate(
            id=c.id,
            name=c.name,
            description=c.description,
            metadata=c.metadata,
            parameters=c.parameters,
            examples=tuple(c.examples),
        )
        for c in request.candidates
    ]
    return DecodedRequest(query, candidates, request.id, request.candidates_ref, has_candidates)


def selector_k(query: Query, candidates: Sequence[Candidate]) -> Query:
    """The query a receiver asks its selector: a ``k`` of 0 or of at least the candidates' count means 0.

    PromptKit's tool path sends ``K = len(candidates)`` and its skill path ``K = 0``; both mean
    "choose for me", so the selector's own cut (``top_k``, adaptive) applies. A smaller ``k``
    is the caller's and stays authoritative.
    """
    if query.k and query.k < len(candidates):
        return query
    return query if query.k == 0 else replace(query, k=0)


def decode_request(raw: bytes | str | Mapping[str, Any]) -> tuple[Query, list[Candidate], int | str | None]:
    """Parse a request (see :func:`parse_request`), its ``k`` read as a receiver does (:func:`selector_k`).

    Returns:
        ``(query, candidates, request_id)``.

    Raises:
        ValueError: not a JSON object, a wrong version, or a field of the wrong type.
    """
    req = parse_request(raw)
    return selector_k(req.query, req.candidates), req.candidates, req.id


def decode_response(raw: bytes | str, *, selector: str = "") -> tuple[Selection, WireResponse]:
    """Parse a response strictly: exactly one JSON object; ``selected`` null or missing means empty.

    Returns:
        The :class:`Selection` and the parsed document (for its ``id`` and ``error``).

    A ``reason`` longer than :data:`~shortlist._types.MAX_REASON_CHARS` is truncated (with
    :data:`~shortlist._types.REASON_TRUNCATED_MARKER` at its end) in both the selection and the
    returned document, and an :class:`~shortlist.exec._events.ExecReasonTruncated` event says so.

    Raises:
        SelectorProtocolError: empty output, not exactly one JSON object, nested deeper than
            :data:`MAX_DEPTH`, wrong field types (an ``id`` that is neither an integer nor a
            string, such as ``true``), non-finite scores, or as many scores as selected ids.
    """
    try:
        data = _loads_document(raw, "selector output")
        if not isinstance(data, dict):
            raise ValueError(f"selector output must be a JSON object, got {type(data).__name__}")
        response = WireResponse.model_validate(_canonical(data, _RESPONSE_KEYS))
        if response.reason is not None:
            reason, truncated = cap_reason(response.reason)
            if truncated:
                emit(ExecReasonTruncated(selector=selector, chars=len(response.reason), kept=len(reason)))
                response = response.model_copy(update={"reason": reason})
        selected = tuple(response.selected or ())
        scores = None if response.scores is None else tuple(response.scores)
        if scores is not None and not selected and not scores:
            scores = None
        if scores is not None and any(not math.isfinite(s) for s in scores):
            raise ValueError("scores must be finite numbers")
        selection = Selection(selected, reason=response.reason or "", scores=scores, abstained=response.abstained)
    except UnicodeDecodeError as exc:
        raise SelectorProtocolError(f"selector output is not UTF-8: {exc.reason}", selector=selector) from None
    except ValidationError as exc:
        raise SelectorProtocolError(f"invalid response: {_first_error(exc)}", selector=selector) from None
    except (TypeError, ValueError) as exc:
        raise SelectorProtocolError(str(exc), selector=selector) from None
    return selection, response


def response_answers(response_id: int | str | None, request_id: int) -> bool:
    """True when a response's ``id`` answers the request ``request_id`` (worker mode).

    The rule: ids are integers the client chose. The echo must be that integer, or the same
    number as a decimal string (``"7"`` for 7: some runtimes keep ids as strings; it cannot be
    mistaken for another request's, since ids never repeat). A missing id, another number, a
    JSON ``true`` (Python's ``True == 1``) or a look-alike string (``"07"``, ``" 7"``) does not.
    """
    if isinstance(response_id, bool) or response_id is None:
        return False
    if isinstance(response_id, int):
        return response_id == request_id
    return response_id == str(request_id)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "document"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{more}"


# --- schemas -----------------------------------------------------------------------------


def _schema(model: type[BaseModel], title: str) -> dict[str, Any]:
    schema = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = title
    return schema


def request_schema() -> dict[str, Any]:
    """Return the JSON Schema of a request document (protocol v1)."""
    return _schema(WireRequest, "shortlist external selector request (protocol v1)")


def response_schema() -> dict[str, Any]:
    """Return the JSON Schema of a response document (protocol v1)."""
    return _schema(WireResponse, "shortlist external selector response (protocol v1)")
