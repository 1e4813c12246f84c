"""A job's LSP work-done progress: server-initiated token, begin/report/end, cancellable.

The token must be acknowledged by the client (window/workDoneProgress/create) before it is used,
so updates that arrive first are held back and only the latest one is sent once it is.
"""

from __future__ import annotations

import asyncio
import logging

from kernelstitch.server.jobs import Job
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, PyglsError

log = logging.getLogger(__name__)

# Rough share of a generate job's time by stage, for the percentage shown in the editor.
_STAGE_PERCENT = {"queued": 0, "loading": 5, "planning": 10, "coding": 20, "compiling": 70,
                  "verifying": 80, "profiling": 88, "reporting": 95}


def stage_text(job: Job) -> str:
    if job.stage == "coding" and job.step and job.total:
        return f"coding step {job.step}/{job.total}: {job.message}"
    if job.stage in ("queued", "loading") or job.message.startswith(job.stage):
        return job.message
    return f"{job.stage}: {job.message}"


def stage_percent(job: Job) -> int:
    base = _STAGE_PERCENT.get(job.stage, 0)
    if job.stage == "coding" and job.step and job.total:
        return base + int(50 * min(job.step, job.total) / job.total)
    return base


class JobProgress:
    """Progress of one job; `send` is the server's work_done_progress (pygls Progress)."""

    def __init__(self, progress, token: str, title: str) -> None:
        self._progress = progress
        self.token = token
        self.title = title
        self._ready = False
        self._ended = False
        self._latest: Job | None = None

    async def create(self) -> bool:
        """Ask the client for the token; False when it refuses (no progress UI then)."""
        try:
            await self._progress.create_async(self.token)
        except (JsonRpcException, PyglsError) as exc:  # the client answered with an error
            log.info("no work-done progress for %s: %s", self.token, exc)
            self._ended = True
            return False
        self._ready = True
        first = self._latest
        self._progress.begin(self.token, lsp.WorkDoneProgressBegin(
            title=self.title, cancellable=True,
            message=stage_text(first) if first else "queued",
            percentage=stage_percent(first) if first else 0))
        if first is not None and first.is_final:
            self.end(first)
        return True

    def update(self, job: Job) -> None:
        self._latest = job
        if self._ready and not self._ended:
            self._progress.report(self.token, lsp.WorkDoneProgressReport(
                message=stage_text(job), percentage=stage_percent(job), cancellable=True))

    def end(self, job: Job) -> None:
        self._latest = job
        if not self._ready or self._ended:
            return  # create() sends begin + end once the token exists
        self._ended = True
        self._progress.end(self.token, lsp.WorkDoneProgressEnd(message=f"{job.state}: "
                                                                       f"{job.message}"))
        self._progress.tokens.pop(self.token, None)


def start(progress, job: Job, title: str) -> JobProgress:
    handle = JobProgress(progress, f"kernelstitch/{job.id}", title)
    handle._latest = job
    asyncio.ensure_future(handle.create())
    return handle
