"""Planner -> Coder -> Verifier, with progress events and cancellation.

The orchestrator itself runs no user code: graph capture, compilation and every execution of
the module or its candidate happen in worker processes.  The built-in planner and coder are
pure Python over the captured graph.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelstitch.agents.job_protocol import JobResult, ProgressEvent, Stage
from kernelstitch.core.problem import ProblemError, resolve_module
from kernelstitch.core.workspace import Workspace

Emit = Callable[[ProgressEvent], None]


class Cancelled(Exception):
    """The caller asked the pipeline to stop."""


@dataclass(frozen=True)
class PipelineConfig:
    coder: str = "builtin"
    verify: bool = True
    profile: bool = False
    device: int | None = None
    seeds: int = 3
    timing: bool = True
    profilers: tuple[str, ...] = ("torch", "ncu")
    capture_timeout_s: float = 300.0
    verify_timeout_s: float = 900.0
    llm: dict[str, Any] = field(default_factory=dict)  # base_url, model, api_key_env
    budget: dict[str, Any] = field(default_factory=dict)  # time_s, iterations (LLM coder)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PipelineConfig":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "profilers" in known:
            known["profilers"] = tuple(known["profilers"])
        return cls(**known)


@dataclass
class _Context:
    source: Path
    module: str
    workspace: Workspace
    config: PipelineConfig
    emit: Emit
    cancel: threading.Event

    def stage(self, stage: Stage, message: str, step: int | None = None, total: int | None = None):
        if self.cancel.is_set():
            raise Cancelled()
        self.emit(ProgressEvent(stage=stage, message=message, step=step, total=total))


def _failed(kind: str, source: Path, module: str | None, message: str, **extra: Any) -> JobResult:
    return JobResult(
        status="failed", message=message, kind=kind, source_path=str(source), module=module,
        **extra,
    )


def capture_graph(ctx: _Context):
    """Trace the module in a worker (tracing executes the user's __init__ and forward)."""
    from kernelstitch.agents.graph.ir import Graph
    from kernelstitch.core.worker.client import WorkerClient

    with WorkerClient() as worker:
        response = worker.call(
            "kernelstitch.agents.graph.tasks:capture_graph",
            {"path": str(ctx.source), "module": ctx.module},
            timeout_s=ctx.config.capture_timeout_s,
            cancel=ctx.cancel,
        )
    if ctx.cancel.is_set():
        raise Cancelled()
    if not response.ok:
        raise ProblemError(f"could not capture {ctx.module}'s forward: {response.error.message}")
    return Graph.from_json(response.result)


def run_generate(
    source: Path,
    module: str | None,
    workspace: Workspace,
    config: PipelineConfig,
    emit: Emit,
    cancel: threading.Event | None = None,
) -> JobResult:
    cancel = cancel or threading.Event()
    source = Path(source).resolve()
    try:
        info = resolve_module(source, module)
    except ProblemError as exc:
        return _failed("generate", source, module, str(exc))
    if not info.has_inputs:
        return _failed("generate", source, info.name, info.missing_inputs_message())
    ctx = _Context(source, info.name, workspace, config, emit, cancel)
    store = workspace.runstore()
    run_id = store.start_run("generate", str(source), info.name, config.__dict__)
    try:
        result = _generate(ctx, store, run_id)
    except Cancelled:
        result = JobResult(
            status="cancelled", message="cancelled", kind="generate",
            source_path=str(source), module=info.name, run_id=run_id,
        )
    except ProblemError as exc:
        result = _failed("generate", source, info.name, str(exc), run_id=run_id)
    store.finish_run(run_id, result.status, {"message": result.message})
    return result


def _generate(ctx: _Context, store, run_id: int) -> JobResult:
    from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.report import render_report

    ctx.stage("planning", f"capturing {ctx.module}.forward")
    graph = capture_graph(ctx)
    plan = plan_builtin(graph)
    store.add_artifact(run_id, "plan", "plan.json", plan.to_json())
    ctx.stage("planning", f"plan: {len(plan.steps)} steps")

    out_dir = ctx.workspace.output_dir(ctx.source, ctx.module)
    for index, step in enumerate(plan.steps, start=1):
        ctx.stage("coding", f"step {index}/{len(plan.steps)}: {step.description}", index,
                  len(plan.steps))
    candidate = code_builtin(plan, graph, ctx.source, out_dir / "model_new.py")
    candidate_path = write_candidate(candidate, out_dir)
    store.add_artifact(run_id, "candidate", "model_new.py", candidate.source)

    verdict = None
    if ctx.config.verify:
        verdict = verify_candidate(ctx, candidate_path)
        store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
    ctx.stage("reporting", "writing report")
    report = render_report(plan, verdict, ctx.source, ctx.module, candidate_path)
    report_path = out_dir / "report.md"
    ctx.workspace.write_text_atomic(report_path, report)
    store.add_artifact(run_id, "report", "report.md", report)
    message = _summary(verdict)
    return JobResult(
        status="succeeded", message=message, kind="generate", source_path=str(ctx.source),
        module=ctx.module, candidate_path=str(candidate_path), report_path=str(report_path),
        plan=plan.to_json(), verdict=verdict.to_json() if verdict else None, run_id=run_id,
    )


def verify_candidate(ctx: _Context, candidate_path: Path):
    """Verify in worker processes; the caller stores the verdict (it carries its seeds)."""
    from kernelstitch.agents.verifier import VerifyOptions, verify

    ctx.stage("compiling", "compiling and verifying the candidate")
    options = VerifyOptions(
        seeds=ctx.config.seeds, timing=ctx.config.timing, timeout_s=ctx.config.verify_timeout_s,
        device=ctx.config.device,
    )
    return verify(
        ctx.source, candidate_path, reference_module=ctx.module, options=options,
        progress=lambda message: ctx.stage("verifying", message), cancel=ctx.cancel,
    )


def _summary(verdict) -> str:
    if verdict is None:
        return "candidate written (not verified)"
    if verdict.status == "accepted" and verdict.timings:
        t = verdict.timings
        return f"accepted: {t.speedup_vs_eager:.2f}x vs eager"
    if verdict.status == "rejected":
        codes = ", ".join(r.code for r in verdict.reasons)
        return f"rejected: {codes}"
    reason = verdict.reasons[0].message if verdict.reasons else "could not verify"
    return f"written, not verified: {reason}"


def run_verify(
    source: Path,
    module: str | None,
    candidate_path: str | None,
    workspace: Workspace,
    config: PipelineConfig,
    emit: Emit,
    cancel: threading.Event | None = None,
) -> JobResult:
    """Re-verify a candidate (by default the generated one) against its source module."""
    cancel = cancel or threading.Event()
    source = Path(source).resolve()
    try:
        info = resolve_module(source, module)
    except ProblemError as exc:
        return _failed("verify", source, module, str(exc))
    candidate = Path(candidate_path) if candidate_path else (
        workspace.output_dir(source, info.name) / "model_new.py"
    )
    if not candidate.exists():
        return _failed("verify", source, info.name,
                       f"no generated implementation at {candidate}: run generate first")
    ctx = _Context(source, info.name, workspace, config, emit, cancel)
    store = workspace.runstore()
    run_id = store.start_run("verify", str(source), info.name, config.__dict__)
    try:
        verdict = verify_candidate(ctx, candidate)
    except Cancelled:
        store.finish_run(run_id, "cancelled", {})
        return JobResult(status="cancelled", message="cancelled", kind="verify",
                         source_path=str(source), module=info.name, run_id=run_id)
    store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
    message = _summary(verdict)
    store.finish_run(run_id, "succeeded", {"message": message, "verdict": verdict.status})
    return JobResult(
        status="succeeded", message=message, kind="verify", source_path=str(source),
        module=info.name, candidate_path=str(candidate), verdict=verdict.to_json(),
        run_id=run_id,
    )


def run_profile(
    source: Path,
    module: str | None,
    workspace: Workspace,
    config: PipelineConfig,
    emit: Emit,
    cancel: threading.Event | None = None,
) -> JobResult:
    """Profile the module on the GPU; findings carry the source lines that caused them."""
    import json

    from kernelstitch.profiler.profile import NoGpuError, profile_module
    from kernelstitch.profiler.runner import TaskError

    cancel = cancel or threading.Event()
    source = Path(source).resolve()
    try:
        info = resolve_module(source, module)
    except ProblemError as exc:
        return _failed("profile", source, module, str(exc))
    if not info.has_inputs:
        return _failed("profile", source, info.name, info.missing_inputs_message())
    emit(ProgressEvent(stage="profiling", message=f"profiling {info.name} ({', '.join(config.profilers)})"))
    store = workspace.runstore()
    run_id = store.start_run("profile", str(source), info.name, config.__dict__)
    out_dir = workspace.output_dir(source, info.name)
    try:
        report = profile_module(
            source, info.name, backends=config.profilers, work_dir=out_dir / "profile",
            state_dir=workspace.state_dir,
        )
    except (NoGpuError, TaskError, ProblemError) as exc:
        store.finish_run(run_id, "failed", {"message": str(exc)})
        return _failed("profile", source, info.name, f"could not profile: {exc}", run_id=run_id)
    report_json = report.to_json()
    store.add_artifact(run_id, "profile", "profile.json", report_json)
    findings = json.loads(report_json).get("findings", [])
    message = f"{len(report.kernels)} kernels, {len(findings)} findings"
    store.finish_run(run_id, "succeeded", {"message": message})
    return JobResult(
        status="succeeded", message=message, kind="profile", source_path=str(source),
        module=info.name, findings=findings, run_id=run_id,
    )
