"""The real per-problem runner: the pipeline's generate / verify / profile, in worker processes.

prepare: generate without verifying (capture, plan, code), then pre-build the candidate's CUDA
    extension in a worker (bench.tasks.build_candidate) so the torch extension cache is warm
    and the GPU phase never waits for nvcc.  A build failure ends the problem as rejected
    (compile_error) with the compiler output.
measure: verify the written candidate (reference + candidate timing) on the phase's GPU, then,
    with --profile, profile the reference there for its roofline floor.  With a GPU index it
    runs inside a worker pinned to that GPU (bench.tasks.measure_problem).

Coders other than the built-in one verify while they generate (an LLM candidate only replaces
the built-in one once accepted), so for them generation itself runs in the GPU phase.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelstitch.agents.job_protocol import JobResult, ProgressEvent
from kernelstitch.bench.outcome import ProblemOutcome, memory_bound_bytes
from kernelstitch.bench.phases import HARNESS_ERROR, PhaseContext, Prepared
from kernelstitch.bench.problems import ProblemSpec
from kernelstitch.bench.settings import BenchSettings
from kernelstitch.core.workspace import Workspace

BUILD_TASK = "kernelstitch.bench.tasks:build_candidate"
PROFILE_TASK = "kernelstitch.bench.tasks:profile_reference"
MEASURE_TASK = "kernelstitch.bench.tasks:measure_problem"
LOG_PREFIX = "ks-bench-log: "  # stderr lines of the measuring worker that are progress
MIN_CALL_S = 1.0
PINNED_GRACE_S = 30.0  # the time limit cancels it; this only backs up a stuck worker

Log = Callable[[str, str], None]  # (problem name, message)


class StageClock:
    """Seconds per stage from the progress events' order: a stage lasts from its first event
    to the next stage's (the pipeline reports "planning" while capturing, then "coding"...)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._current: str | None = None
        self._since = clock()
        self.seconds: dict[str, float] = {}

    def enter(self, stage: str) -> None:
        if stage == self._current:
            return
        self._close()
        self._current = stage

    def stop(self) -> dict[str, float]:
        self._close()
        self._current = None
        return {name: round(value, 3) for name, value in self.seconds.items()}

    def _close(self) -> None:
        now = self._clock()
        if self._current is not None:
            self.seconds[self._current] = self.seconds.get(self._current, 0.0) + now - self._since
        self._since = now


