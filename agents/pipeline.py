"""Planner -> Coder -> Verifier, with progress events and cancellation.

The orchestrator itself runs no user code: graph capture, compilation and every execution of
the module or its candidate happen in worker processes.  The built-in planner and coder are
pure Python over the captured graph.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.agents.job_protocol import JobResult, ProgressEvent, Stage

from kernelstitch.core.precision import float64_describes, precision_mode
from kernelstitch.core.problem import ProblemError, resolve_module
from kernelstitch.core.workspace import Workspace

Emit = Callable[[ProgressEvent], None]
# (reference file, candidate file, module, cancel) -> Verdict; replaces the Verifier (tests).
Verifier = Callable[[Path, Path, str, threading.Event], Any]


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
    keep_spare_worker: bool = False  # see VerifyOptions: set by the bench's measure loop
    timing_budget_s: float = 2.0  # seconds of timed runs per implementation (VerifyOptions)
    # The measured search (agents/search.py): build up to `variants` plans, time them against
    # the original in one worker (`search_budget_s` of timed runs), deliver the fastest verified
    # one or keep the original.  Off: the default plan alone is verified and delivered.
    search: bool = True
    variants: int = 4
    search_budget_s: float = 3.0
    search_time_s: float = 180.0  # no further contender is verified after this (the first is)
    # The precision the user allows (kernelstitch.core.precision, issue 24): plans, baselines
    # and the Verifier's tolerance follow it; "fp32" is strict.
    precision: str = "fp32"
    # coder="llm": base_url, model, api_key_env (a variable's NAME), timeout_s, ... (see
    # agents/llm/config.py); budget: time_s, iterations, tokens of the LLM path.
    llm: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Where the CLI's, the job request's and scripts' settings enter: a key given as the
        # variable's name becomes a placeholder, so no report, store or log line can hold it.
        from kernelstitch.agents.llm.config import sanitize_llm_settings

        object.__setattr__(self, "llm", sanitize_llm_settings(self.llm))
        object.__setattr__(self, "precision", precision_mode(self.precision).name)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
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
    verifier: Verifier | None = None

    def stage(self, stage: Stage, message: str, step: int | None = None, total: int | None = None):
        if self.cancel.is_set():
            raise Cancelled()
        self.emit(ProgressEvent(stage=stage, message=message, step=step, total=total))


def _failed(kind: str, source: Path, module: str | None, message: str, **extra: Any) -> JobResult:
    return JobResult(
        status="failed", message=message, kind=kind, source_path=str(source), module=module,
        **extra,
    )


def _resolve(kind: str, source: Path, module: str | None, need_inputs: bool):
    """(info, None) for the module to work on, or (None, a failed JobResult saying why)."""
    try:
        info = resolve_module(source, module)
    except ProblemError as exc:
        return None, _failed(kind, source, module, str(exc))
    if need_inputs and not info.has_inputs:
        return None, _failed(kind, source, info.name, info.missing_inputs_message())
    return info, None


# What a job body returns: its JobResult, or that and extra fields for the run's summary.
Body = Callable[[_Context, Any, int], JobResult | tuple[JobResult, dict[str, Any]]]


class _Job:
    """The frame every job kind shares.  `_Job(...)` resolves the module: `refused` is then a
    failed JobResult (no run recorded) or None.  `run(body)` records the run (its config
    without literal keys), calls `body(ctx, store, run_id)` and turns `Cancelled` into a
    cancelled result and ProblemError (and `errors`) into a failed one; the run's summary holds
    the result's message (an exception's own text) and whatever extra fields the body gave."""

    def __init__(self, kind: str, source: Path, module: str | None, workspace: Workspace,
                 config: PipelineConfig, emit: Emit, cancel: threading.Event | None, *,
                 need_inputs: bool, verifier: Verifier | None = None) -> None:
        self.kind = kind
        self.source = Path(source).resolve()
        info, self.refused = _resolve(kind, self.source, module, need_inputs)
        self.module = info.name if info is not None else module
        self.ctx = _Context(self.source, self.module, workspace, config, emit,
                            cancel or threading.Event(), verifier)

    def fail(self, message: str) -> JobResult:
        """A failed result before the run starts (nothing is recorded)."""
        return _failed(self.kind, self.source, self.module, message)

    def run(self, body: Body, *, errors: tuple[type[BaseException], ...] = (),
            failure_prefix: str = "") -> JobResult:
        ctx = self.ctx
        store = ctx.workspace.runstore()
        run_id = store.start_run(self.kind, str(self.source), self.module,
                                 _stored_config(ctx.config))
        summary: dict[str, Any]
        try:
            outcome = body(ctx, store, run_id)
            result, extra = outcome if isinstance(outcome, tuple) else (outcome, {})
            summary = {"message": result.message, **extra}
        except Cancelled:
            result = JobResult(status="cancelled", message="cancelled", kind=self.kind,
                               source_path=str(self.source), module=self.module, run_id=run_id)
            summary = {"message": result.message}
        except (ProblemError, *errors) as exc:
            result = _failed(self.kind, self.source, self.module, f"{failure_prefix}{exc}",
                             run_id=run_id)
            summary = {"message": str(exc)}
        store.finish_run(run_id, result.status, summary)
        return result


def capture_graph(ctx: _Context):
    """Trace the module in a worker (tracing executes the user's __init__ and forward)."""
    from kernelstitch.agents.plan.graph import Graph

    from kernelstitch.core.worker.client import WorkerClient

    with WorkerClient() as worker:
        response = worker.call(
            "kernelstitch.agents.planner.capture_task:capture_graph",
            {"path": str(ctx.source), "module": ctx.module},
            timeout_s=ctx.config.capture_timeout_s,
            cancel=ctx.cancel,
        )
    if ctx.cancel.is_set():
        raise Cancelled()
    if not response.ok:
        raise ProblemError(f"could not capture {ctx.module}'s forward: {response.error.message}")
    return Graph.from_json(response.result)


def _stored_config(config: PipelineConfig) -> dict[str, Any]:
    """The config as recorded in the run store: never a literal key (the LLM path refuses one
    anyway; it must not reach the store either)."""
    from kernelstitch.agents.llm.config import looks_like_key

    data = dict(config.__dict__)
    llm = config.llm if isinstance(config.llm, dict) else {}
    data["llm"] = {k: v for k, v in llm.items() if k not in ("api_key", "apiKey", "key")
                   and not (k == "api_key_env" and looks_like_key(v))}
    return data


def run_generate(
    source: Path,
    module: str | None,
    workspace: Workspace,
    config: PipelineConfig,
    emit: Emit,
    cancel: threading.Event | None = None,
    *,
    verifier: Verifier | None = None,
) -> JobResult:
    """Capture, plan, code, verify (and with `coder="llm"`, the LLM agents after the built-in
    coder: see agents/llm/run.py).  `verifier` replaces the real Verifier (tests)."""
    job = _Job("generate", source, module, workspace, config, emit, cancel, need_inputs=True,
               verifier=verifier)
    return job.refused or job.run(_generate)


def _generate(ctx: _Context, store, run_id: int) -> JobResult:
    from kernelstitch.agents.coder.builtin import CoderError, code_builtin, write_candidate
    from kernelstitch.agents.planner.builtin import plan_builtin
    from kernelstitch.agents.planner.precision import with_precision
    from kernelstitch.agents.report import render_report

    use_llm = ctx.config.coder == "llm"
    ctx.stage("planning", f"capturing {ctx.module}.forward")
    graph = capture_graph(ctx)
    plan = with_precision(plan_builtin(graph), ctx.config.precision)
    if plan.host.precision != ctx.config.precision:
        ctx.stage("planning", f"precision {ctx.config.precision} changes nothing in "
                              f"{ctx.module} (no matmul, convolution, attention or recurrent "
                              "layer): planned and verified in fp32")
        plan.notes.append(f"precision {ctx.config.precision} was asked for, but nothing in this "
                          "module runs on the matrix units: fp32, judged at fp32's bound")
        ctx.config = dataclasses.replace(ctx.config, precision="fp32")
    store.add_artifact(run_id, "plan", "plan.json", plan.to_json())
    ctx.stage("planning", f"plan: {len(plan.steps)} steps")

    out_dir = ctx.workspace.output_dir(ctx.source, ctx.module)
    for index, step in enumerate(plan.steps, start=1):
        ctx.stage("coding", f"step {index}/{len(plan.steps)}: {step.description}", index,
                  len(plan.steps))
    candidate = candidate_path = None
    builtin_error = None
    try:
        candidate = code_builtin(plan, ctx.source, out_dir / "model_new.py")
    except CoderError as exc:
        if not use_llm:
            raise
        builtin_error = str(exc)  # the LLM coder starts from the plan alone
        ctx.stage("coding", f"built-in coder failed: {exc}")
    if candidate is not None:
        candidate_path = write_candidate(candidate, out_dir)
        store.add_artifact(run_id, "candidate", "model_new.py", candidate.source)

    verdict = selection = None
    searching = candidate_path is not None and ctx.config.search and not use_llm
    if searching and not ctx.config.verify:
        from kernelstitch.agents.search import build_variants

        build_variants(ctx, graph, out_dir, ctx.config.variants, base=plan)  # run_choose picks
    elif searching:
        selection, plan, candidate_path, verdict = _search(ctx, store, run_id, graph, plan,
                                                           out_dir, candidate_path)
    elif ctx.config.verify and candidate_path is not None:
        verdict = verify_candidate(ctx, candidate_path, builtin=True)
    if verdict is not None:
        store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
    extra: list[str] = []
    cpu_note = _compile_without_gpu(ctx, verdict, candidate_path, out_dir)
    if cpu_note:
        extra.append(f"## Compiled without a GPU\n\n{cpu_note}.\n")
    if selection is not None:
        from kernelstitch.agents.verifier.selection import markdown_table

        reused = " (reused from an earlier generate on this GPU)" if selection.reused else ""
        extra.append(f"## Variants measured{reused}\n\n{selection.why}.\n\n"
                     f"{markdown_table(selection)}\n")
    llm_note = None
    adopted_llm = False
    if use_llm:
        llm = _run_llm(ctx, store, run_id, graph, plan, candidate, builtin_error, verdict,
                       out_dir)
        from kernelstitch.agents.llm.run import render_llm_section

        extra.append(render_llm_section(llm, candidate is not None, verdict))
        llm_note = llm.summary()
        if llm.use_llm or (candidate is None and _unverified_llm_file(llm)):
            plan, verdict, candidate_path = _adopt_llm_candidate(ctx, store, run_id, llm,
                                                                 candidate_path, out_dir)
            adopted_llm = True
            if llm.torch_op_allowance is not None:
                remember_delivered(store, Path(candidate_path), ctx.source,
                                   allowance=llm.torch_op_allowance,
                                   precision=ctx.config.precision)
        elif candidate is None:
            return _failed("generate", ctx.source, ctx.module,
                           f"the built-in coder failed ({builtin_error}) and the LLM produced "
                           f"no usable candidate ({llm.error or llm.decision})", run_id=run_id,
                           plan=plan.to_json())
    if candidate_path is not None and not adopted_llm:
        remember_delivered(store, Path(candidate_path), ctx.source, builtin=True,
                           precision=ctx.config.precision)
    ctx.stage("reporting", "writing report")
    report = render_report(plan, verdict, ctx.source, ctx.module, candidate_path,
                           extra_sections=extra)
    report_path = out_dir / "report.md"
    ctx.workspace.write_text_atomic(report_path, report)
    store.add_artifact(run_id, "report", "report.md", report)
    message = _summary(verdict) + (f"; {cpu_note}" if cpu_note else "") + (f" ({llm_note})" if llm_note else "")
    if selection is not None and selection.decision == "keep_original":
        message = f"kept the original: {selection.why}"
    return JobResult(
        status="succeeded", message=message, kind="generate", source_path=str(ctx.source),
        module=ctx.module, candidate_path=str(candidate_path) if candidate_path else None,
        report_path=str(report_path), plan=plan.to_json(),
        verdict=verdict.to_json() if verdict else None, run_id=run_id,
        selection=selection.to_json() if selection is not None else None,
    )


def _search(ctx: _Context, store, run_id: int, graph, plan, out_dir: Path, candidate_path):
    """(selection, delivered plan, delivered file or None, its verdict): the measured search,
    or without a GPU to time on, the default candidate verified alone (selection None)."""
    from kernelstitch.agents.search import (
        NoGpuForSearch,
        run_search,
        source_fingerprint,
        unmeasured_choice,
    )

    try:
        found = run_search(ctx, graph, out_dir,
                           lambda path: verify_candidate(ctx, path, builtin=True), store, run_id,
                           limit=ctx.config.variants, base=plan,
                           budget_s=ctx.config.search_budget_s,
                           fingerprint=source_fingerprint(),
                           time_budget_s=ctx.config.search_time_s)
    except NoGpuForSearch as exc:
        ctx.stage("verifying", f"no measured search ({exc}): verifying the default plan")
        verdict = verify_candidate(ctx, candidate_path, builtin=True)
        kept = unmeasured_choice(verdict, str(exc), out_dir)
        return (kept, plan, None, verdict) if kept else (None, plan, candidate_path, verdict)
    return found.selection, found.plan, found.candidate_path, found.verdict


def _run_llm(ctx: _Context, store, run_id: int, graph, plan, candidate, builtin_error, verdict,
             out_dir: Path):
    """The LLM Planner and Coder after the built-in coder (seed and fallback).  `plan` is the
    built-in planner's: the PyTorch ops it leaves to PyTorch are the only ones an LLM candidate
    may call (`builtin_torch_op_allowance`), whatever the LLM plan or the file says."""
    from kernelstitch.agents.llm.errors import LlmCancelled
    from kernelstitch.agents.llm.run import LlmInputs, run_llm_path

    allowance = builtin_torch_op_allowance(plan, ctx.module)
    inputs = LlmInputs(
        source=ctx.source, module=ctx.module, graph=graph, builtin_plan=plan,
        builtin_source=candidate.source if candidate is not None else None,
        builtin_error=builtin_error, builtin_verdict=verdict, out_dir=out_dir,
        profile=_baseline_profile(ctx, store), torch_op_allowance=allowance,
        precision=ctx.config.precision)
    verify = ((lambda path: verify_candidate(ctx, path, allowance=allowance))
              if ctx.config.verify else None)
    try:
        return run_llm_path(
            inputs, llm_settings=ctx.config.llm, budget=ctx.config.budget,  # checked there
            verify=verify, store=store, run_id=run_id,
            progress=lambda stage, message: ctx.stage(stage, message), cancel=ctx.cancel)
    except LlmCancelled:
        raise Cancelled() from None


# The step kinds of a plan that keep an op in PyTorch (agents/plan/model.py TECHNIQUES).
TORCH_STEP_KINDS = ("library_call", "pytorch_fallback")


def builtin_torch_op_allowance(plan, module: str):
    """The PyTorch ops the built-in planner's plan of `module` leaves to PyTorch, as the
    Verifier's `TorchOpAllowance` for an untrusted candidate of the same module (the LLM
    coder's): each `library_call` / `pytorch_fallback` step's declared profiler names
    (`spec["declare"]`, else the chain of its `spec["op"]`).  Trusted because the built-in
    planner made `plan` from the captured graph in this process; nothing a model or a
    candidate wrote enters it.  Never pass an LLM planner's plan here."""
    from kernelstitch.agents.planner.ops import torch_ops_for
    from kernelstitch.agents.verifier.declaration import TorchOpAllowance

    ops: dict[str, str] = {}
    calls: list[str] = []
    steps: list[str] = []
    for step in plan.steps:
        if step.technique not in TORCH_STEP_KINDS:
            continue
        spec = step.spec or {}
        op = str(spec.get("op") or "")
        declared = spec.get("declare") or {
            name: step.technique for name in (torch_ops_for(op) if op else ())}
        ops.update({str(name): str(kind) for name, kind in declared.items()})
        if op:
            calls.append(f"torch.ops.{op}")
        steps.append(f"{step.id} {step.technique}: {step.description}")
    where = f"the built-in planner's plan of {module}"
    source = f"{where} ({'; '.join(steps)})" if steps else f"{where} (no step left to PyTorch)"
    return TorchOpAllowance(ops, source, tuple(dict.fromkeys(calls)))


def _unverified_llm_file(llm) -> bool:
    """With no built-in candidate at all, an LLM file that passed the static checks but could
    not be verified is still worth writing (flagged as unverified)."""
    last = llm.coder.last_checked if llm.coder else None
    return last is not None and last.outcome in ("could_not_verify", "unverified")


def _adopt_llm_candidate(ctx: _Context, store, run_id: int, llm, builtin_path, out_dir: Path):
    """Make the LLM candidate the module's model_new.py (the built-in one is kept beside it)."""
    import json
    import shutil

    attempt = llm.coder.best if llm.use_llm else llm.coder.last_checked
    if builtin_path is not None:
        keep = out_dir / "llm" / "builtin_model_new.py"
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(builtin_path, keep)
    for old in (out_dir / "kernels").glob("*.cu"):  # the built-in candidate's kernels
        old.unlink()
    path = out_dir / "model_new.py"
    ctx.workspace.write_text_atomic(path, attempt.source)
    plan = llm.plan
    ctx.workspace.write_text_atomic(out_dir / "plan.json", json.dumps(plan.to_json(), indent=2))
    store.add_artifact(run_id, "candidate", "model_new.py", attempt.source)
    verdict = attempt.verdict
    if verdict is not None:
        store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
    return plan, verdict, path


def _baseline_profile(ctx: _Context, store) -> dict[str, Any] | None:
    """The latest successful profile of this module, if one was taken (the planner uses its
    findings)."""
    import json

    try:
        record = store.latest("profile", str(ctx.source), ctx.module, "profile",
                              status="succeeded")
    except Exception:  # noqa: BLE001 - advisory input only
        return None
    if record is None:
        return None
    content = record.content
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            return None
    return content if isinstance(content, dict) else None


def verify_candidate(ctx: _Context, candidate_path: Path, builtin: bool = False,
                     allowance=None):
    """Verify in worker processes; the caller stores the verdict (it carries its seeds).
    `builtin`: this run's built-in coder just wrote the file (its bound declaration counts).
    `allowance`: the PyTorch ops this (untrusted) file may call, from our side
    (`builtin_torch_op_allowance`), never from the file."""
    from kernelstitch.agents.verifier import VerifyOptions, verify
    from kernelstitch.agents.verifier.declaration import CandidateOrigin

    ctx.stage("verifying", "verifying the candidate (a GPU worker compiles it)")
    if ctx.verifier is not None:
        return ctx.verifier(ctx.source, Path(candidate_path), ctx.module, ctx.cancel)
    options = VerifyOptions(
        seeds=ctx.config.seeds, timing=ctx.config.timing, timeout_s=ctx.config.verify_timeout_s,
        device=ctx.config.device, keep_spare_worker=ctx.config.keep_spare_worker,
        timing_budget_s=ctx.config.timing_budget_s, precision=ctx.config.precision,
    )
    return verify(
        ctx.source, candidate_path, reference_module=ctx.module, options=options,
        progress=lambda message: ctx.stage("verifying", message), cancel=ctx.cancel,
        origin=CandidateOrigin.BUILTIN if builtin else CandidateOrigin.UNTRUSTED,
        allowance=allowance,
    )


def _compile_without_gpu(ctx: _Context, verdict, candidate_path, out_dir: Path) -> str | None:
    """Without a GPU (the verdict says no_gpu), the built-in kernels compiled by nvcc for sm_90a
    where nvcc is installed (agents/cpu_compile.py); the sentence to report, or None."""
    if verdict is None or candidate_path is None or verdict.status != "could_not_verify":
        return None
    if not any(r.code == "no_gpu" for r in verdict.reasons):
        return None
    from kernelstitch.agents.cpu_compile import compile_without_gpu

    ctx.stage("compiling", "nvcc for sm_90a (no GPU here: compile only, nothing runs)")
    result = compile_without_gpu(Path(candidate_path).parent / "kernels")
    return result.note if result is not None else None


def _summary(verdict) -> str:
    if verdict is None:
        return "candidate written (not verified)"
    if verdict.status == "accepted" and verdict.timings:
        t = verdict.timings
        if t.precision != "fp32" and t.speedup_vs_eager_fp32 is not None:
            report = verdict.precision
            error = ("" if report is None or report.max_rel_error is None
                     else ", float64 error not meaningful (random draws)"
                     if not float64_describes(report.fp32_max_rel_error, report.atol)
                     else f", max error {report.max_rel_error:.1e} x RMS")
            return (f"accepted ({t.precision}): {t.speedup_vs_eager_fp32:.2f}x vs fp32 eager, "
                    f"{t.speedup_vs_eager:.2f}x vs eager with {t.precision}{error}")
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
    job = _Job("verify", source, module, workspace, config, emit, cancel, need_inputs=False)
    if job.refused:
        return job.refused
    candidate = Path(candidate_path) if candidate_path else (
        workspace.output_dir(job.source, job.module) / "model_new.py"
    )
    if not candidate.exists():
        return job.fail(f"no generated implementation at {candidate}: run generate first")

    return job.run(lambda ctx, store, run_id: _verified(ctx, store, run_id, candidate))


# How a delivered file was trusted when the pipeline wrote it, by its content hash (a run store
# record, never a marker in the file): re-verifying it from disk (watch, on save, the bench's
# measure phase) trusts it the same way only while it is byte for byte that file. The built-in
# coder's bound declaration counts for the file alone; an adopted LLM file's allowance also
# needs the reference it was granted for to be unchanged.
DELIVERED_FILE_KIND = "delivered_file"


@dataclass(frozen=True)
class DeliveredTrust:
    builtin: bool = False  # the built-in coder wrote it
    allowance: Any = None  # the TorchOpAllowance an adopted LLM file was verified with
    precision: str | None = None  # a reduced precision it was generated at (None: strict fp32)


def _file_digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def remember_delivered(store, path: Path, reference: Path, builtin: bool = False,
                       allowance=None, precision: str = "fp32") -> None:
    """`precision`: what the file was generated and verified at; re-verifying this exact file
    uses it (a program generated with TF32 fails strict fp32's bound by design)."""
    record = store.start_run(DELIVERED_FILE_KIND, str(reference), "",
                             {"sha256": _file_digest(path)})
    store.add_artifact(record, DELIVERED_FILE_KIND, "trust.json", {
        "builtin": builtin, "reference_sha256": _file_digest(reference),
        "allowance": allowance.to_json() if allowance is not None else None,
        "precision": precision})
    store.finish_run(record, "succeeded", {})


def delivered_trust(store, path: Path, reference: Path) -> DeliveredTrust:
    """How the run that delivered this exact file trusted it (nothing, for any other file)."""
    from kernelstitch.agents.verifier.declaration import TorchOpAllowance

    try:
        found = store.latest_by_config(DELIVERED_FILE_KIND, "sha256", _file_digest(path),
                                       DELIVERED_FILE_KIND)
        content = found.content if found is not None else None
        if not isinstance(content, dict):
            return DeliveredTrust()
        precision = content.get("precision")
        precision = precision if isinstance(precision, str) and precision != "fp32" else None
        if content.get("builtin"):
            return DeliveredTrust(builtin=True, precision=precision)
        if content.get("reference_sha256") != _file_digest(reference):
            return DeliveredTrust()
        allowance = content.get("allowance")
        return DeliveredTrust(allowance=TorchOpAllowance.from_json(
            allowance if isinstance(allowance, dict) else None), precision=precision)
    except Exception:  # noqa: BLE001 - an unreadable store trusts nothing
        return DeliveredTrust()


def _verified(ctx: _Context, store, run_id: int, candidate: Path,
              plan: dict[str, Any] | None = None):
    """Verify one file and say so: verify's body, and choose's without a GPU to time on."""
    trust = delivered_trust(store, candidate, ctx.source)
    if trust.precision and trust.precision != ctx.config.precision:
        # the run store (never the file) says this exact file was made under a reduced precision
        ctx.stage("verifying", f"this file was generated with precision {trust.precision}: "
                               + ("verified at that precision's bound"
                                  if precision_mode(trust.precision).reduced
                                  else "verified and timed with TF32 off"))
        ctx.config = dataclasses.replace(ctx.config, precision=trust.precision)
    verdict = verify_candidate(ctx, candidate, builtin=trust.builtin, allowance=trust.allowance)
    store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
    return JobResult(
        status="succeeded", message=_summary(verdict), kind="verify",
        source_path=str(ctx.source), module=ctx.module, candidate_path=str(candidate),
        plan=plan, verdict=verdict.to_json(), run_id=run_id,
    ), {"verdict": verdict.status}


def run_choose(
    source: Path,
    module: str | None,
    workspace: Workspace,
    config: PipelineConfig,
    emit: Emit,
    cancel: threading.Event | None = None,
) -> JobResult:
    """The GPU half of the measured search over the variants a `generate` without verification
    coded (variants/manifest.json): time, verify, deliver the fastest or keep the original."""
    from kernelstitch.agents.search import (
        MANIFEST,
        BuiltVariants,
        NoGpuForSearch,
        choose_variant,
        source_fingerprint,
        unmeasured_choice,
    )
    from kernelstitch.agents.verifier.verdict import Verdict

    job = _Job("verify", source, module, workspace, config, emit, cancel, need_inputs=False)
    if job.refused:
        return job.refused
    out_dir = workspace.output_dir(job.source, job.module)
    if not (out_dir / "variants" / MANIFEST).is_file():
        return job.fail(f"no variants at {out_dir / 'variants'}: run generate first")

    def body(ctx: _Context, store, run_id: int):
        built = BuiltVariants.load(out_dir / "variants")
        planned = next(iter(built.plans.values())).host.precision
        if planned != ctx.config.precision:  # generate found nothing the precision changes
            ctx.config = dataclasses.replace(ctx.config, precision=planned)
        try:
            found = choose_variant(ctx, built, out_dir,
                                   lambda path: verify_candidate(ctx, path, builtin=True), store,
                                   run_id, ctx.config.search_budget_s,
                                   source_fingerprint(), time_budget_s=ctx.config.search_time_s)
        except NoGpuForSearch as exc:  # verify the default plan alone, as generate does
            ctx.stage("verifying", f"no measured search ({exc}): verifying the default plan")
            result, extra = _verified(ctx, store, run_id, out_dir / "model_new.py",
                                      next(iter(built.plans.values())).to_json())
            verdict = Verdict.from_json(result.verdict) if result.verdict else None
            kept = unmeasured_choice(verdict, str(exc), out_dir)
            if kept is None:
                return result, extra
            return dataclasses.replace(
                result, message=f"kept the original: {kept.why}", candidate_path=None,
                selection=kept.to_json()), {"decision": kept.decision}
        verdict, selection = found.verdict, found.selection
        if verdict is not None:
            store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
        message = (_summary(verdict) if selection.decision == "deliver"
                   else f"kept the original: {selection.why}")
        return JobResult(
            status="succeeded", message=message, kind="verify", source_path=str(ctx.source),
            module=ctx.module,
            candidate_path=str(found.candidate_path) if found.candidate_path else None,
            plan=found.plan.to_json(), verdict=verdict.to_json() if verdict else None,
            run_id=run_id, selection=selection.to_json(),
        ), {"decision": selection.decision}

    return job.run(body)


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

    job = _Job("profile", source, module, workspace, config, emit, cancel, need_inputs=True)
    if job.refused:
        return job.refused
    emit(ProgressEvent(stage="profiling",
                       message=f"profiling {job.module} ({', '.join(config.profilers)})"))

    def body(ctx: _Context, store, run_id: int) -> JobResult:
        report = profile_module(
            ctx.source, ctx.module, backends=config.profilers,
            work_dir=ctx.workspace.output_dir(ctx.source, ctx.module) / "profile",
            state_dir=ctx.workspace.state_dir,
        )
        report_json = report.to_json()
        store.add_artifact(run_id, "profile", "profile.json", report_json)
        findings = json.loads(report_json).get("findings", [])
        return JobResult(
            status="succeeded", message=f"{len(report.kernels)} kernels, {len(findings)} findings",
            kind="profile", source_path=str(ctx.source), module=ctx.module, findings=findings,
            run_id=run_id,
        )

    return job.run(body, errors=(NoGpuError, TaskError), failure_prefix="could not profile: ")
