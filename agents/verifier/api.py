"""verify(reference, candidate) -> Verdict: static rules here, everything else in workers.

Order: static checks -> reference worker (outputs, op list, timings) -> candidate worker, main
phase (own shapes, interleaved timing, profiler) -> the same worker, variants phase (other
shapes); the reference worker stays up as the judge that compares every candidate check.  Seeds come from `secrets`, so a candidate cannot predict its test inputs; they are in
the verdict (and the run store) to reproduce a result.  Torch-free: this process runs no user
code.
"""

from __future__ import annotations

import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelstitch.agents.verifier.assemble import Inputs, assemble
from kernelstitch.agents.verifier.declaration import CandidateOrigin, TorchOpAllowance
from kernelstitch.agents.verifier.protect import Protection, SnapshotError
from kernelstitch.agents.verifier.runner import (
    CANDIDATE_TASK,
    EXITS,
    REFERENCE_TASK,
    SPARES,
    StartedWorker,
    TaskOutcome,
    run_task,
)
from kernelstitch.agents.verifier.static_checks import check_files
from kernelstitch.agents.verifier.verdict import Reason, Verdict

from kernelstitch.core.gpu_presence import cuda_may_be_present
from kernelstitch.core.problem import ProblemError, resolve_module

# Static findings that leave nothing to run.
UNRUNNABLE = {"no_model_new", "compile_error"}
MIN_TASK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class VerifyOptions:
    seeds: int = 3  # random seeds for the problem's own shapes (at least 2 are used)
    shape_variants: int = 2  # other input shapes the reference accepts
    timing: bool = True
    compare_compile: bool = True  # also time torch.compile of the reference
    timeout_s: float = 600  # for the whole verification
    device: int | None = None  # CUDA device index (None: the default device)
    timing_budget_s: float = 2.0  # seconds of timed runs per implementation
    # Start the next verification's reference worker during this one's variants stage (for
    # callers that verify one problem after another in one process: the bench).
    keep_spare_worker: bool = False
    # The precision the user allows (kernelstitch/core/precision.py): the baselines are timed
    # with it and the judge compares against float64 with its bound (tolerances.py).
    precision: str = "fp32"


