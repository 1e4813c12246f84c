"""One problem's benchmark result, as stored in the run store and written to results.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kernelstitch.agents.job_protocol import JobResult
from kernelstitch.agents.verifier.tolerances import PRECISION_TOLERANCES
from kernelstitch.core.precision import float64_describes, timing_settings_label

# accepted / rejected / could_not_verify come from the Verifier; "kept": the measured search
# found nothing faster than the original, so the original is what is delivered (1.00x vs eager,
# correct by definition); the rest come from the harness.
STATUSES = ("accepted", "kept", "rejected", "could_not_verify", "failed", "timeout",
            "cancelled")
# The measurements a result may carry only for an accepted candidate.
MEASUREMENTS = ("eager_ms", "compiled_ms", "candidate_ms", "speedup_vs_eager",
                "speedup_vs_compiled", "significant_vs_eager", "significant_vs_compiled",
                "eager_spread_ms", "compiled_spread_ms", "candidate_spread_ms",
                "roofline_fraction", "roofline_fraction_eager", "bandwidth_fraction",
                "kernel_bandwidth_fraction",
                "eager_fp32_ms", "speedup_vs_eager_fp32", "max_rel_error", "fp32_max_rel_error")
# Plan steps whose kernels are memory-bound by design: a plan made only of these moves
# `plan_bytes` through DRAM, so bytes / time / measured bandwidth says how close to the memory
# roofline our kernels run.
MEMORY_BOUND_TECHNIQUES = frozenset({"fused_elementwise", "fused_reduction"})


def memory_bound_step_bytes(plan: dict[str, Any] | None) -> dict[str, int]:
    """Each memory-bound step's estimated DRAM bytes by its kernel name (`ks_s3_softmax`: the
    step's kernels are that name or start with it and `_`), whatever else the plan holds."""
    found: dict[str, int] = {}
    for s in (plan or {}).get("steps") or []:
        name = (s.get("spec") or {}).get("name")
        if s.get("technique") in MEMORY_BOUND_TECHNIQUES and s.get("estimated_bytes") and name:
            found[str(name)] = int(s["estimated_bytes"])
    return found


def memory_bound_bytes(plan: dict[str, Any] | None) -> int | None:
    """The plan's estimated DRAM bytes when every step is a memory-bound kernel of ours."""
    steps = (plan or {}).get("steps") or []
    if not steps or any(s.get("technique") not in MEMORY_BOUND_TECHNIQUES
                        or not s.get("estimated_bytes") for s in steps):
        return None
    return int(sum(s["estimated_bytes"] for s in steps))


