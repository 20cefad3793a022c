"""A bound selector whose warm-up fails keeps ``/readyz`` at 503 until a retry succeeds (issue 27, item 2).

Before the fix the warm-up's failure was a log line and ``/readyz`` said ready while every
``/v1/select`` fell back to all tools. The app runs in-process (Starlette's test client runs its
lifespan); the selector is a real one registered in code that fails while ``broken`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fastapi.testclient import TestClient
from server_helpers import EXAMPLE_CATALOG

from shortlist._events import Event, add_event_hook, remove_event_hook
from shortlist._types import Candidate, Query, Selection
from shortlist.selection._base import Selector
from shortlist.server import ServerSettings, create_app
from shortlist.server._state import ServiceState, WarmUpFailed


class Flaky(Selector):
    """Ranks by catalog order; raises while ``broken`` (an embedding endpoint that is down, a damaged index)."""

    name = "flaky"

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    def select(self, query: Query, candidates: Sequence[Candidate]) -> Selection:
        self.calls += 1
        if self.broken:
            raise RuntimeError("the embedding endpoint refused the connection")
        return Selection(selected=tuple(c.id for c in candidates[:3]))

    def prepare(self, candidates: Sequence[Candidate]) -> None:  # the warm-up: builds its index, fails while broken
        self.select(Query("warm up"), candidates)


def test_readyz_fails_while_the_warm_up_failed_and_recovers_on_a_retry() -> None:
    settings = ServerSettings(catalogs={"ex": str(EXAMPLE_CATALOG)}, selector="flaky")
    state = ServiceState(settings)
    flaky = Flaky()
    state.shortlist.registry.register("flaky", flaky)
    seen: list[Event] = []
    add_event_hook(seen.append)  # process-wide: the retries run on a thread of their own
    try:
        _check_readyz(state, flaky, seen, create_app(settings, service=state))
    finally:
        remove_event_hook(seen.append)


def _check_readyz(state: ServiceState, flaky: Flaky, seen: list[Event], app: object) -> None:
    with TestClient(app) as client:  # type: ignore[arg-type]
        r = client.get("/readyz")
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["status"] == "warm_up_failed"
        assert set(body["warm_up_errors"]) == {"tool", "skill"}  # --selector binds both kinds
        assert "refused the connection" in body["warm_up_errors"]["tool"]
        failed = [e for e in seen if isinstance(e, WarmUpFailed)]
        assert [(e.kind, e.selector, e.attempt) for e in failed] == [("tool", "flaky", 1), ("skill", "flaky", 1)]

        calls = flaky.calls
        assert client.get("/readyz").status_code == 503  # within warm_up_retry_s: no retry yet
        assert flaky.calls == calls

        state.warm_up_retry_s = 0.0
        assert client.get("/readyz").status_code == 503  # starts a retry, which fails again
        deadline = time.monotonic() + 10
        while len([e for e in seen if isinstance(e, WarmUpFailed)]) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [e.attempt for e in seen if isinstance(e, WarmUpFailed)] == [1, 1, 2, 2]

        flaky.broken = False  # the endpoint is back: a retry succeeds and the service is ready
        deadline = time.monotonic() + 10
        while (r := client.get("/readyz")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "ready" and "warm_up_errors" not in r.json()