def fresh_seeds(count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbits(31)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def verify(
    reference: Path,
    candidate: Path,
    *,
    reference_module: str | None = None,
    options: VerifyOptions = VerifyOptions(),
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    store: Any | None = None,
    secret_env: tuple[str, ...] = (),
    origin: CandidateOrigin = CandidateOrigin.UNTRUSTED,
    allowance: TorchOpAllowance | None = None,
) -> Verdict:
    """`secret_env`: names of variables that hold credentials (the LLM configuration's key
    variable), dropped from the candidate's environment besides every secret-like one; never
    stored.  `origin`: BUILTIN only from the run whose built-in coder just wrote `candidate`
    (its bound KERNELSTITCH_TORCH_OPS then counts); anything else is judged untrusted.
    `allowance`: PyTorch ops the caller lets this candidate run, from what the caller trusts
    (the pipeline: the built-in plan of the module), never from the file; the static rules
    and the profiler check excuse exactly those, and the verdict records them."""
    origin = CandidateOrigin(origin)
    report = progress or (lambda _message: None)
    reference, candidate = Path(reference).resolve(), Path(candidate).resolve()
    seeds = fresh_seeds(max(options.seeds, 2))
    run_id = None
    if store is not None:
        try:
            module_name: str | None = resolve_module(reference, reference_module).name
        except ProblemError:
            module_name = reference_module
        run_id = store.start_run("verify", str(reference), module_name,
                                 {**asdict(options), "candidate": str(candidate), "seeds": seeds,
                                  "origin": origin.value,
                                  "allowance": allowance.to_json() if allowance else None})
    verdict = _protected(reference, candidate, tuple(secret_env), lambda protection: _verify(
        reference, candidate, reference_module, options, seeds, report, cancel, protection,
        origin, allowance))
    if store is not None and run_id is not None:
        store.add_artifact(run_id, "verdict", "verdict.json", verdict.to_json())
        store.finish_run(run_id, "succeeded", {"verdict": verdict.status,
                                               "codes": verdict.codes(), "seeds": seeds})
    return verdict


def _protected(reference: Path, candidate: Path, secret_env: tuple[str, ...],
               run: Callable[[Protection], Verdict]) -> Verdict:
    """The snapshot and hashes before anything runs, the checks of them after (protect.py)."""
    try:
        protection = Protection.begin(reference, candidate, secret_env)
    except SnapshotError as exc:
        return Verdict("could_not_verify", [Reason("reference_error", str(exc))])
    try:
        return protection.finish(run(protection))
    finally:
        protection.close()


def _verify(reference: Path, candidate: Path, module: str | None, options: VerifyOptions,
            seeds: list[int], report: Callable[[str], None],
            cancel: threading.Event | None, protection: Protection,
            origin: CandidateOrigin = CandidateOrigin.UNTRUSTED,
            allowance: TorchOpAllowance | None = None) -> Verdict:
    report("static checks")
    try:
        info = resolve_module(reference, module)
        static = check_files(candidate, reference, info.name, origin, allowance)
    except (ProblemError, OSError) as exc:
        return Verdict("could_not_verify", [Reason("reference_error", str(exc))], seeds=seeds)
    inputs = Inputs(static=static, seeds=seeds, timing_requested=options.timing)
    if set(static.codes()) & UNRUNNABLE:
        return assemble(inputs)
    if not info.has_inputs:
        return Verdict("could_not_verify", [Reason("reference_error",
                                                   info.missing_inputs_message())], seeds=seeds)
    deadline = time.monotonic() + options.timeout_s
    timing_on = options.timing and not static.rejected  # no point timing a rejected candidate
    device_arg = None  # the worker sees the chosen GPU as its default device

    def remaining() -> float:
        return max(deadline - time.monotonic(), MIN_TASK_TIMEOUT_S)

    stage_seconds: dict[str, float] = {}

    def timed(stage: str, task: str, args: dict, worker: StartedWorker,
              keep_open: bool = False) -> TaskOutcome:
        if not keep_open:
            idle.remove(worker)  # run_task closes it after its task
        start = time.monotonic()
        outcome = None
        try:
            outcome = run_task(task, args, remaining(), options.device, cancel, worker,
                               keep_open=keep_open)
            return outcome
        finally:
            stage_seconds[stage] = round(time.monotonic() - start, 3)
            # the worker's own breakdown (process start-up is the stage's remainder)
            sections = (outcome.result or {}).get("seconds") if outcome and outcome.ok else None
            for name, seconds in (sections or {}).items():
                stage_seconds[f"{stage}.{name}"] = seconds

    def finish() -> Verdict:
        verdict = assemble(inputs)
        verdict.stage_seconds = dict(stage_seconds)
        return verdict

    # Each candidate phase's worker is started (imports only, no user code) while the stage
    # before it runs, overlapping that stage's untimed start (build, first checks).  `idle`
    # holds the started workers not yet handed to a task, and the reference worker, which
    # judges the candidate's checks until the end: the end closes those.
    idle: list[StartedWorker] = []

    reference_copy = str(protection.snapshot.copy)  # loaded by both workers, never `reference`

    if not cuda_may_be_present():
        # no NVIDIA driver here: no worker could find a GPU (their start-up is seconds each)
        inputs.reference = TaskOutcome({"cuda": False})
        return finish()

    with tempfile.TemporaryDirectory(prefix="ks_verify_") as work_dir:

        def start_candidate_worker() -> StartedWorker:
            idle.append(StartedWorker(CANDIDATE_TASK, options.device,
                                      **protection.candidate_worker_options(work_dir)))
            protection.watch(idle[-1].client)
            return idle[-1]

        try:
            main_worker = start_candidate_worker()
            report("running the reference")
            judge = (SPARES.take(REFERENCE_TASK, options.device)
                     or StartedWorker(REFERENCE_TASK, options.device))
            idle.append(judge)
            if options.keep_spare_worker:
                # The next verification's reference worker imports torch and Inductor (~10 s
                # on an H100 machine) during all of this one, not only its last stage.
                SPARES.start(REFERENCE_TASK, options.device)
            inputs.reference = timed("reference", REFERENCE_TASK, {
                "path": reference_copy, "import_fallback": protection.import_fallback,
                "module": info.name, "seeds": seeds,
                "work_dir": work_dir, "shape_variants_count": options.shape_variants,
                "timing_on": timing_on, "compare_compile": options.compare_compile,
                "device": device_arg, "timing_budget_s": options.timing_budget_s,
                "precision": options.precision,
            }, judge, keep_open=True)
            ref = inputs.reference.result if inputs.reference.ok else None
            if not ref or not ref.get("cuda") or ref.get("nondeterministic") \
                    or ref.get("too_large") or _cancelled(cancel):
                return finish()
            cases = ref["cases"]
            variant_cases = [c for c in cases if c["variant"] is not None]
            common = {
                "path": str(candidate), "reference_path": reference_copy,
                "import_fallback": protection.import_fallback, "module": info.name,
                "work_dir": work_dir, "device": device_arg,
                "ref_mutates": ref["mutates_inputs"],
                "ref_aliases": ref["output_aliases_input"],
                "timing_budget_s": options.timing_budget_s,
                "judge": ref["judge"], "memory_plan": ref["memory_plan"],
                "precision": options.precision,
            }
            report("checking the candidate")
            # The variants phase is the same worker's second task: its results arrive after
            # the main phase's, so a crash on an odd shape cannot hide them.
            inputs.main = timed("candidate", CANDIDATE_TASK, {
                **common, "phase": "main", "cases": [c for c in cases if c["variant"] is None],
                "timing_on": timing_on, "timing_seeds": seeds,
                # a static rejection skips the timing, not the checks of what it would time
                "settings_checks": options.timing,
            }, main_worker, keep_open=bool(variant_cases))
            if variant_cases and _loaded(inputs.main) and not _cancelled(cancel):
                report(f"checking {len(variant_cases)} other input shapes")
                inputs.variants = timed("variants", CANDIDATE_TASK, {
                    **common, "phase": "variants", "cases": variant_cases, "timing_on": False,
                }, main_worker)
            protection.record_candidate(inputs.main, inputs.variants)
            if protection.candidate_results:
                protection.read_ledger(judge, options.device)
        finally:
            for worker in idle:
                EXITS.close_soon(worker.close)
            EXITS.wait()  # every worker of this verification, closing in parallel
    report("done")
    return finish()


def _loaded(outcome: TaskOutcome) -> bool:
    return outcome.ok and not (outcome.result or {}).get("load_failure")


def _cancelled(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()
