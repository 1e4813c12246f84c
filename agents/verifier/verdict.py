"""The Verifier's typed result: accepted / rejected with named reasons / could not verify.

Torch-free: the language server and the CLI import it.  `Verdict.to_json()` returns a plain dict
(the shape stored in the run store and sent in job results); `Verdict.from_json` reads it back.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kernelstitch.core.precision import float64_describes, timed_with

VerdictStatus = Literal["accepted", "rejected", "could_not_verify"]

# Stable snake_case codes of a rejection: scripts and the editor match on these.
REJECTION_CODES = frozenset(
    {
        "compile_error", "runtime_error", "crashed", "timeout", "wrong_output", "nan_or_inf",
        "shape_mismatch", "dtype_mismatch", "device_mismatch", "not_contiguous",
        "output_aliases_input", "output_reused_across_calls", "unwritten_output",
        "mutates_input", "shape_specialised", "behaviour_changes_after_warmup",
        "behaviour_changes_when_timed",
        "reuses_reference_op", "calls_reference_forward", "uses_torch_compile",
        "monkeypatches_runtime", "timer_tampering", "no_custom_kernel", "side_stream_work",
        "incomplete_on_return", "silent_fallback", "cached_output", "no_model_new",
        "hides_torch_ops", "unreadable_output", "dynamic_torch_lookup",
        # what the candidate is judged against was changed, or its judgement forged (protect.py)
        "reference_modified", "verifier_modified", "workspace_modified",
        "writes_outside_sandbox", "judge_bypassed",
    }
)
# The one check a candidate makes under the settings programs are timed under (PyTorch's
# defaults), its name's prefix: the judge compares it at the bound those settings allow, and the
# judge's ledger keeps such comparisons apart from the strict ones.
TIMING_SETTINGS_CHECK = "timing_settings"

# Codes of a could-not-verify verdict: nothing is wrong with the candidate as far as we know.
COULD_NOT_VERIFY_CODES = frozenset(
    {"no_gpu", "reference_error", "reference_nondeterministic", "cancelled", "verifier_error",
     "too_large"}
)

EXIT_CODES: dict[str, int] = {"accepted": 0, "rejected": 1, "could_not_verify": 2}


@dataclass(frozen=True)
class Reason:
    code: str
    message: str
    line: int | None = None  # 1-based line in the candidate file, when known
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckRecord:
    name: str
    passed: bool
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stat:
    """Milliseconds per call over `n` timed runs."""

    median: float
    p10: float
    p90: float
    n: int


@dataclass(frozen=True)
class Timings:
    eager_ms: Stat
    compiled_ms: Stat | None
    candidate_ms: Stat
    speedup_vs_eager: float
    speedup_vs_compiled: float | None
    significant_vs_eager: bool  # False: the difference is within noise
    significant_vs_compiled: bool
    # Under a reduced precision (the user's opt-in) eager and compiled were allowed it; these
    # are the fp32 eager time and the speed-up over it (None under fp32, where eager is).
    precision: str = "fp32"
    eager_fp32_ms: Stat | None = None
    speedup_vs_eager_fp32: float | None = None


@dataclass(frozen=True)
class PrecisionReport:
    """What a reduced precision cost on this module: the candidate's largest error from a
    float64 recomputation of the reference over every compared case (absolute, and relative to
    the float64 result's RMS), PyTorch's strict-fp32 error on the same cases, and the bound the
    Verifier applied (tolerances.py)."""

    precision: str
    rtol: float
    atol: float  # x RMS
    cases: int  # comparisons made against float64
    max_abs_error: float | None
    max_rel_error: float | None
    fp32_max_rel_error: float | None
    float64_missing: int = 0  # comparisons that fell back to the fp32 reference

    def sentence(self) -> str:
        """One line for the report: the accuracy price of the precision on this module."""
        if self.max_rel_error is None:
            return (f"{self.precision}: no float64 recomputation was possible "
                    f"({self.float64_missing} comparison(s) against the fp32 reference, bound "
                    f"rtol {self.rtol:g}, atol {self.atol:g} x RMS)")
        if not float64_describes(self.fp32_max_rel_error, self.atol):
            return (f"{self.precision}: the float64 recomputation is not this module's computation "
                    f"(PyTorch in fp32 differs from it by {self.fp32_max_rel_error:.2g} x RMS, as ours by "
                    f"{self.max_rel_error:.2g}: random draws such as training-mode dropout), so its error "
                    f"says nothing; judged against the fp32 reference, which drew the same, at the bound "
                    f"rtol {self.rtol:g}, atol {self.atol:g} x RMS")
        fp32 = (f"; PyTorch in fp32: {self.fp32_max_rel_error:.2g}"
                if self.fp32_max_rel_error is not None else "")
        return (f"{self.precision} costs this module a max error of {self.max_rel_error:.2g} x RMS "
                f"({self.max_abs_error:.3g} absolute) against float64 over {self.cases} case(s)"
                f"{fp32}; bound rtol {self.rtol:g}, atol {self.atol:g} x RMS")


@dataclass
class Verdict:
    status: VerdictStatus
    reasons: list[Reason] = field(default_factory=list)
    checks: list[CheckRecord] = field(default_factory=list)
    timings: Timings | None = None
    seeds: list[int] = field(default_factory=list)
    shapes: list[Any] = field(default_factory=list)  # input shapes of every checked case
    device: str | None = None
    declared_torch_ops: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The PyTorch ops the caller allowed this candidate and where that came from
    # (declaration.TorchOpAllowance.to_json(): {"ops", "source", "calls"}); None: no allowance.
    torch_op_allowance: dict[str, Any] | None = None
    # Wall seconds of each worker task (start-up included): where verification time goes.
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # What the problem's sizes let the checks hold on the GPU (memory_plan.MemoryPlan).
    memory_plan: dict[str, Any] | None = None
    # What the candidate was judged against (protect.py): the sha256 of the reference file as
    # snapshotted before any candidate code ran, of the verifier's own source, and the
    # protection the candidate's processes ran under ("write guard: landlock ABI v7, ...").
    reference_sha256: str | None = None
    verifier_sha256: str | None = None
    write_guard: str | None = None
    precision: PrecisionReport | None = None  # a reduced precision's measured error
    # GPU microseconds a forward spends in each of the candidate's own kernels: the median over
    # the profiled strict-fp32 calls (a kernel launched several times a call: summed)
    own_kernel_us: dict[str, float] = field(default_factory=dict)

    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def dumps(self, indent: int | None = None) -> str:
        return json.dumps(self.to_json(), indent=indent)

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> Verdict:
        if isinstance(data, str):
            data = json.loads(data)
        timings = data.get("timings")
        return cls(
            status=data["status"],
            reasons=[Reason(**r) for r in data.get("reasons", [])],
            checks=[CheckRecord(**c) for c in data.get("checks", [])],
            timings=_timings_from_json(timings) if timings else None,
            seeds=list(data.get("seeds", [])),
            shapes=list(data.get("shapes", [])),
            device=data.get("device"),
            declared_torch_ops=dict(data.get("declared_torch_ops", {})),
            notes=list(data.get("notes", [])),
            torch_op_allowance=data.get("torch_op_allowance"),
            stage_seconds=dict(data.get("stage_seconds", {})),
            memory_plan=data.get("memory_plan"),
            reference_sha256=data.get("reference_sha256"),
            verifier_sha256=data.get("verifier_sha256"),
            write_guard=data.get("write_guard"),
            precision=PrecisionReport(**data["precision"]) if data.get("precision") else None,
            own_kernel_us=dict(data.get("own_kernel_us", {})),
        )


def _timings_from_json(data: dict[str, Any]) -> Timings:
    compiled = data.get("compiled_ms")
    return Timings(
        eager_ms=Stat(**data["eager_ms"]),
        compiled_ms=Stat(**compiled) if compiled else None,
        candidate_ms=Stat(**data["candidate_ms"]),
        speedup_vs_eager=data["speedup_vs_eager"],
        speedup_vs_compiled=data.get("speedup_vs_compiled"),
        significant_vs_eager=data["significant_vs_eager"],
        significant_vs_compiled=data["significant_vs_compiled"],
        precision=data.get("precision", "fp32"),
        eager_fp32_ms=Stat(**data["eager_fp32_ms"]) if data.get("eager_fp32_ms") else None,
        speedup_vs_eager_fp32=data.get("speedup_vs_eager_fp32"),
    )


def _stat_cell(stat: Stat | None) -> str:
    if stat is None:
        return "n/a"
    return f"{stat.median:.4f} ms (p10 {stat.p10:.4f}, p90 {stat.p90:.4f}, n={stat.n})"


def _speedup_text(speedup: float | None, significant: bool) -> str:
    if speedup is None:
        return "n/a"
    return f"{speedup:.2f}x" + ("" if significant else " (within noise)")


def render_verdict_markdown(verdict: Verdict) -> str:
    """The verification section of a report: status, reasons with lines, timings, seeds."""
    title = {
        "accepted": "**Accepted**", "rejected": "**Rejected**",
        "could_not_verify": "**Could not verify**",
    }[verdict.status]
    lines = [f"Verdict: {title}" + (f" on {verdict.device}" if verdict.device else ""), ""]
    if verdict.reasons:
        lines.append("| code | line | reason |")
        lines.append("|---|---|---|")
        for r in verdict.reasons:
            message = r.message.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{r.code}` | {r.line or ''} | {message} |")
        lines.append("")
    t = verdict.timings
    if t is not None:
        allowed = timed_with(t.precision)
        lines += [
            "| implementation | time per call |",
            "|---|---|",
            *([f"| PyTorch eager (fp32) | {_stat_cell(t.eager_fp32_ms)} |"]
              if t.eager_fp32_ms is not None else []),
            f"| PyTorch eager{allowed} | {_stat_cell(t.eager_ms)} |",
            f"| torch.compile{allowed} | {_stat_cell(t.compiled_ms)} |",
            f"| candidate | {_stat_cell(t.candidate_ms)} |",
            "",
            *([f"Speed-up vs eager in fp32: {t.speedup_vs_eager_fp32:.2f}x (precision "
               f"and fusion together)."] if t.speedup_vs_eager_fp32 is not None else []),
            f"Speed-up vs eager{allowed}: "
            f"{_speedup_text(t.speedup_vs_eager, t.significant_vs_eager)}; "
            f"vs torch.compile{allowed}: "
            f"{_speedup_text(t.speedup_vs_compiled, t.significant_vs_compiled)}.",
            "",
        ]
    if verdict.precision is not None:
        lines += [f"Precision: {verdict.precision.sentence()}.", ""]
    if verdict.checks:
        passed = sum(1 for c in verdict.checks if c.passed)
        lines.append(f"Checks passed: {passed}/{len(verdict.checks)}.")
    if verdict.declared_torch_ops:
        ops = ", ".join(f"`{k}` ({v})" for k, v in sorted(verdict.declared_torch_ops.items()))
        lines.append(f"Declared PyTorch calls: {ops}.")
    allowance = verdict.torch_op_allowance
    if allowance is not None:
        ops = ", ".join(f"`{k}`" for k in sorted(allowance.get("ops", {}))) or "none"
        lines.append(f"PyTorch calls allowed to this candidate: {ops} "
                     f"(from {allowance.get('source') or 'an unnamed source'}).")
    if verdict.seeds:
        lines.append(f"Seeds (to reproduce): {', '.join(str(s) for s in verdict.seeds)}.")
    if verdict.reference_sha256:
        judged = f"Judged against: reference sha256 `{verdict.reference_sha256[:16]}` " \
                 "(a snapshot taken before any candidate code ran)"
        if verdict.verifier_sha256:
            judged += f", verifier sha256 `{verdict.verifier_sha256[:16]}`"
        lines.append(judged + (f"; {verdict.write_guard}." if verdict.write_guard else "."))
    for note in verdict.notes:
        lines.append(f"- note: {note}")
    return "\n".join(lines).rstrip() + "\n"