@dataclass
class ProblemOutcome:
    problem: str  # display name: "level1/19_ReLU" (level folders) or the file stem
    status: str  # one of STATUSES
    message: str
    reasons: list[str] = field(default_factory=list)  # verdict reason codes
    # "code: message" of each reason (clipped): a rejection in a results file says why.
    reason_details: list[str] = field(default_factory=list)
    eager_ms: float | None = None  # medians; the spreads below are [p10, p90]
    compiled_ms: float | None = None
    candidate_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compiled: float | None = None
    significant_vs_eager: bool | None = None
    plan_steps: list[str] = field(default_factory=list)
    level: str | None = None
    compiled: bool | None = None  # the candidate's extension built; None: not tried (no GPU...)
    compile_message: str = ""  # compiler output (tail) when compiled is False
    eager_spread_ms: list[float] | None = None
    compiled_spread_ms: list[float] | None = None
    candidate_spread_ms: list[float] | None = None
    significant_vs_compiled: bool | None = None
    # From the profile (--profile): the reference's roofline floor over our / eager's time.
    roofline_fraction: float | None = None
    roofline_fraction_eager: float | None = None
    # Memory-bound plans only: plan_bytes / our median time / the DRAM bandwidth measured on
    # this GPU at the start of the run (a device-to-device copy).
    plan_bytes: int | None = None
    bandwidth_fraction: float | None = None
    # Any delivered plan: its memory-bound steps' estimated bytes (memory_bound_step_bytes), the
    # GPU microseconds of each of our kernels in a forward (the Verifier's profile, verdict
    # own_kernel_us), and from both the memory-bound kernels' achieved fraction of the DRAM
    # bandwidth (metrics.set_bandwidth_fractions): issue 22's ">= 80%" target, whatever the
    # library calls around them take.
    kernel_bytes: dict[str, int] = field(default_factory=dict)
    kernel_us: dict[str, float] = field(default_factory=dict)
    kernel_bandwidth_fraction: float | None = None
    device: str | None = None  # GPU name the Verifier reported
    gpu: int | None = None  # GPU index it was measured on (None: the default device)
    cuda_visible_devices: str | None = None  # as the measuring processes saw it
    prepare_s: float | None = None
    measure_s: float | None = None
    time_limit_s: float | None = None  # the limit it ran under (a timeout is reused only below it)
    reused: bool = False  # taken from the run store instead of being run again
    # The key it is stored under (problem content, settings, GPU model, compiler fingerprint):
    # a results.json alone can resume a run (`--resume-from`).
    resume_key: str | None = None
    verify_stage_s: dict[str, float] = field(default_factory=dict)  # the Verifier's worker tasks
    # Seconds of each prepare stage: planning (capture + plan), coding, reporting, build.
    prepare_stage_s: dict[str, float] = field(default_factory=dict)
    # KernelBench's published H100 times of this problem (baseline_H100_Modal, mean ms), set at
    # report time when the problem comes from a KernelBench tree: ours vs theirs checks the machine.
    published_eager_ms: float | None = None
    published_compiled_ms: float | None = None
    # The measured search: variant -> median ms in the shared timing run ("original" included),
    # and what was delivered ("ours:<variant>" or "original").
    variants_ms: dict[str, float | None] = field(default_factory=dict)
    delivered: str | None = None
    # Why a variant timed faster than what was delivered was not delivered (its verification's
    # reasons, or the search's time running out): level2/93 delivered its CUDA-graph variant
    # at 2.9 ms over a 2.0 ms one with nothing in results.json to say why (2026-11-27).
    passed_over: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Under a reduced precision (--precision): eager_ms / compiled_ms were timed with it
    # allowed; these are the fp32 eager time, the speed-up over it, and the delivered
    # program's largest error from float64 (x RMS) beside PyTorch fp32's (verdict.precision).
    precision: str = "fp32"
    # What programs and baselines were timed under (core/precision.timing_settings_label); None
    # in results from before 2026-11-27 (638c584), which timed cuDNN with TF32 off.
    timed_under: str | None = None
    eager_fp32_ms: float | None = None
    speedup_vs_eager_fp32: float | None = None
    max_rel_error: float | None = None
    fp32_max_rel_error: float | None = None

    @property
    def correct(self) -> bool:
        return self.status in ("accepted", "kept")

    def float64_describes(self) -> bool:
        """Whether the float64 error stands for this module (not for random draws: see
        kernelstitch.core.precision.FLOAT64_SHARE_OF_BOUND) under the run's precision."""
        bound = PRECISION_TOLERANCES.get(self.precision, PRECISION_TOLERANCES["fp32"]).atol
        return float64_describes(self.fp32_max_rel_error, bound)

    def drop_measurements_unless_accepted(self) -> None:
        """A rejected, unverified, failed, timed-out or cancelled problem reports no timings or
        speedups (whatever a rejected verdict or an interrupted worker left behind)."""
        if not self.correct:
            for name in MEASUREMENTS:
                setattr(self, name, None)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "correct": self.correct}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemOutcome:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_result(cls, problem: str, result: JobResult) -> ProblemOutcome:
        """From a generate or verify JobResult: its verdict's status, reasons and timings."""
        outcome = cls(problem=problem, status="failed", message=result.message)
        outcome.apply_result(result)
        return outcome

    def apply_result(self, result: JobResult) -> None:
        self.message = result.message
        steps = [f"{s.get('technique')}" for s in (result.plan or {}).get("steps", [])]
        if steps:
            self.plan_steps = steps
            self.plan_bytes = memory_bound_bytes(result.plan)
            self.kernel_bytes = memory_bound_step_bytes(result.plan)
        verdict = result.verdict or {}
        self.kernel_us = dict(verdict.get("own_kernel_us") or {})
        self.status = verdict.get(
            "status", "failed" if result.status != "succeeded" else "could_not_verify")
        self.reasons = [r.get("code", "?") for r in verdict.get("reasons", [])]
        self.reason_details = [f"{r.get('code', '?')}: {str(r.get('message', ''))[:400]}"
                               for r in verdict.get("reasons", [])]
        self.device = verdict.get("device") or self.device
        self.verify_stage_s = dict(verdict.get("stage_seconds") or {})
        if "compile_error" in self.reasons:
            self.compiled = False
        elif verdict.get("status") in ("accepted", "rejected") and verdict.get("timings"):
            self.compiled = True  # it ran on the GPU, so it built
        timings = verdict.get("timings") or {}
        for name in ("eager", "compiled", "candidate"):
            stat = timings.get(f"{name}_ms")
            if isinstance(stat, dict):
                setattr(self, f"{name}_ms", stat.get("median"))
                if stat.get("p10") is not None and stat.get("p90") is not None:
                    setattr(self, f"{name}_spread_ms", [stat["p10"], stat["p90"]])
        for key in ("speedup_vs_eager", "speedup_vs_compiled", "significant_vs_eager",
                    "significant_vs_compiled", "speedup_vs_eager_fp32"):
            if key in timings:
                setattr(self, key, timings[key])
        self.precision = timings.get("precision") or self.precision
        if timings:
            self.timed_under = timing_settings_label(self.precision)
        self.eager_fp32_ms = (timings.get("eager_fp32_ms") or {}).get("median")
        report = verdict.get("precision") or {}
        self.max_rel_error = report.get("max_rel_error")
        self.fp32_max_rel_error = report.get("fp32_max_rel_error")
        self.drop_measurements_unless_accepted()
        self._apply_selection(result.selection or {}, timings)

    def time_kept_original_from_search(self) -> None:
        """A kept original whose record verification stopped before timing (a static rejection):
        the search's own time of the original stands for eager, and what is delivered is the
        original, 1.00x (left out, a kept problem would lift the geomean; vs torch.compile stays
        unknown).  merge.py applies it to results written before it existed."""
        original = (self.variants_ms or {}).get("original")
        if self.status == "kept" and self.eager_ms is None and original:
            self.eager_ms = self.candidate_ms = original
            self.candidate_spread_ms = self.eager_spread_ms = None
            self.speedup_vs_eager = 1.0

    def _apply_selection(self, selection: dict[str, Any], timings: dict[str, Any]) -> None:
        if not selection:
            return
        original = (selection.get("original_ms") or {}).get("median")
        rows = [selection.get("original_graph"), *selection.get("variants", [])]
        self.variants_ms = {"original": original, **{
            v["name"]: (v.get("time_ms") or {}).get("median") for v in rows if v}}
        winner = selection.get("winner") if selection.get("decision") == "deliver" else None
        self.passed_over = _passed_over(rows, self.variants_ms,
                                        self.variants_ms.get(winner) if winner else original)
        if winner:
            self.delivered = f"ours:{winner}"
            return
        # The original is delivered: ours is the eager time, the baselines those the record
        # verification measured (whatever its verdict on the variant it checked).
        self.delivered, self.status, self.reasons = "original", "kept", []
        self.kernel_bytes, self.kernel_us = {}, {}  # they were the recorded variant's
        self.reason_details = []  # they were about the variant verified for the record
        eager, compiled = timings.get("eager_ms") or {}, timings.get("compiled_ms") or {}
        fp32 = timings.get("eager_fp32_ms") or {}
        self.eager_ms = eager.get("median")
        self.compiled_ms = compiled.get("median")
        self.max_rel_error = None  # nothing of ours is delivered (fp32_max_rel_error: PyTorch's)
        if fp32.get("median"):
            # a reduced precision: the user's module stays as written (fp32, PyTorch's defaults), and the
            # baselines that were allowed the precision may beat it
            self.candidate_ms = self.eager_fp32_ms = fp32["median"]
            self.candidate_spread_ms = ([fp32["p10"], fp32["p90"]]
                                        if fp32.get("p10") is not None else None)
            self.speedup_vs_eager_fp32 = 1.0
        else:
            self.candidate_ms = self.eager_ms
            self.candidate_spread_ms = self.eager_spread_ms  # what is delivered is the original
        self.speedup_vs_eager = (self.eager_ms / self.candidate_ms
                                 if self.eager_ms and self.candidate_ms else None)
        self.time_kept_original_from_search()
        if self.timed_under is None and self.eager_ms is not None:
            # the search timed the original under the same settings as a verification would
            # (a report would otherwise count it among the runs from before those settings)
            self.timed_under = timing_settings_label(self.precision)
        self.speedup_vs_compiled = (self.compiled_ms / self.candidate_ms
                                    if self.compiled_ms and self.candidate_ms else None)
        self.significant_vs_eager = self.significant_vs_compiled = False


def _passed_over(rows: list[dict[str, Any] | None], medians: dict[str, float | None],
                 delivered_ms: float | None) -> dict[str, str]:
    """The variants timed faster than what was delivered (`medians`: variants_ms), each with the
    note saying why it was not delivered (a verification's reasons, the search's time spent)."""
    if delivered_ms is None:
        return {}
    return {v["name"]: str(v["note"]) for v in rows
            if v and v.get("note") and medians.get(v["name"]) is not None and medians[v["name"]] < delivered_ms}
