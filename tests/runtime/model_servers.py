"""Loopback endpoints for the model tests: a recording server with a scripted answer, and the
misbehaving servers the limits exist for (a trickle, a huge body, a lying Content-Length)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from loopback import HTTPThread, start_http_thread


@dataclass
class Recorded:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    """What the server sends: a status, a JSON value (or raw bytes), and how."""

    body: Any = None
    status: int = 200
    raw: bytes | None = None
    #: send the body in pieces of this size, ``delay`` seconds apart (no Content-Length)
    chunk: int = 0
    delay: float = 0.0
    #: a Content-Length to announce instead of the true one
    declared: int | None = None
    #: more response headers (e.g. Content-Encoding)
    headers: dict[str, str] = field(default_factory=dict)


Script = Callable[[Recorded], Reply]


@dataclass
class ModelServer:
    """A loopback HTTP server that records every POST and answers ``script(request)``."""

    script: Script
    requests: list[Recorded] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    http: HTTPThread | None = None

    @property
    def url(self) -> str:
        assert self.http is not None
        return self.http.url

    def close(self) -> None:
        self.stop.set()
        if self.http is not None:
            self.http.close()


def serve(script: Script) -> ModelServer:
    """Start a :class:`ModelServer`; the caller closes it."""
    server = ModelServer(script)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            rec = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            server.requests.append(rec)
            reply = server.script(rec)
            data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.declared is not None:
                self.send_header("Content-Length", str(reply.declared))
            elif not reply.chunk:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                if not reply.chunk:
                    self.wfile.write(data)
                    return
                for i in range(0, len(data), reply.chunk):
                    if server.stop.is_set():
                        return
                    self.wfile.write(data[i : i + reply.chunk])
                    self.wfile.flush()
                    if reply.delay:
                        time.sleep(reply.delay)
                if reply.declared is not None:  # hold the connection: the client must not wait for the rest
                    server.stop.wait(30)
            except OSError:
                return  # the client hung up (what a limit does)

        def log_message(self, *args: Any) -> None:
            pass

    server.http = start_http_thread(Handler, quiet=True)
    return server


def servers() -> Iterator[Callable[[Script], ModelServer]]:
    """The body of a fixture that starts servers and closes them after the test."""
    started: list[ModelServer] = []

    def start(script: Script) -> ModelServer:
        s = serve(script)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


# -- answers in the three shapes ---------------------------------------------------------------


def chat_answer(content: str | None = "ok", tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }


def anthropic_answer(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": blocks,
        "stop_reason": "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def responses_answer(items: list[dict[str, Any]], *, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1.0,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": "m",
        "output": items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 3,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 2,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 5,
        },
    }


def responses_text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
