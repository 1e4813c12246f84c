"""Answer `initialize` before pygls is imported, from a cache of earlier answers.

Importing pygls means importing lsprotocol.types: ~0.7 s of attrs class creation on a 2-core
machine, most of the server's start-up.  The answer to `initialize` depends only on the server's
code and on the client's capabilities, so the first start saves pygls' answer under a key of
both, and later starts with the same key write the saved answer at once, then load pygls and
replay the `initialize` request into it (pygls still builds its workspace and runs our
initialize handler from it); pygls' own, identical answer is then dropped so the client sees
one.  Messages the client sends meanwhile wait in the pipe, in order.  A cache miss, a first
message that is not `initialize`, or KERNELSTITCH_NO_EARLY_INITIALIZE=1: pygls answers as usual.

Standard library only, and not its slow parts (importlib.metadata, tempfile, dataclasses cost
~0.25 s together on a loaded 2-core machine): this module runs before anything else loads.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

logger = logging.getLogger(__name__)

DISABLE_ENV = "KERNELSTITCH_NO_EARLY_INITIALIZE"
_MAX_HEADER_BYTES = 8192
_MAX_CACHED_ANSWERS = 16  # one per distinct client capabilities; older ones are removed


class EarlyStart(NamedTuple):
    """What the bootstrap did with the first message: the bytes pygls must still read (`prefix`),
    and the id it answered (None: pygls answers), with where pygls' answer is to be saved."""

    prefix: bytes
    answered_id: Any = None
    cache_file: Path | None = None
    initialize_id: Any = None


CACHE_ENV = "KERNELSTITCH_CACHE_DIR"


def cache_dir() -> Path:
    """$KERNELSTITCH_CACHE_DIR/initialize, else $XDG_CACHE_HOME (~/.cache)/kernelstitch/initialize."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "initialize"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelstitch" / "initialize"


def _read_message(stream: BinaryIO) -> tuple[bytes, dict[str, Any] | None]:
    """One framed message: (its raw bytes, its JSON body or None when it is not one)."""
    raw = bytearray()
    length = None
    while True:
        line = stream.readline(_MAX_HEADER_BYTES)
        raw += line
        if not line or len(raw) > _MAX_HEADER_BYTES:
            return bytes(raw), None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return bytes(raw), None
    if length is None or length < 0:
        return bytes(raw), None
    body = stream.read(length)
    raw += body
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return bytes(raw), None
    return bytes(raw), message if isinstance(message, dict) else None


def _installed_versions() -> list[str]:
    """The dist-info folder names of the protocol libraries (name and version), from sys.path."""
    names = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as listing:
                names += [e.name for e in listing if e.name.endswith(".dist-info")
                          and e.name.lower().startswith(("pygls-", "lsprotocol-", "kernelstitch-"))]
        except OSError:
            continue
    return sorted(set(names))


def _server_fingerprint() -> str:
    """The server's code and the protocol libraries' versions: what the answer is built from."""
    digest = hashlib.sha256(";".join(_installed_versions()).encode())
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def answer_key(capabilities: Any) -> str:
    payload = json.dumps(capabilities, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{_server_fingerprint()}\n{payload}".encode()).hexdigest()[:32]


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def start(stdin: BinaryIO, stdout: BinaryIO) -> EarlyStart:
    """Read the first message; answer it from the cache when it is an `initialize` seen before."""
    raw, message = _read_message(stdin)
    if os.environ.get(DISABLE_ENV) == "1" or message is None or message.get("method") != "initialize" \
            or "id" not in message or not isinstance(message.get("params"), dict):
        return EarlyStart(prefix=raw)
    capabilities = message["params"].get("capabilities")
    if not isinstance(capabilities, dict):
        return EarlyStart(prefix=raw)
    try:
        cache_file = cache_dir() / f"{answer_key(capabilities)}.json"
    except (OSError, RuntimeError, TypeError, ValueError):  # no home directory, odd capabilities
        return EarlyStart(prefix=raw)
    try:
        result = json.loads(cache_file.read_text())["result"]
    except (OSError, ValueError, KeyError, TypeError):
        return EarlyStart(prefix=raw, cache_file=cache_file, initialize_id=message["id"])
    stdout.write(_frame({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    stdout.flush()
    return EarlyStart(prefix=raw, answered_id=message["id"], initialize_id=message["id"])


def _save(cache_file: Path, result: Any) -> None:
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f"{cache_file.stem}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"result": result}))
        os.replace(tmp, cache_file)  # atomic: a concurrent start reads the old file or the new one
        answers = sorted(cache_file.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in answers[_MAX_CACHED_ANSWERS:]:
            old.unlink(missing_ok=True)
    except OSError as err:  # a read-only home: every start is a cache miss, nothing worse
        logger.info("initialize answer not cached: %s", err)


class ReplayReader:
    """stdin for pygls: the bytes the bootstrap consumed, then the real stream."""

    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        self._prefix = io.BytesIO(prefix)
        self._stream = stream

    def readline(self, size: int = -1) -> bytes:
        line = self._prefix.readline(size)
        if line.endswith(b"\n") or (size >= 0 and len(line) >= size):
            return line
        rest = self._stream.readline(-1 if size < 0 else size - len(line))
        return line + rest

    def read(self, size: int = -1) -> bytes:
        data = self._prefix.read(size)
        if size < 0:
            return data + self._stream.read()
        if len(data) < size:
            data += self._stream.read(size - len(data))
        return data


class AnswerFilter:
    """stdout for pygls: drops its answer to an `initialize` the bootstrap already answered, and
    saves the answer it gave when the bootstrap did not.  pygls writes one message per call."""

    def __init__(self, stream: BinaryIO, early: EarlyStart) -> None:
        self._stream = stream
        self._early = early
        self._pending = early.initialize_id is not None
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        if self._pending:
            reply = _initialize_reply(data, self._early.initialize_id)
            if reply is not None:
                self._pending = False
                if self._early.answered_id is not None:
                    if "result" in reply:
                        return  # the same answer the client already has
                    logger.error("initialize failed after it was answered from the cache: %s", reply.get("error"))
                    return
                if "result" in reply and self._early.cache_file is not None:
                    _save(self._early.cache_file, reply["result"])
        with self._lock:
            self._stream.write(data)
            self._stream.flush()

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()


def _initialize_reply(data: bytes, initialize_id: Any) -> dict[str, Any] | None:
    _, sep, body = data.partition(b"\r\n\r\n")
    try:
        message = json.loads(body if sep else data)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(message, dict) and "method" not in message and message.get("id") == initialize_id:
        return message
    return None

