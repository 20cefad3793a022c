"""The decisions page of a real ``shortlist serve`` on loopback, in headless Chromium (Debian's).

The service has an API key and an external selector that always fails behind a breaker of one
failure: after a narrowed request and a failing one, the page (opened with the key as a
header) shows both decisions, the fallback and why, the tokens saved and the open breaker; its
filter works; every request the page made went to the service itself. A screenshot lands in
tests/artifacts/.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest
from serve_process import serve_process
from server_helpers import EXAMPLE_CATALOG

from chromium import browser_page, chromium_or_skip

pytestmark = pytest.mark.slow  # a real `shortlist serve` and Chromium

pytest.importorskip("fastapi")

CONFIG = """\
spec:
  selectors:
    broken:
      command: {python}
      args: ["-c", "import sys; sys.exit(3)"]
      breaker: {{failures: 1, cooldown_ms: 600000}}
"""


def test_the_page_shows_decisions_fallbacks_and_the_open_breaker(tmp_path: Path) -> None:
    chromium_or_skip()
    config = tmp_path / "runtime.yaml"
    config.write_text(CONFIG.format(python=sys.executable))
    env = {**os.environ, "SHORTLIST_API_KEYS": "page-key"}
    args = ("--config", str(config), "--catalog", f"example={EXAMPLE_CATALOG}", "--selector", "bm25")
    with serve_process(tmp_path, *args, env=env) as srv:
        auth = {"Authorization": "Bearer page-key"}
        with httpx.Client(base_url=srv.url, headers=auth, timeout=60) as client:
            ok = client.post("/v1/select", json={"query": "weather in Paris tomorrow", "catalog": "example", "k": 3})
            assert ok.status_code == 200 and ok.json()["fallback"] is None
            bad = client.post(
                "/v1/select", json={"query": "<b>convert 5 usd</b>", "catalog": "example", "selector": "broken"}
            )
            assert bad.status_code == 200 and bad.json()["fallback"] == "error"
        with browser_page() as page:
            page.send("Network.setExtraHTTPHeaders", {"headers": auth})
            page.goto(f"{srv.url}/decisions")
            assert page.js("document.title") == "shortlist: recent decisions"
            rows = "Array.from(document.querySelectorAll('#decisions tr.decision')).filter(r => !r.hidden)"
            assert page.js(f"{rows}.length") == 2
            newest = page.js("document.querySelector('#decisions tr.decision').innerText")
            assert "<b>convert 5 usd</b>" in newest and "error" in newest  # escaped text, shown as typed
            oldest = page.js("document.querySelectorAll('#decisions tr.decision')[1].innerText")
            assert "get_weather_forecast" in oldest and "narrowed" in oldest
            assert page.js("document.querySelector('#breakers tr.breaker td.open').innerText") == "open"
            page.js("const c = document.getElementById('only-fallbacks'); c.click()")
            assert page.js(f"{rows}.length") == 1
            page.type_into("#filter", "paris")  # only the narrowed query says it
            assert page.js(f"{rows}.length") == 0
            page.js("document.getElementById('only-fallbacks').click()")
            assert page.js(f"{rows}.length") == 1
            page.js("const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'))")
            assert page.screenshot("service-decisions.png").stat().st_size > 10_000
            urls = page.requested_urls()
            assert urls and all(u.startswith(srv.url + "/") for u in urls), urls
            assert page.console_errors() == []
        with httpx.Client(base_url=srv.url, timeout=30) as anonymous:
            assert anonymous.get("/decisions").status_code == 401
