"""Run one verifier task in a fresh worker process (torch-free on the caller's side).

Every task gets its own worker, so the reference and the candidate (and the candidate's two
phases) never share a process, a CUDA context or an allocator.  A `StartedWorker` is spawned
ahead of its task and imports the task's module (torch included, no user code) in the
background: on an H100 machine that start-up was ~5-10 s of each verification stage.
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


PRELOAD_TASK = "preload"
PRELOAD_TIMEOUT_S = 120.0


class StartedWorker:
    """A worker process for one later task, started now; its import runs in a thread."""

    def __init__(self, task: str, device: int | None) -> None:
        from kernelstitch.core.worker.client import WorkerClient

        self.task = task
        self.client = WorkerClient(cuda_device=device)
        self._thread = threading.Thread(target=self._preload, name="verifier-preload",
                                        daemon=True)
        self._thread.start()

    def _preload(self) -> None:
        # A failure here is not reported: the real call then starts a fresh worker and fails
        # (or not) on its own terms.
        try:
            self.client.call(PRELOAD_TASK, {"module": self.task.split(":")[0]},
                             timeout_s=PRELOAD_TIMEOUT_S)
        except RuntimeError:  # closed before the thread got to it
            pass

    def close(self) -> None:
        self.client.close()
        self._thread.join(timeout=5)


def run_task(task: str, args: dict[str, Any], timeout_s: float, device: int | None,
             cancel: threading.Event | None, started: StartedWorker | None = None) -> TaskOutcome:
    from kernelstitch.core.worker.client import WorkerClient

    if started is not None:
        try:
            response = started.client.call(task, args, timeout_s=max(timeout_s, 1.0),
                                           cancel=cancel)
        finally:
            started.close()
    else:
        with WorkerClient(cuda_device=device) as client:
            response = client.call(task, args, timeout_s=max(timeout_s, 1.0), cancel=cancel)
    if response.ok:
        return TaskOutcome(response.result)
    error = response.error
    message = error.message if error else "unknown worker failure"
    if error is not None and error.stderr_tail and error.kind in ("crash", "timeout"):
        message += "\n" + error.stderr_tail[-1500:]
    return TaskOutcome(None, error.kind if error else "exception", message)
