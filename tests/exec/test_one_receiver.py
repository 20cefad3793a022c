"""One protocol receiver: ``shortlist exec-selector`` and ``POST /v1/selectors/{name}:select`` answer alike.

The same request documents go to both surfaces, in-process: the exec-selector's spawned and
worker modes (``serve_once``/``serve_worker``, what ``run_exec_selector`` runs on stdin) and the
HTTP route through the app (Starlette's test client). Their answers must be the same bytes,
including the edge cases where they used to differ: ``abstained``, candidates that repeat an
id, ids the selector invents, and a selector past its deadline.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shortlist._types import Candidate, Query, Selection
from shortlist.exec._server import serve_once, serve_worker
from shortlist.rankers._timeout import TimeoutSelector
from shortlist.selection._base import Selector
from shortlist.server import ServerSettings, create_app
from shortlist.server._state import ServiceState


class Recorder(Selector):
    """Answers by a fixed rule per query text; records the candidate ids each call saw."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []
        self.ks: list[int] = []
        self._lock = threading.Lock()

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        with self._lock:
            self.seen.append([c.id for c in candidates])
            self.ks.append(query.k)
        if query.text == "nothing fits":
            return Selection(abstained=True, reason="no candidate fits")
        if query.text == "ghost":
            return Selection(("ghost", candidates[0].id), reason="one invented id", scores=(0.9, 0.5))
        ids = tuple(c.id for c in candidates)[: query.k or None]
        return Selection(ids, reason="catalog order", scores=tuple(1.0 / (i + 1) for i in range(len(ids))))


class Sleeper(Selector):
    """Takes longer than any deadline the tests give it."""

    name = "sleeper"

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        time.sleep(1.5)
        return Selection((candidates[0].id,))


def _doc(text: str, candidates: list[dict[str, Any]], **extra: Any) -> bytes:
    return json.dumps({"version": 1, **extra, "query": {"text": text, "k": 2}, "candidates": candidates}).encode()


CANDS = [
    {"id": "refund_order", "description": "Refund a customer's order"},
    {"id": "track_package", "description": "Track a package"},
    {"id": "send_email", "description": "Send an email"},
]
DUPLICATED = [CANDS[0], {"id": "refund_order", "description": "a second refund_order"}, CANDS[1], CANDS[1]]


@pytest.fixture
def surfaces() -> Iterator[tuple[TestClient, Recorder, Selector]]:
    """The app in-process with ``recorder`` and ``slow`` (a 0.2 s deadline) registered; both selectors."""
    settings = ServerSettings(selector="bm25")
    state = ServiceState(settings)
    recorder = Recorder()
    slow = TimeoutSelector(Sleeper(), 0.2, name="slow")
    state.shortlist.registry.register("recorder", recorder)
    state.shortlist.registry.register("slow", slow)
    with TestClient(create_app(settings, service=state), client=("127.0.0.1", 5000)) as client:  # type: ignore[arg-type]
        yield client, recorder, slow


def _cli(selector: Selector, raw: bytes) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    code = serve_once(selector, io.BytesIO(raw), out, err)
    return code, out.getvalue(), err.getvalue()


def _worker(selector: Selector, raw: bytes) -> bytes:
    out = io.BytesIO()
    serve_worker(selector, io.BytesIO(raw + b"\n"), out)
    return out.getvalue()


@pytest.mark.parametrize(
    "raw",
    [
        _doc("refund", CANDS, id=7),
        _doc("refund", CANDS),
        _doc("nothing fits", CANDS, id="abc"),
        _doc("ghost", CANDS, id=1),
        _doc("refund", DUPLICATED, id=2),
        json.dumps({"Query": {"Text": "refund", "K": 3}, "Candidates": [{"ID": c["id"]} for c in CANDS]}).encode(),
    ],
    ids=["plain", "no-id", "abstained", "unknown-ids", "duplicate-ids", "go-keys-k-of-all"],
)
def test_the_cli_and_the_route_give_the_same_bytes(surfaces: tuple[TestClient, Recorder, Selector], raw: bytes) -> None:
    client, recorder, _ = surfaces
    r = client.post("/v1/selectors/recorder:select", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    code, out, err = _cli(recorder, raw)
    assert code == 0, err
    assert out == r.content + b"\n"
    assert _worker(recorder, raw) == out
    # what the selector saw, three times: the same distinct candidates and k
    assert recorder.seen[0] == recorder.seen[1] == recorder.seen[2]
    assert recorder.ks[0] == recorder.ks[1] == recorder.ks[2]


def test_abstained_appears_only_when_true(surfaces: tuple[TestClient, Recorder, Selector]) -> None:
    client, _, _ = surfaces
    plain = client.post("/v1/selectors/recorder:select", content=_doc("refund", CANDS)).json()
    assert "abstained" not in plain and plain["selected"] == ["refund_order", "track_package"]
    nothing = client.post("/v1/selectors/recorder:select", content=_doc("nothing fits", CANDS)).json()
    assert nothing == {"selected": [], "reason": "no candidate fits", "scores": None, "abstained": True}


def test_repeated_ids_collapse_to_the_first(surfaces: tuple[TestClient, Recorder, Selector]) -> None:
    client, recorder, _ = surfaces
    _cli(recorder, _doc("refund", DUPLICATED))
    client.post("/v1/selectors/recorder:select", content=_doc("refund", DUPLICATED))
    assert recorder.seen == [["refund_order", "track_package"]] * 2


def test_invented_ids_are_the_selectors_answer_on_both(surfaces: tuple[TestClient, Recorder, Selector]) -> None:
    client, recorder, _ = surfaces
    body = client.post("/v1/selectors/recorder:select", content=_doc("ghost", CANDS)).json()
    assert body["selected"] == ["ghost", "refund_order"]
    assert json.loads(_cli(recorder, _doc("ghost", CANDS))[1])["selected"] == ["ghost", "refund_order"]


def test_a_deadline_is_a_timeout_on_both(surfaces: tuple[TestClient, Recorder, Selector]) -> None:
    client, _, slow = surfaces
    raw = _doc("refund", CANDS, id=5)
    started = time.monotonic()
    r = client.post("/v1/selectors/slow:select", content=raw)
    assert r.status_code == 504 and "did not answer within 0.200 s" in r.json()["error"]
    code, out, err = _cli(slow, raw)
    assert code == 1 and out == b""
    assert "SelectorTimeout" in json.loads(err)["error"] and "did not answer within 0.200 s" in json.loads(err)["error"]
    answered = json.loads(_worker(slow, raw))
    assert answered["id"] == 5 and "did not answer within 0.200 s" in answered["error"]
    assert time.monotonic() - started < 3 * 1.5  # none waited for the sleeper


def test_a_refused_request_is_refused_on_both(surfaces: tuple[TestClient, Recorder, Selector]) -> None:
    client, recorder, _ = surfaces
    raw = json.dumps({"version": 2, "query": {"text": "x"}}).encode()
    r = client.post("/v1/selectors/recorder:select", content=raw)
    assert r.status_code == 422 and "unsupported protocol version 2" in r.json()["error"]["message"]
    code, _, err = _cli(recorder, raw)
    assert code == 1 and "unsupported protocol version 2" in json.loads(err)["error"]
    assert recorder.seen == []
