"""A job process: `python -m kernelstitch.agents.job` runs one pipeline request.

It reads one JobRequest JSON line on stdin and writes job_protocol events on stdout, one per
line, ending with exactly one JobResult.  SIGTERM cancels: the pipeline stops at the next stage
boundary and its workers are killed.  Anything else printed (by libraries, compilers) is sent
to stderr so it can never corrupt the event stream.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import TextIO

from kernelstitch.agents.job_protocol import JobEvent, JobRequest, JobResult, encode_event


def _protocol_stream() -> TextIO:
    """Keep the real stdout for events; point fd 1 (print, C printf) at stderr."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "w", buffering=1, encoding="utf-8")


def run_request(request: JobRequest, emit, cancel: threading.Event) -> JobResult:
    from kernelstitch.agents.pipeline import PipelineConfig, run_generate, run_verify

    from kernelstitch.core.workspace import Workspace

    workspace = Workspace(Path(request.workspace))
    config = PipelineConfig.from_dict(request.config)
    source = Path(request.source_path)
    if request.kind == "generate":
        return run_generate(source, request.module, workspace, config, emit, cancel)
    if request.kind == "verify":
        return run_verify(source, request.module, request.candidate_path, workspace, config,
                          emit, cancel)
    if request.kind == "profile":
        from kernelstitch.agents.pipeline import run_profile

        return run_profile(source, request.module, workspace, config, emit, cancel)
    return JobResult(status="failed", message=f"unknown job kind {request.kind!r}",
                     kind=request.kind, source_path=request.source_path, module=request.module)


def main() -> int:
    out = _protocol_stream()
    lock = threading.Lock()

    def emit(event: JobEvent) -> None:
        with lock:
            out.write(encode_event(event) + "\n")
            out.flush()

    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    line = sys.stdin.readline()
    try:
        request = JobRequest.from_json(line)
    except (ValueError, TypeError) as exc:
        emit(JobResult(status="failed", message=f"bad job request: {exc}", kind="generate",
                       source_path="", module=None))
        return 2
    try:
        result = run_request(request, emit, cancel)
    except Exception as exc:  # the job must always end with a result line
        import traceback

        traceback.print_exc()
        result = JobResult(status="failed", message=f"{type(exc).__name__}: {exc}",
                           kind=request.kind, source_path=request.source_path,
                           module=request.module)
    emit(result)
    return 0 if result.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
