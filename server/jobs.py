"""Pipeline runs as child processes: a FIFO queue (one GPU, one job at a time), one job per
module, cancellation by SIGTERM.

Nothing here blocks the event loop: the job's pipes are read with asyncio, so the language
server keeps answering hovers and code actions while a job compiles for minutes.  The manager
knows nothing about LSP; it reports every change to a listener.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import json
import logging
import os
import shlex
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from kernelstitch.agents.job_protocol import (
    JobRequest,
    JobResult,
    ProgressEvent,
    decode_event,
)

log = logging.getLogger(__name__)

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
FINAL_STATES = ("done", "failed", "cancelled")
# Jobs are started with `python -m kernelstitch.agents.job`; tests (and debugging) point this
# variable at another program speaking the same protocol.
JOB_COMMAND_ENV = "KERNELSTITCH_JOB_COMMAND"
_STDERR_TAIL_LINES = 40
_MAX_EVENT_LINE = 32 * 1024 * 1024  # a result carries plan + findings: far above asyncio's 64 KiB


@dataclass(frozen=True)
class JobSpec:
    kind: Literal["generate", "verify", "profile"]
    uri: str  # the document the user acted on (source or generated file)
    source_path: str
    module: str
    workspace: str
    candidate_path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    fingerprint: str | None = None  # module text when submitted: results go stale with it
    time_limit_s: float | None = None  # hard stop on top of the pipeline's own budget
    trigger: str = "user"  # "user" (a command) or "save" (watch-on-save): how loudly to report

    def request(self) -> JobRequest:
        return JobRequest(kind=self.kind, source_path=self.source_path, module=self.module,
                          workspace=self.workspace, candidate_path=self.candidate_path,
                          config=self.config)


@dataclass(eq=False)
class Job:
    id: str
    spec: JobSpec
    state: JobState = "queued"
    stage: str = "queued"
    message: str = "queued"
    step: int | None = None
    total: int | None = None
    result: JobResult | None = None
    pid: int | None = None
    cancel_requested: bool = False
    stderr_tail: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=_STDERR_TAIL_LINES))
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def module_key(self) -> tuple[str, str]:
        return (self.spec.source_path, self.spec.module)

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES


class JobListener(Protocol):
    def job_changed(self, job: Job) -> None:
        """State, stage or message changed (queued, started, progress)."""

    def job_finished(self, job: Job) -> None:
        """The job reached done, failed or cancelled; `job.result` holds the result if any."""


class AlreadyActive(Exception):
    def __init__(self, job: Job) -> None:
        super().__init__(f"{job.spec.module} already has a {job.spec.kind} job ({job.state})")
        self.job = job


def default_job_command() -> list[str]:
    override = os.environ.get(JOB_COMMAND_ENV)
    if override:
        return shlex.split(override)
    return [sys.executable, "-m", "kernelstitch.agents.job"]


class JobManager:
    def __init__(
        self,
        listener: JobListener,
        command: list[str] | None = None,
        max_running: int = 1,
        kill_after_s: float = 5.0,
    ) -> None:
        self.listener = listener
        self.command = command or default_job_command()
        self.max_running = max_running
        self.kill_after_s = kill_after_s
        self._ids = itertools.count(1)
        self._jobs: dict[str, Job] = {}
        self._queue: collections.deque[Job] = collections.deque()
        self._running: dict[str, asyncio.Task] = {}
        self._processes: dict[str, asyncio.subprocess.Process] = {}

    # -- queries -------------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def active_for(self, source_path: str, module: str) -> Job | None:
        return next((j for j in self._jobs.values()
                     if not j.is_final and j.module_key == (source_path, module)), None)

    def active(self) -> list[Job]:
        return [j for j in self._jobs.values() if not j.is_final]

    def queue_position(self, job: Job) -> int | None:
        """0-based position among queued jobs; None when not queued."""
        try:
            return list(self._queue).index(job)
        except ValueError:
            return None

    # -- commands ------------------------------------------------------------------------------
    def submit(self, spec: JobSpec) -> Job:
        """Queue a job; raises AlreadyActive when the module already has one queued or running."""
        existing = self.active_for(spec.source_path, spec.module)
        if existing is not None:
            raise AlreadyActive(existing)
        job = Job(id=f"job-{next(self._ids)}", spec=spec)
        self._jobs[job.id] = job
        self._queue.append(job)
        ahead = len(self._running) + len(self._queue) - 1
        job.message = f"queued behind {ahead} job(s)" if ahead else "queued"
        self.listener.job_changed(job)
        self._pump()
        return job

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job; False when it is unknown or already over."""
        job = self._jobs.get(job_id)
        if job is None or job.is_final:
            return False
        job.cancel_requested = True
        if job in self._queue:
            self._queue.remove(job)
            self._finish(job, "cancelled", "cancelled before it started")
            return True
        process = self._processes.get(job.id)
        if process is not None and process.returncode is None:
            _signal(process, signal.SIGTERM)
            asyncio.get_running_loop().call_later(self.kill_after_s, self._kill, job.id)
        job.message = "cancelling"
        self.listener.job_changed(job)
        return True

    async def shutdown(self) -> None:
        """Cancel everything and wait (bounded) for the processes to go."""
        for job in list(self._jobs.values()):
            self.cancel(job.id)
        tasks = list(self._running.values())
        if tasks:
            await asyncio.wait(tasks, timeout=self.kill_after_s + 1.0)
        for job_id in list(self._processes):
            self._kill(job_id)

    def kill_all_now(self) -> None:
        """Synchronous last resort when the server exits without `shutdown` (the client's stdin
        closed, SIGTERM): kill every job's process group, workers included."""
        for process in list(self._processes.values()):
            _kill_group(process)

    # -- running -------------------------------------------------------------------------------
    def _pump(self) -> None:
        while self._queue and len(self._running) < self.max_running:
            job = self._queue.popleft()
            self._running[job.id] = asyncio.ensure_future(self._run(job))
        for position, job in enumerate(self._queue):
            message = f"queued behind {len(self._running) + position} job(s)"
            if job.message != message:
                job.message = message
                self.listener.job_changed(job)

    async def _run(self, job: Job) -> None:
        try:
            await self._run_process(job)
        except Exception as exc:  # the manager must survive anything a job does
            log.exception("job %s crashed the runner", job.id)
            if not job.is_final:
                self._finish(job, "failed", f"could not run the job: {exc}")
        finally:
            self._running.pop(job.id, None)
            process = self._processes.pop(job.id, None)
            if process is not None and process.returncode is None:
                # The runner was cancelled with its process still running: the event loop is
                # closing (the client's stdin closed without shutdown), so the job goes too.
                _kill_group(process)
            self._pump()

    async def _run_process(self, job: Job) -> None:
        job.state, job.stage, job.message = "running", "loading", "starting"
        self.listener.job_changed(job)
        process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=job.spec.workspace if os.path.isdir(job.spec.workspace) else None,
            start_new_session=True,  # its own process group: a hung job's workers die with it
            limit=_MAX_EVENT_LINE,
        )
        job.pid = process.pid
        self._processes[job.id] = process
        if job.cancel_requested:  # cancelled while the process was starting
            _signal(process, signal.SIGTERM)
        timer = None
        if job.spec.time_limit_s:
            timer = asyncio.get_running_loop().call_later(
                job.spec.time_limit_s, self._time_out, job.id)
        try:
            assert process.stdin is not None
            process.stdin.write((job.spec.request().to_json() + "\n").encode())
            try:
                await process.stdin.drain()
                process.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # it died at once; its exit status tells the story
            stderr_task = asyncio.ensure_future(self._drain_stderr(job, process))
            await self._read_events(job, process)
            await process.wait()
            await asyncio.wait([stderr_task], timeout=2.0)
        finally:
            if timer is not None:
                timer.cancel()
        if job.cancel_requested:
            _kill_group(process)  # workers the job could not clean up
        self._finish_from_result(job, process.returncode)

    async def _read_events(self, job: Job, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            try:
                raw = await process.stdout.readline()
            except ValueError:  # a line above the limit: skip it, keep reading
                log.warning("job %s: oversized stdout line dropped", job.id)
                continue
            if not raw:
                return
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            event = _decode(line)
            if isinstance(event, ProgressEvent):
                job.stage, job.message = event.stage, event.message
                job.step, job.total = event.step, event.total
                if not job.cancel_requested:
                    self.listener.job_changed(job)
            elif isinstance(event, JobResult):
                job.result = event
            else:
                log.info("job %s stdout: %s", job.id, line[:500])

    async def _drain_stderr(self, job: Job, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while True:
            raw = await process.stderr.readline()
            if not raw:
                return
            text = raw.decode("utf-8", "replace").rstrip()
            job.stderr_tail.append(text)
            log.debug("job %s: %s", job.id, text)

    def _finish_from_result(self, job: Job, returncode: int | None) -> None:
        result = job.result
        if result is not None:
            state: JobState = {"succeeded": "done", "cancelled": "cancelled"}.get(
                result.status, "failed")  # type: ignore[assignment]
            if job.cancel_requested and state == "failed":
                state = "cancelled"
            self._finish(job, state, result.message)
        elif job.cancel_requested:
            self._finish(job, "cancelled", job.message if job.message != "cancelling"
                         else "cancelled")
        else:
            tail = "; ".join(list(job.stderr_tail)[-3:])
            self._finish(job, "failed",
                         f"job exited with status {returncode} without a result"
                         + (f": {tail}" if tail else ""))

    def _finish(self, job: Job, state: JobState, message: str) -> None:
        job.state, job.message = state, message
        job.stage = state
        job.finished.set()
        self.listener.job_finished(job)

    def _time_out(self, job_id: str) -> None:
        job = self._jobs.get(job_id)
        if job is not None and not job.is_final:
            log.warning("job %s exceeded its time limit", job_id)
            self.cancel(job_id)
            job.message = "stopped: exceeded the time budget"

    def _kill(self, job_id: str) -> None:
        process = self._processes.get(job_id)
        if process is not None and process.returncode is None:
            log.warning("job %s ignored SIGTERM: killing it", job_id)
            _kill_group(process)


def _signal(process: asyncio.subprocess.Process, sig: int) -> None:
    try:
        process.send_signal(sig)
    except ProcessLookupError:
        pass


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the group we created with start_new_session
    except (ProcessLookupError, PermissionError):
        pass


def _decode(line: str) -> ProgressEvent | JobResult | None:
    """One job stdout line as an event; tolerates fields added by a newer job."""
    try:
        return decode_event(line)
    except (ValueError, TypeError):
        pass
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    cls = {"progress": ProgressEvent, "result": JobResult}.get(data.get("type"))
    if cls is None:
        return None
    known = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None
