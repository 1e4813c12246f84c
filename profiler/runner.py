"""Run a profiler task ("kernelstitch.profiler.tasks:NAME") in a worker process, so the
profiled user code never runs in the caller's process."""

from __future__ import annotations

from typing import Any

from kernelstitch.core.worker.client import WorkerClient


class TaskError(Exception):
    pass


def run_task(task: str, args: dict[str, Any], timeout_s: float = 600.0) -> Any:
    with WorkerClient() as client:
        response = client.call(task, args, timeout_s)
    if not response.ok:
        raise TaskError(str(response.error))
    return response.result