class CoreShare:
    """The host's cores shared among the problems preparing at this moment (prepares run on
    threads of one bench process): a build takes cores / (problems preparing now), at least
    one.  A fixed cores / --build-jobs gave every build of a one-GPU run on a 16-core host one
    compiler process (--build-jobs 14: 16 // 14), and DenseNet121's build took 275 s there."""

    def __init__(self, cores: int | None = None) -> None:
        self._cores = max(1, cores or os.cpu_count() or 1)
        self._active = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self._active += 1

    def leave(self) -> None:
        with self._lock:
            self._active = max(0, self._active - 1)

    def jobs(self) -> int:
        with self._lock:
            return max(1, self._cores // max(1, self._active))


def _steps(result: JobResult) -> list[str]:
    return [f"{s.get('technique')}" for s in (result.plan or {}).get("steps", [])]


class PipelineRunner:
    def __init__(self, workspace: Workspace, settings: BenchSettings,
                 log: Log | None = None, cores: int | None = None) -> None:
        self.workspace = workspace
        self.settings = settings
        self._log = log or (lambda _name, _message: None)
        self.cores = CoreShare(cores)  # cores: this runner's share of the host (default all)

    def _config(self, ctx: PhaseContext, verify: bool):
        from kernelstitch.agents.pipeline import PipelineConfig

        return PipelineConfig(
            coder=self.settings.coder, verify=verify, timing=True, seeds=self.settings.seeds,
            timing_budget_s=self.settings.timing_budget_s,
            device=ctx.device, capture_timeout_s=max(ctx.time_left_s, MIN_CALL_S),
            verify_timeout_s=max(ctx.time_left_s, MIN_CALL_S),
            llm=dict(self.settings.llm), budget=dict(self.settings.budget),
            keep_spare_worker=verify,  # measure verifies one problem after another
            search=self.settings.search, precision=self.settings.precision,
        )

    def _emit(self, spec: ProblemSpec) -> Callable[[ProgressEvent], None]:
        return lambda event: self._log(spec.name, f"{event.stage}: {event.message}")

    # ---------------------------------------------------------------------------------------

    def prepare(self, spec: ProblemSpec, ctx: PhaseContext) -> Prepared:
        if self.settings.coder != "builtin":
            return Prepared(spec, generate_on_gpu=True)
        self.cores.enter()
        try:
            return self._prepare_builtin(spec, ctx)
        finally:
            self.cores.leave()

    def _prepare_builtin(self, spec: ProblemSpec, ctx: PhaseContext) -> Prepared:
        from kernelstitch.agents.pipeline import run_generate

        clock = StageClock()
        log = self._emit(spec)

        def emit(event: ProgressEvent) -> None:
            clock.enter(event.stage)
            log(event)

        result = run_generate(spec.path, spec.module, self.workspace,
                              self._config(ctx, verify=False), emit, ctx.cancel)
        if result.status != "succeeded" or not result.candidate_path:
            return Prepared(spec, done=ProblemOutcome(
                problem=spec.name, status="failed", message=result.message),
                prepare_stage_s=clock.stop())
        prepared = Prepared(spec, candidate_path=result.candidate_path, plan_steps=_steps(result),
                            plan_bytes=memory_bound_bytes(result.plan))
        clock.enter("build")
        self._prebuild(prepared, ctx)
        prepared.prepare_stage_s = clock.stop()
        return prepared

    def _prebuild(self, prepared: Prepared, ctx: PhaseContext) -> None:
        from kernelstitch.core.worker.client import WorkerClient

        self._log(prepared.spec.name, "compiling: pre-building the candidate's extension")
        # Several builds run at once: share the cores among the problems preparing now, asked
        # again for each build (a group_norm problem's four programs, built one after another,
        # kept the one core it had while eight problems started: 150-190 s on the H100 host).
        with WorkerClient(cuda_device=ctx.device) as worker:
            response = worker.call(BUILD_TASK, {"path": prepared.candidate_path, "jobs": self.cores.jobs()},
                                   timeout_s=max(ctx.time_left_s, MIN_CALL_S), cancel=ctx.cancel)
            if response.ok and self.settings.search:
                self._prebuild_variants(prepared, worker, ctx)
        if response.ok:
            result: dict[str, Any] = response.result or {}
            if result.get("built"):
                prepared.compiled = True
                steps = ", ".join(f"{k} {v:.1f} s" for k, v in (result.get("steps") or {}).items())
                self._log(prepared.spec.name, f"compiled in {result.get('seconds', 0.0):.1f} s"
                          + (" (cache hit)" if result.get("cached") else f" ({steps})" if steps else ""))
            elif result.get("error"):
                self._build_failed(prepared, result["message"], result.get("output", ""))
            elif result.get("skipped"):
                prepared.notes.append(f"not pre-built: {result['skipped']}")
            return
        error = response.error
        if error is None or error.kind in ("cancelled", "timeout"):
            return  # the time limit / Ctrl-C: the phase records it
        detail = error.stderr_tail if error.kind in ("crash", "startup") else error.traceback
        self._build_failed(prepared, f"building the candidate failed: {error.message}",
                           detail or "")

    def _prebuild_variants(self, prepared: Prepared, worker, ctx: PhaseContext) -> None:
        """The search's other variants: most share the default's kernels (a cache hit), the
        rest build now so the GPU phase never waits for nvcc.  A failure here only means that
        variant is built (and fails) when it is timed."""
        folder = Path(prepared.candidate_path).parent / "variants"
        for path in sorted(folder.glob("*/model_new.py")):
            response = worker.call(BUILD_TASK, {"path": str(path), "jobs": self.cores.jobs()},
                                   timeout_s=max(ctx.time_left_s, MIN_CALL_S), cancel=ctx.cancel)
            if not response.ok or (response.result or {}).get("error"):
                prepared.notes.append(f"variant {path.parent.name} did not pre-build")

    @staticmethod
    def _build_failed(prepared: Prepared, message: str, output: str) -> None:
        prepared.compiled = False
        prepared.done = ProblemOutcome(
            problem=prepared.spec.name, status="rejected", message=message,
            reasons=["compile_error"], compiled=False, compile_message=output[-4000:],
        )

    # ---------------------------------------------------------------------------------------

    def measure(self, prepared: Prepared, ctx: PhaseContext) -> ProblemOutcome:
        """On a chosen GPU the whole phase runs in a worker with CUDA_VISIBLE_DEVICES set to
        it, so every process it starts (verifier, profiler, LLM path) inherits that GPU."""
        if ctx.device is None:
            return self.measure_here(prepared, ctx)
        return self._measure_pinned(prepared, ctx)

    def _measure_pinned(self, prepared: Prepared, ctx: PhaseContext) -> ProblemOutcome:
        from kernelstitch.core.worker.client import WorkerClient

        name = prepared.spec.name

        def forward(line: str) -> None:
            if line.startswith(LOG_PREFIX):
                self._log(name, line[len(LOG_PREFIX):])

        args = {"prepared": prepared.to_json(), "settings": self.settings.to_json(),
                "workspace": str(self.workspace.root), "time_left_s": ctx.time_left_s}
        with WorkerClient(cuda_device=ctx.device, stderr_callback=forward) as worker:
            response = worker.call(MEASURE_TASK, args,
                                   timeout_s=max(ctx.time_left_s, MIN_CALL_S) + PINNED_GRACE_S,
                                   cancel=ctx.cancel)
        if response.ok and isinstance(response.result, dict):
            return ProblemOutcome.from_json(response.result)
        error = response.error
        message = f"{error.kind}: {error.message}" if error else "no result"
        if error is not None and error.kind in ("crash", "startup") and error.stderr_tail:
            message += "\n" + error.stderr_tail[-1500:]
        return ProblemOutcome(problem=name, status="failed",
                              message=f"{HARNESS_ERROR}: the measuring worker failed ({message})")

    def measure_here(self, prepared: Prepared, ctx: PhaseContext) -> ProblemOutcome:
        """The measure phase in this process (its workers inherit this process's GPUs)."""
        from kernelstitch.agents.pipeline import run_choose, run_generate, run_verify

        spec = prepared.spec
        if prepared.generate_on_gpu:
            result = run_generate(spec.path, spec.module, self.workspace,
                                  self._config(ctx, verify=True), self._emit(spec), ctx.cancel)
        elif self.settings.search:
            result = run_choose(spec.path, spec.module, self.workspace,
                                self._config(ctx, verify=True), self._emit(spec), ctx.cancel)
        else:
            result = run_verify(spec.path, spec.module, prepared.candidate_path, self.workspace,
                                self._config(ctx, verify=True), self._emit(spec), ctx.cancel)
        outcome = ProblemOutcome(problem=spec.name, status="failed", message="",
                                 plan_steps=list(prepared.plan_steps), compiled=prepared.compiled,
                                 cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
        outcome.apply_result(result)
        if self.settings.profile and outcome.correct and not ctx.cancel.is_set():
            self._profile(spec, outcome, ctx)
        return outcome

    def _profile(self, spec: ProblemSpec, outcome: ProblemOutcome, ctx: PhaseContext) -> None:
        """Profile the reference in a worker whose CUDA_VISIBLE_DEVICES is this phase's GPU
        (the profiler's own workers inherit it), for the roofline floor of the problem."""
        from kernelstitch.core.worker.client import WorkerClient

        self._log(spec.name, "profiling: the reference, for its roofline floor")
        args = {"path": str(spec.path), "module": spec.module,
                "workspace": str(self.workspace.root)}
        with WorkerClient(cuda_device=ctx.device) as worker:
            response = worker.call(PROFILE_TASK, args, timeout_s=max(ctx.time_left_s, MIN_CALL_S),
                                   cancel=ctx.cancel)
        result = response.result if response.ok else None
        if not result or result.get("error"):
            reason = (result or {}).get("error") or (response.error and response.error.message)
            outcome.notes.append(f"profile failed: {reason}")
            return
        floor = result.get("floor_ms")
        if floor and outcome.candidate_ms:
            outcome.roofline_fraction = floor / outcome.candidate_ms
        if floor and result.get("actual_ms"):
            outcome.roofline_fraction_eager = floor / result["actual_ms"]
