"""A raw JSON-RPC client over the server's stdio: sends any JSON (schema-breaking included) and
collects what comes back, for the malformed-request and fuzz tests."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


class RawClient:
    def __init__(self, root: Path, env: dict[str, str] | None = None,
                 capabilities: dict[str, Any] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelstitch.server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})})
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []  # notifications and requests from the server, in order
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.initialize_reply = self.request(
            "initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": capabilities or {}})
        self.notify("initialized", {})

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line.strip() == b"":
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length is None:
                continue
            self.messages.put(json.loads(stream.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The reply to a request (server-to-client requests and notifications are skipped;
        a request the server never answers raises TimeoutError)."""
        self._next += 1
        msg_id = self._next
        self.send({"id": msg_id, "method": method, "params": params})
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method} #{msg_id} was not answered within {timeout} s")
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if message.get("id") == msg_id and "method" not in message:
                return message
            self._keep(message)

    def _keep(self, message: dict[str, Any]) -> None:
        if "method" in message:
            self.seen.append(message)
            if "id" in message:  # a request to the client: answer null
                self.send({"id": message["id"], "result": None})

    def wait_for(self, predicate, timeout: float = 10.0) -> dict[str, Any]:
        """The first message from the server (seen or still to come) that `predicate` accepts."""
        end = time.monotonic() + timeout
        checked = 0
        while True:
            for message in self.seen[checked:]:
                if predicate(message):
                    return message
            checked = len(self.seen)
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError("no such message from the server")
            try:
                self._keep(self.messages.get(timeout=min(left, 0.1)))
            except queue.Empty:
                pass

    def close(self) -> int | None:
        try:
            self.request("shutdown", None, timeout=5)
            self.notify("exit", None)
            return self.proc.wait(timeout=10)
        except (TimeoutError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            return None
