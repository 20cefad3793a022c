"""A scripted OpenAI-compatible chat-completions server on loopback, for the enrichment tests.

It reads the tool names out of the enrichment prompt (``name: ...`` lines inside the
``<tool number="N">`` fences) and answers, per request, what its ``answer`` function returns
for those names: by default ``{"N": [requests]}`` with requests made from each name. It
records every request body, can fail the first ``fail_first`` requests with HTTP 500, and
reports ``usage`` tokens like a real provider. ``keep_alive`` answers HTTP/1.1 and keeps the
connection open as real providers do (the client's pool then holds a live connection).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import http_thread

_TOOL = re.compile(r'<tool number="(\d+)">\nname: ([^\n]*)')

Answer = Callable[[list[str], int], str]


def numbered_requests(names: list[str], n: int) -> str:
    """``{"1": ["Please help me with <name> task 1", ...], ...}``: ``n`` distinct requests per tool."""
    return json.dumps(
        {str(i): [f"Please help me with {name} task {j}" for j in range(n)] for i, name in enumerate(names, 1)}
    )


@dataclass
class ChatServer:
    """What the server saw and how it answers."""

    url: str = ""
    answer: Answer = numbered_requests
    fail_first: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    delay_s: float = 0.0
    keep_alive: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def tool_names(self, i: int) -> list[str]:
        """The tool names of the ``i``-th request's prompt."""
        prompt = self.bodies[i]["messages"][-1]["content"]
        return [m.group(2) for m in _TOOL.finditer(prompt)]


def _n_asked(prompt: str) -> int:
    m = re.search(r"write (\d+) different requests", prompt)
    return int(m.group(1)) if m else 10


@contextlib.contextmanager
def chat_server(**options: Any) -> Iterator[ChatServer]:
    """Serve a :class:`ChatServer` on 127.0.0.1 until the block exits."""
    state = ChatServer(**options)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if state.keep_alive else "HTTP/1.0"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            import time

            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.bodies.append(body)
                index = len(state.bodies)
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                if state.delay_s:
                    time.sleep(state.delay_s)
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": "not found"})
                elif index <= state.fail_first:
                    self._send(500, {"error": {"message": "scripted failure"}})
                else:
                    prompt = body["messages"][-1]["content"]
                    names = [m.group(2) for m in _TOOL.finditer(prompt)]
                    content = state.answer(names, _n_asked(prompt))
                    self._send(
                        200,
                        {
                            "id": f"chatcmpl-{index}",
                            "object": "chat.completion",
                            "model": body.get("model"),
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content},
                                }
                            ],
                            "usage": {
                                "prompt_tokens": len(prompt) // 4,
                                "completion_tokens": len(content) // 4,
                                "total_tokens": len(prompt) // 4 + len(content) // 4,
                            },
                        },
                    )
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _send(self, status: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with http_thread(Handler, quiet=True) as server:
        state.url = server.url
        yield state
