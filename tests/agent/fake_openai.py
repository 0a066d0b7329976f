"""A real HTTP server on 127.0.0.1 that speaks enough of the OpenAI chat-completions API to script a model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a status, a JSON body and headers."""

    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def completion(content: str = "", tool_calls: list[dict[str, Any]] | None = None, **choice: Any) -> Reply:
    """A chat.completion reply with optional tool calls given as (name, arguments-text) dicts."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for n, c in enumerate(tool_calls)
        ]
    finish = "tool_calls" if tool_calls else "stop"
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, **choice}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return Reply(body)


class FakeOpenAI:
    """Serves `replies` in order to POST /v1/chat/completions and lists one model at GET /v1/models."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, reply: Reply) -> None:
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(Reply({"object": "list", "data": [{"id": "scripted-model", "object": "model"}]}))
                else:
                    self._send(Reply({"error": {"message": "not found"}}, status=404))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    self._send(Reply({"error": {"message": f"no route {self.path}"}}, status=404))
                elif not server.replies:
                    self._send(Reply({"error": {"message": "script exhausted"}}, status=400))
                else:
                    self._send(server.replies.pop(0))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @contextmanager
    def running(self) -> Iterator[FakeOpenAI]:
        thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._httpd.shutdown()
            self._httpd.server_close()
