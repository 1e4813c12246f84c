"""Run one verifier task in a fresh worker process (torch-free on the caller's side).

Every call gets its own `WorkerClient`, so the reference and the candidate (and the candidate's
two phases) never share a process, a CUDA context or an allocator.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

REFERENCE_TASK = "kernelstitch.agents.verifier.reference_task:reference_task"
CANDIDATE_TASK = "kernelstitch.agents.verifier.candidate_task:candidate_task"


@dataclass(frozen=True)
class TaskOutcome:
    result: dict[str, Any] | None
    error_kind: str | None = None  # WorkerError kinds: exception/timeout/crash/cuda_fatal/...
    error_message: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.result is not None

    def to_json(self) -> dict[str, Any]:
        return {"result": self.result, "error_kind": self.error_kind,
                "error_message": self.error_message}


def run_task(task: str, args: dict[str, Any], timeout_s: float, device: int | None,
             cancel: threading.Event | None) -> TaskOutcome:
    from kernelstitch.core.worker.client import WorkerClient

    with WorkerClient(cuda_device=device) as client:
        response = client.call(task, args, timeout_s=max(timeout_s, 1.0), cancel=cancel)
    if response.ok:
        return TaskOutcome(response.result)
    error = response.error
    message = error.message if error else "unknown worker failure"
    if error is not None and error.stderr_tail and error.kind in ("crash", "timeout"):
        message += "\n" + error.stderr_tail[-1500:]
    return TaskOutcome(None, error.kind if error else "exception", message)
