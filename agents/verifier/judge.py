"""The judge: the reference worker compares the candidate's outputs on the GPU, through CUDA IPC.

The reference worker, after its own task, keeps its process (and the reference model) alive and
listens on a Unix socket in the verification's work dir.  For each check, the candidate worker
sends the case it ran, a digest of the inputs it generated, and a CUDA IPC handle of every
output leaf (no copy: the judge maps the candidate's allocation).  The judge regenerates the
case's inputs on the GPU, runs the reference, and compares both on the device in slices
(`compare.py`), then replies with the failures.  So no output crosses to the CPU, no reference
output ever exists in the candidate's process, and nothing of it is written to disk.

Messages are JSON over `multiprocessing.connection` with an auth key (never pickle: the sender
is untrusted code's process, and unpickling is code execution).  A handle the judge cannot map
is the candidate's failure (`unreadable_output`), not a crash of the judge.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

import torch
from kernelstitch.agents.verifier.compare import HostLeaf

MAX_MESSAGE_BYTES = 1 << 20
SOCKET_NAME = "judge.sock"


@dataclass(frozen=True)
class JudgeAddress:
    path: str
    authkey: str  # hex

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "authkey": self.authkey}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> JudgeAddress:
        return cls(str(data["path"]), str(data["authkey"]))


# --------------------------------------------------------------------------------------------
# Output leaves as JSON: IPC handles for CUDA tensors, plain values otherwise


def encode_leaf(leaf: Any) -> dict[str, Any]:
    if isinstance(leaf, torch.Tensor):
        if not leaf.is_cuda:
            return {"kind": "host_tensor", "device": str(leaf.device),
                    "shape": list(leaf.shape), "dtype": str(leaf.dtype)}
        if leaf.numel() == 0:
            return {"kind": "empty", "shape": list(leaf.shape), "dtype": str(leaf.dtype),
                    "device": str(leaf.device)}
        (device, handle, size_bytes, offset_bytes, counter_handle, counter_offset,
         event_handle, event_sync) = leaf.untyped_storage()._share_cuda_()
        return {"kind": "cuda", "device": int(device), "handle": handle.hex(),
                "storage_bytes": int(size_bytes), "storage_offset_bytes": int(offset_bytes),
                "counter_handle": counter_handle.hex(), "counter_offset": int(counter_offset),
                "event_handle": event_handle.hex() if event_handle else None,
                "event_sync": bool(event_sync), "dtype": str(leaf.dtype),
                "shape": list(leaf.shape), "stride": list(leaf.stride()),
                "offset": int(leaf.storage_offset())}
    try:
        json.dumps(leaf)
        return {"kind": "value", "value": leaf}
    except (TypeError, ValueError):
        return {"kind": "value", "value": repr(leaf)[:1000]}


_DTYPES = {str(d): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
    torch.complex128, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
    torch.float8_e4m3fn, torch.float8_e5m2)}


class UnreadableLeaf(Exception):
    """A leaf description the judge cannot (or will not) turn into a tensor."""


def _ints(values: Any, what: str) -> list[int]:
    if not isinstance(values, list) or not all(isinstance(v, int) for v in values):
        raise UnreadableLeaf(f"bad {what}")
    return values


def decode_leaf(data: dict[str, Any], device: torch.device) -> Any:
    """The judge's view of one candidate leaf: a tensor mapped from its IPC handle, a
    stand-in whose device/shape/dtype say what it was, or the plain value."""
    kind = data.get("kind")
    if kind == "value":
        return data.get("value")
    dtype = _DTYPES.get(str(data.get("dtype")))
    if dtype is None:
        raise UnreadableLeaf(f"unsupported dtype {data.get('dtype')!r}")
    shape = _ints(data.get("shape"), "shape")
    if kind in ("host_tensor", "empty"):
        return HostLeaf(str(data.get("device")), shape, dtype)
    if kind != "cuda" or data.get("device") != device.index:
        raise UnreadableLeaf("the output is not on the checked GPU")
    stride = _ints(data.get("stride"), "stride")
    try:
        storage = torch.UntypedStorage._new_shared_cuda(
            data["device"], bytes.fromhex(data["handle"]), int(data["storage_bytes"]),
            int(data["storage_offset_bytes"]), bytes.fromhex(data["counter_handle"]),
            int(data["counter_offset"]),
            bytes.fromhex(data["event_handle"]) if data.get("event_handle") else None,
            bool(data["event_sync"]))
        tensor = torch.empty(0, dtype=dtype, device=device)
        tensor.set_(storage, int(data["offset"]), shape, stride)
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise UnreadableLeaf(f"its CUDA IPC handle could not be opened: {exc}") from exc
    return tensor


# --------------------------------------------------------------------------------------------
# Wire format


def send(conn: Connection, message: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(message).encode())


def receive(conn: Connection) -> dict[str, Any]:
    data = conn.recv_bytes(MAX_MESSAGE_BYTES)
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a judge message is a JSON object")
    return message


# --------------------------------------------------------------------------------------------
# Server side (the reference worker)


class JudgeServer:
    """Serves `handle(request) -> reply` to one connection at a time, in a daemon thread of
    the reference worker (its main thread keeps serving the worker protocol)."""

    def __init__(self, work_dir: str, handle) -> None:
        self._handle = handle
        authkey = secrets.token_bytes(32)
        path = str(Path(work_dir) / SOCKET_NAME)
        if os.path.exists(path):
            os.unlink(path)
        self._listener = Listener(path, family="AF_UNIX", authkey=authkey)
        os.chmod(path, 0o600)
        self.address = JudgeAddress(path, authkey.hex())
        self._lock = threading.Lock()  # one comparison at a time: they share GPU memory
        threading.Thread(target=self._serve, name="ks-judge", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn = self._listener.accept()
            except Exception:  # noqa: BLE001 - a failed handshake is the client's problem
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), name="ks-judge-conn",
                             daemon=True).start()

    def _serve_connection(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    request = receive(conn)
                except (EOFError, OSError):
                    return
                except Exception as exc:  # noqa: BLE001 - malformed: say so and stop
                    send(conn, {"error": f"malformed request: {exc}"[:500]})
                    return
                with self._lock:
                    try:
                        reply = self._handle(request)
                    except Exception as exc:  # noqa: BLE001 - reported to the checker
                        reply = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
                send(conn, reply)


# --------------------------------------------------------------------------------------------
# Client side (the candidate worker)


class JudgeClient:
    def __init__(self, address: JudgeAddress) -> None:
        self._conn = Client(address.path, family="AF_UNIX",
                            authkey=bytes.fromhex(address.authkey))

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        send(self._conn, request)
        return receive(self._conn)

    def close(self) -> None:
        self._conn.close()
