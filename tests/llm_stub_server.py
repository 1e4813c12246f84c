"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions API, for the LLM tests.

It serves scripted replies in order (`StubLLM.reply`, `.error`, `.raw`), records every request
(path, headers, JSON body) and can hold a reply back (`delay_s`) to test timeouts and
cancellation.  Stdlib only; nothing leaves the loopback interface.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    status: int = 200
    content: str | None = None
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # raw body (overrides the chat-completion JSON)
    delay_s: float = 0.0
    usage: dict[str, int] | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])

    @property
    def last_user(self) -> str:
        return next(m["content"] for m in reversed(self.messages) if m["role"] == "user")

    @property
    def text(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


class StubLLM:
    def __init__(self) -> None:
        self.script: deque[Scripted] = deque()
        self.requests: list[Recorded] = []
        self.request_arrived = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                with stub._lock:
                    stub.requests.append(Recorded(self.path, dict(self.headers.items()), body))
                    scripted = stub.script.popleft() if stub.script else None
                stub.request_arrived.set()
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if scripted is None:
                    self._send(500, {"error": {"message": "stub: no scripted reply left"}})
                    return
                deadline = time.monotonic() + scripted.delay_s
                while time.monotonic() < deadline and not stub._stop.is_set():
                    time.sleep(0.02)
                if scripted.body is not None:
                    self._send_raw(scripted.status, scripted.body, scripted.headers)
                elif scripted.status != 200:
                    self._send(scripted.status, {"error": {"message": scripted.content or
                                                           f"stub error {scripted.status}",
                                                           "type": "stub"}}, scripted.headers)
                else:
                    usage = scripted.usage or {"prompt_tokens": 100, "completion_tokens": 50,
                                               "total_tokens": 150}
                    self._send(200, {
                        "id": f"chatcmpl-{len(stub.requests)}", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model", "stub"),
                        "choices": [{"index": 0, "finish_reason": scripted.finish_reason,
                                     "message": {"role": "assistant",
                                                 "content": scripted.content}}],
                        "usage": usage,
                    }, scripted.headers)

            def _send(self, status: int, data: dict[str, Any],
                      headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(data).encode(), headers, "application/json")

            def _send_raw(self, status: int, payload: bytes, headers: dict[str, str] | None,
                          content_type: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (cancellation tests)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.on_stop: list[Any] = []  # callables run by stop() (e.g. closing clients)

    # ---- script ------------------------------------------------------------------------------

    def reply(self, content: str, finish_reason: str = "stop", **kw: Any) -> StubLLM:
        self.script.append(Scripted(content=content, finish_reason=finish_reason, **kw))
        return self

    def error(self, status: int, message: str = "", headers: dict[str, str] | None = None,
              **kw: Any) -> StubLLM:
        self.script.append(Scripted(status=status, content=message or None,
                                    headers=headers or {}, **kw))
        return self

    def raw(self, status: int, body: bytes, **kw: Any) -> StubLLM:
        self.script.append(Scripted(status=status, body=body, **kw))
        return self

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> StubLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        for close in self.on_stop:
            close()
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.rstrip("/") == "/v1/chat/completions"]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
