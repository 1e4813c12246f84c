"""Run one verifier task in a fresh worker process (torch-free on the caller's side).

Every task gets its own worker, so the reference and the candidate (and the candidate's two
phases) never share a process, a CUDA context or an allocator.  A `StartedWorker` is spawned
ahead of its task and imports the task's module (torch included, no user code) in the
background: on an H100 machine that start-up was ~5-10 s of each verification stage.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from typing import Any

REFERENCE_TASK = "kernelstitch.agents.verifier.reference_task:reference_task"
CANDIDATE_TASK = "kernelstitch.agents.verifier.candidate_task:candidate_task"
JUDGE_LEDGER_TASK = "kernelstitch.agents.verifier.reference_task:judge_ledger"


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
    """A worker process for one later task, started now; its import runs in a thread.

    `client_options`: more WorkerClient keywords (a candidate worker's sandbox: write guard,
    private temp folder; protect.py).  Every verifier worker gets an environment without
    credentials: none needs one, and a process's environment is readable through /proc."""

    def __init__(self, task: str, device: int | None, **client_options: Any) -> None:
        from kernelstitch.core.worker.client import WorkerClient

        self.task = task
        client_options.setdefault("scrub_env", True)
        self.client = WorkerClient(cuda_device=device, **client_options)
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


class _Exits:
    """Workers told to exit whose exit is not waited for by the stage that used them: a
    worker's interpreter and CUDA teardown (up to the 2 s shutdown grace) then overlaps the
    next stage instead of adding to it.  `wait` joins them (the end of a verification)."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def close_soon(self, close) -> None:
        thread = threading.Thread(target=close, name="verifier-worker-exit", daemon=True)
        thread.start()
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def wait(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout=timeout_s)


EXITS = _Exits()


class SpareWorkers:
    """Started workers kept for a later verification in this process (opt-in: the bench's
    sequential measure loop), one per (task, device).  A spare is an idle process that has
    imported torch: no CUDA context, no user code, nothing on the GPU."""

    def __init__(self) -> None:
        self._spares: dict[tuple[str, int | None], StartedWorker] = {}
        self._lock = threading.Lock()

    def take(self, task: str, device: int | None) -> StartedWorker | None:
        with self._lock:
            return self._spares.pop((task, device), None)

    def start(self, task: str, device: int | None) -> None:
        with self._lock:
            if (task, device) not in self._spares:
                self._spares[(task, device)] = StartedWorker(task, device)

    def close_all(self) -> None:
        with self._lock:
            spares, self._spares = list(self._spares.values()), {}
        for worker in spares:
            worker.close()


SPARES = SpareWorkers()
atexit.register(SPARES.close_all)


def run_task(task: str, args: dict[str, Any], timeout_s: float, device: int | None,
             cancel: threading.Event | None, started: StartedWorker | None = None,
             keep_open: bool = False) -> TaskOutcome:
    """`keep_open`: the worker outlives its task (the reference worker goes on judging); the
    caller closes `started` itself."""
    from kernelstitch.core.worker.client import WorkerClient

    if keep_open and started is None:
        raise ValueError("keep_open needs a started worker for the caller to close")
    client = started.client if started is not None else WorkerClient(cuda_device=device)
    try:
        response = client.call(task, args, timeout_s=max(timeout_s, 1.0), cancel=cancel)
    finally:
        if not keep_open:
            EXITS.close_soon(started.close if started is not None else client.close)
    if response.ok:
        return TaskOutcome(response.result)
    error = response.error
    message = error.message if error else "unknown worker failure"
    if error is not None and error.stderr_tail and error.kind in ("crash", "timeout"):
        message += "\n" + error.stderr_tail[-1500:]
    return TaskOutcome(None, error.kind if error else "exception", message)
