"""A scripted chat model served over real HTTP on loopback, in the OpenAI chat format."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from loopback import start_http_thread, starts_processes

Script = Callable[[dict[str, Any]], dict[str, Any]]


class ChatServer:
    """Serves ``POST /v1/chat/completions`` by calling ``script(request) -> message``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                msg = outer.script(body)
                data = json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": msg}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = start_http_thread(Handler)
        self.url = f"{self.server.url}/v1"

    def close(self) -> None:
        self.server.close()


@pytest.fixture
@starts_processes
def chat_server() -> Iterator[Callable[[Script], ChatServer]]:
    servers: list[ChatServer] = []

    def start(script: Script) -> ChatServer:
        s = ChatServer(script)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


AnthropicScript = Callable[[dict[str, Any]], list[dict[str, Any]]]


class AnthropicServer:
    """Serves ``POST /v1/messages`` (the Messages API) by calling ``script(request) -> content blocks``.

    Records each request body and its headers, as the official SDK sent them.
    """

    def __init__(self, script: AnthropicScript) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path != "/v1/messages":
                    self.send_response(404)
                    self.end_headers()
                    return
                blocks = outer.script(body)
                stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
                message = {
                    "id": f"msg_{len(outer.requests)}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "m"),
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
                data = json.dumps(message).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = start_http_thread(Handler)
        self.url = self.server.url

    def close(self) -> None:
        self.server.close()


@pytest.fixture
@starts_processes
def anthropic_server() -> Iterator[Callable[[AnthropicScript], AnthropicServer]]:
    servers: list[AnthropicServer] = []

    def start(script: AnthropicScript) -> AnthropicServer:
        s = AnthropicServer(script)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()
