"""Run a profiler task ("kernelstitch.profiler.tasks:NAME") in a fresh process.

Uses kernelstitch.core.worker's WorkerClient when it is there; otherwise a one-shot
`python -m kernelstitch.profiler.runner` subprocess with the same contract (JSON in, JSON out),
so user code never runs in the caller's process either way.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

RESULT_MARKER = "KS_TASK_RESULT "


class TaskError(Exception):
    pass


def run_task(task: str, args: dict[str, Any], timeout_s: float = 600.0) -> Any:
    try:
        from kernelstitch.core.worker.client import WorkerClient  # type: ignore[import-not-found]

        client = WorkerClient()
    except Exception:  # noqa: BLE001  not written yet, or another constructor: use the one-shot path
        return _run_in_subprocess(task, args, timeout_s)
    try:
        response = client.call(task, args, timeout_s)
    finally:
        close = getattr(client, "close", None)
        if callable(close):
            close()
    if not response.ok:
        raise TaskError(str(response.error))
    return response.result


def _run_in_subprocess(task: str, args: dict[str, Any], timeout_s: float) -> Any:
    cmd = [sys.executable, "-m", "kernelstitch.profiler.runner", task, json.dumps(args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise TaskError(f"{task} timed out after {timeout_s:.0f} s") from exc
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            payload = json.loads(line[len(RESULT_MARKER) :])
            if "error" in payload:
                raise TaskError(payload["error"])
            return payload["result"]
    raise TaskError(f"{task} died (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}")


def call_task(task: str, args: dict[str, Any]) -> Any:
    module_name, _, func_name = task.partition(":")
    return getattr(importlib.import_module(module_name), func_name)(**args)


def main(argv: list[str]) -> int:
    task, args = argv[0], json.loads(argv[1])
    try:
        payload = {"result": call_task(task, args)}
    except Exception as exc:  # noqa: BLE001  reported to the parent, which raises TaskError
        import traceback

        traceback.print_exc()
        payload = {"error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARKER + json.dumps(payload), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
