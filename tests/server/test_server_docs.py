"""``/docs`` and ``/redoc`` (issue 12, a Low item): off when API keys are set, not open to anyone.

They load Swagger UI / ReDoc from a CDN and FastAPI serves them without a key, so with keys they
are not served at all; ``/openapi.json`` stays open (clients and probes read it).
"""

from __future__ import annotations

from typing import Any

from shortlist.server._settings import KeyPolicy, hash_key


def test_docs_are_not_served_when_keys_are_set(app_factory: Any) -> None:
    keys = {hash_key("k"): KeyPolicy(label="k")}
    with app_factory(api_keys=keys) as srv:
        with srv.client() as anonymous:
            for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
                assert anonymous.get(path).status_code == 404, path
            assert anonymous.get("/openapi.json").status_code == 200
        with srv.client("k") as keyed:  # not behind the key either: they are off
            assert keyed.get("/docs").status_code == 404


def test_docs_are_served_to_loopback_clients_without_keys(app_factory: Any) -> None:
    with app_factory() as srv, srv.client() as c:
        assert c.get("/docs").status_code == 200
        assert c.get("/redoc").status_code == 200
