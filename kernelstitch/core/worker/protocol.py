"""The wire format between a WorkerClient and its worker process.

One JSON object per line in each direction: the client writes `Request`s on the worker's stdin,
the worker writes `Response`s on its protocol channel (a dup of the original stdout; fd 1 itself
is pointed at stderr so nothing printed by user code can corrupt the stream).  The first line a
worker writes is a `Response` with id `HELLO_ID` announcing that it is ready.

Stdlib only: the language server may import this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

ErrorKind = Literal[
    "exception",  # the task raised; the worker keeps serving
    "timeout",  # no answer within timeout_s; the worker was killed
    "crash",  # the worker died (signal, os._exit, abort)
    "cuda_fatal",  # a sticky CUDA error poisoned the context; the worker exited
    "oom",  # torch.OutOfMemoryError or MemoryError; the worker keeps serving
    "protocol",  # the worker wrote something that is not a valid response
    "startup",  # the worker never became ready
    "cancelled",  # the caller cancelled while waiting; the worker was killed
]
ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)

HELLO_ID = 0  # id of the readiness line; request ids start at 1
BUILTIN_TASKS_MODULE = "kernelstitch.core.worker.builtin_tasks"


class ProtocolError(ValueError):
    """A line that is not a valid message."""


def _object(text: str | bytes) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"expected a JSON object, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class WorkerError:
    kind: ErrorKind
    message: str
    traceback: str = ""
    exit_code: int | None = None
    signal_name: str | None = None
    stderr_tail: str = ""

    def __str__(self) -> str:
        text = f"{self.kind}: {self.message}"
        if self.stderr_tail and self.kind in ("crash", "startup", "timeout", "protocol"):
            text += f"\n--- worker stderr (tail) ---\n{self.stderr_tail}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "traceback": self.traceback,
            "exit_code": self.exit_code,
            "signal_name": self.signal_name,
            "stderr_tail": self.stderr_tail,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerError:
        kind = data.get("kind")
        if kind not in ERROR_KINDS:
            raise ProtocolError(f"unknown error kind {kind!r}")
        return cls(
            kind=kind,
            message=str(data.get("message", "")),
            traceback=str(data.get("traceback") or ""),
            exit_code=data.get("exit_code"),
            signal_name=data.get("signal_name"),
            stderr_tail=str(data.get("stderr_tail") or ""),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes) -> WorkerError:
        return cls.from_dict(_object(text))


@dataclass(frozen=True)
class Request:
    id: int
    task: str  # "package.module:function", or a bare built-in task name such as "ping"
    args: dict[str, Any]
    timeout_s: float

    def to_json(self) -> str:
        """One line (json.dumps never emits a raw newline)."""
        return json.dumps(
            {"id": self.id, "task": self.task, "args": self.args, "timeout_s": self.timeout_s}
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Request:
        data = _object(text)
        req_id, task, args = data.get("id"), data.get("task"), data.get("args", {})
        timeout_s = data.get("timeout_s", 60.0)
        if not isinstance(req_id, int) or isinstance(req_id, bool):
            raise ProtocolError("request id must be an integer")
        if not isinstance(task, str) or not task:
            raise ProtocolError("request task must be a non-empty string")
        if not isinstance(args, dict):
            raise ProtocolError("request args must be a JSON object")
        if not isinstance(timeout_s, (int, float)):
            raise ProtocolError("request timeout_s must be a number")
        return cls(id=req_id, task=task, args=args, timeout_s=float(timeout_s))


@dataclass(frozen=True)
class Response:
    id: int
    ok: bool
    result: Any = None
    error: WorkerError | None = None
    duration_s: float = 0.0

    def to_json(self) -> str:
        """One line; raises TypeError/ValueError when `result` is not JSON-serialisable."""
        return json.dumps(
            {
                "id": self.id,
                "ok": self.ok,
                "result": self.result,
                "error": self.error.to_dict() if self.error else None,
                "duration_s": self.duration_s,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Response:
        data = _object(text)
        req_id, ok = data.get("id"), data.get("ok")
        if not isinstance(req_id, int) or isinstance(req_id, bool):
            raise ProtocolError("response id must be an integer")
        if not isinstance(ok, bool):
            raise ProtocolError("response ok must be a boolean")
        error = data.get("error")
        if error is not None and not isinstance(error, dict):
            raise ProtocolError("response error must be an object or null")
        if not ok and error is None:
            raise ProtocolError("a failed response must carry an error")
        duration = data.get("duration_s", 0.0)
        return cls(
            id=req_id,
            ok=ok,
            result=data.get("result"),
            error=WorkerError.from_dict(error) if error is not None else None,
            duration_s=float(duration) if isinstance(duration, (int, float)) else 0.0,
        )

    @classmethod
    def failure(
        cls, req_id: int, kind: ErrorKind, message: str, duration_s: float = 0.0, **details: Any
    ) -> Response:
        return cls(
            id=req_id,
            ok=False,
            error=WorkerError(kind=kind, message=message, **details),
            duration_s=duration_s,
        )


def split_task(task: str) -> tuple[str, str]:
    """`"pkg.mod:fn"` -> ("pkg.mod", "fn"); a bare name is a built-in task."""
    if ":" not in task:
        return BUILTIN_TASKS_MODULE, task
    module, _, function = task.partition(":")
    if not module or not function or ":" in function:
        raise ValueError(f"task {task!r} is not of the form 'package.module:function'")
    return module, function


def module_allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    """Whether `module` lies in one of the packages named by `prefixes`.

    A prefix names a package: "kernelstitch." (or "kernelstitch") allows `kernelstitch` and
    everything below it, never a sibling such as `kernelstitch_evil`.
    """
    for prefix in prefixes:
        package = prefix.rstrip(".")
        if package and (module == package or module.startswith(package + ".")):
            return True
    return False
