"""The one receiver of wire protocol v1: answer one request document with a selector.

``shortlist exec-selector`` (spawned, worker and daemon modes) and ``POST
/v1/selectors/{name}:select`` both answer through :func:`answer` / :func:`aanswer`, so a
request gets the same answer, byte for byte, whichever surface receives it. The decisions
(``docs/exec-protocol.md``, "Receiving a request"):

* the request is parsed by :func:`~shortlist.exec._protocol.parse_request` (the Go reference's
  capitalised keys accepted); one it refuses raises :class:`RequestRefused`;
* candidates that repeat an id collapse before the selector sees them, the first one kept
  (ids are a set, as in PromptKit);
* ``k`` is read by :func:`~shortlist.exec._protocol.selector_k` (0, or at least the
  candidates' count, lets the selector choose);
* the answer is the selector's own (no narrowing, no pins), encoded by
  :func:`~shortlist.exec._encode.encode_response`: ``abstained`` appears only when true;
* a deadline is the selector's: the caller hands in a selector wrapped in
  :class:`~shortlist.rankers._timeout.TimeoutSelector` when it has one, and its
  :class:`~shortlist.errors.SelectorTimeout` propagates like any failure of the selector.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from shortlist._types import Candidate, Query, Selection
from shortlist.exec._encode import encode_response
from shortlist.exec._protocol import parse_request, selector_k
from shortlist.selection._base import Selector

__all__ = ["CandidateRefs", "Received", "RequestRefused", "aanswer", "answer", "receive"]


class RequestRefused(ValueError):
    """The request document was refused (not JSON, nested too deep, wrongly typed, an unknown ref).

    Its text names the parser's own error (``DocumentTooDeep: request nests ...``); ``cause``
    is that error.
    """

    def __init__(self, cause: ValueError) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


class CandidateRefs:
    """The candidate lists a worker kept, by ``candidates_ref`` (the most recent few)."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._lists: OrderedDict[str, list[Candidate]] = OrderedDict()

    def put(self, ref: str, candidates: list[Candidate]) -> None:
        """Remember ``candidates`` under ``ref``."""
        self._lists[ref] = candidates
        self._lists.move_to_end(ref)
        while len(self._lists) > self._size:
            self._lists.popitem(last=False)

    def get(self, ref: str) -> list[Candidate] | None:
        """The list kept under ``ref``, or None."""
        found = self._lists.get(ref)
        if found is not None:
            self._lists.move_to_end(ref)
        return found


@dataclass(frozen=True, slots=True)
class Received:
    """A request as the selector is asked it: the query (``k`` read), the distinct candidates, the envelope."""

    query: Query
    candidates: list[Candidate]
    id: int | str | None = None
    #: the ``candidates_ref`` this receiver kept (worker mode), echoed in the answer
    kept: str | None = None


def _distinct(candidates: Sequence[Candidate]) -> list[Candidate]:
    """``candidates`` with a repeated id dropped (the first one kept, in order)."""
    seen: set[str] = set()
    out: list[Candidate] = []
    for c in candidates:
        if c.id not in seen:
            seen.add(c.id)
            out.append(c)
    return out


def receive(raw: bytes | str, refs: CandidateRefs | None = None) -> Received:
    """Parse one request document into what the selector is asked.

    Args:
        raw: the request document.
        refs: worker mode: candidate lists kept across requests (``candidates_ref``).

    Raises:
        RequestRefused: not a valid protocol v1 document (not JSON, nested deeper than
            ``MAX_DEPTH``, a wrongly typed field), or an unknown ``candidates_ref`` without
            the candidates. A ValueError.
    """
    try:
        req = parse_request(raw)
    except ValueError as exc:
        raise RequestRefused(exc) from None
    candidates = req.candidates
    kept: str | None = None
    if refs is not None and req.candidates_ref:
        if req.has_candidates:
            refs.put(req.candidates_ref, candidates)
        else:
            found = refs.get(req.candidates_ref)
            if found is None:
                raise RequestRefused(ValueError(f"unknown candidates_ref {req.candidates_ref!r}; send the candidates"))
            candidates = found
        kept = req.candidates_ref
    distinct = _distinct(candidates)
    return Received(selector_k(req.query, distinct), distinct, req.id, kept)


def _reply(selection: Selection, received: Received) -> bytes:
    """The response document (one line, no newline) answering ``received`` with ``selection``."""
    return encode_response(selection, request_id=received.id, candidates_ref=received.kept)


def answer(selector: Selector, raw: bytes | str, refs: CandidateRefs | None = None) -> tuple[bytes, int | str | None]:
    """Answer one request document with ``selector``.

    Args:
        selector: the selector to ask (wrapped in a ``TimeoutSelector`` for a deadline).
        raw: the request document.
        refs: worker mode: candidate lists kept across requests (``candidates_ref``).

    Returns:
        The encoded response (one line, no newline) and the request's id.

    Raises:
        RequestRefused: see :func:`receive`.
        Exception: whatever the selector raised (``SelectorTimeout`` past its deadline).
    """
    received = receive(raw, refs)
    return _reply(selector.select(received.query, received.candidates), received), received.id


async def aanswer(
    selector: Selector, received: Received | bytes | str, refs: CandidateRefs | None = None
) -> tuple[bytes, int | str | None]:
    """Async twin of :func:`answer` (the selector runs through ``aselect``); takes a :class:`Received` too."""
    if not isinstance(received, Received):
        received = receive(received, refs)
    selection = await selector.aselect(received.query, received.candidates)
    return _reply(selection, received), received.id
