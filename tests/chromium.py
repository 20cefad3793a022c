"""Headless Chromium driven over the DevTools protocol, for the tests of pages shortlist renders.

Starts Debian's ``/usr/bin/chromium`` (never a downloaded browser) with a fresh profile, no
background networking and a DevTools port on loopback, opens one page target and speaks CDP
over a websocket (the ``websockets`` sync client). Every network request the page makes is
recorded (``Network.requestWillBeSent``), so a test can assert that nothing left the machine.

``chromium_or_skip()`` skips the calling test when Chromium or ``websockets`` is missing (CI
installs Chromium with ``scripts/install-chromium``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

#: Where screenshots go (gitignored): tests/artifacts/.
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--mute-audio",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1280,2000",
)


def chromium_or_skip() -> str:
    """The Chromium executable, or skip the test (with the reason) when it cannot run here."""
    pytest.importorskip("websockets.sync.client")
    exe = os.environ.get("SHORTLIST_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (bash scripts/install-chromium)")
    return exe


class Page:
    """One page target: navigate, evaluate JavaScript, type, screenshot; records requests."""

    def __init__(self, ws: Any, session: str) -> None:
        self._ws = ws
        self._session = session
        self._next = 0
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 30.0) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            mid = self._next
            self._ws.send(json.dumps({"id": mid, "method": method, "params": params or {}, "sessionId": self._session}))
            deadline = time.monotonic() + timeout
            while True:
                msg = json.loads(self._ws.recv(timeout=max(0.01, deadline - time.monotonic())))
                if msg.get("id") == mid:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    result: dict[str, Any] = msg.get("result", {})
                    return result
                if "method" in msg:
                    self.events.append(msg)

    def wait_event(self, method: str, *, timeout: float = 30.0) -> dict[str, Any]:
        """Wait for the next event ``method`` (events already seen count)."""
        for i, e in enumerate(self.events):
            if e["method"] == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self._ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self.events.append(msg)

    def goto(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page and return its value (JSON-able)."""
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in out:
            raise RuntimeError(f"page error: {out['exceptionDetails']}")
        return out["result"].get("value")

    def type_into(self, selector: str, text: str) -> None:
        """Focus ``selector`` and type ``text`` as key events (input events fire as for a user)."""
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path = ARTIFACTS / name
        path.write_bytes(base64.b64decode(data))
        return path

    def requested_urls(self) -> list[str]:
        self.js("1")  # drain pending events
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def console_errors(self) -> list[str]:
        return [
            str(e["params"].get("entry", {}).get("text"))
            for e in self.events
            if e["method"] == "Log.entryAdded" and e["params"].get("entry", {}).get("level") == "error"
        ]


@contextmanager
def browser_page() -> Iterator[Page]:
    """A fresh headless Chromium with one page (Page, Runtime, Network and Log domains on)."""
    exe = chromium_or_skip()
    from websockets.sync.client import connect

    profile = tempfile.mkdtemp(prefix="shortlist-chromium-")
    proc = subprocess.Popen(
        [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    drain: threading.Thread | None = None
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
        if url is None:
            raise RuntimeError("chromium did not start: " + "".join(lines[-20:]))
        drain = threading.Thread(target=proc.stderr.read, daemon=True)  # keep its stderr pipe drained
        drain.start()
        with connect(url, max_size=64 * 1024 * 1024, open_timeout=30) as ws:
            ws.send(json.dumps({"id": 1, "method": "Target.createTarget", "params": {"url": "about:blank"}}))
            target = _reply(ws, 1)["targetId"]
            ws.send(
                json.dumps(
                    {"id": 2, "method": "Target.attachToTarget", "params": {"targetId": target, "flatten": True}}
                )
            )
            session = _reply(ws, 2)["sessionId"]
            page = Page(ws, session)
            page._next = 10
            for domain in ("Page", "Runtime", "Network", "Log"):
                page.send(f"{domain}.enable")
            yield page
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if drain is not None:
            drain.join(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


def _reply(ws: Any, mid: int) -> dict[str, Any]:
    while True:
        msg = json.loads(ws.recv(timeout=30))
        if msg.get("id") == mid:
            if "error" in msg:
                raise RuntimeError(str(msg["error"]))
            result: dict[str, Any] = msg["result"]
            return result
