"""Turn the static report and the workers' raw results into a Verdict (torch-free).

Acceptance needs positive evidence: every planned check ran and passed, the profiler saw the
candidate's own kernels in every profiled call, and nothing was tampered with.  Anything missing
is "could not verify", never "accepted".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from kernelstitch.agents.verifier.runner import TaskOutcome
from kernelstitch.agents.verifier.static_checks import StaticReport
from kernelstitch.agents.verifier.stats import build_timings, percentile
from kernelstitch.agents.verifier.trace_summary import CallProfile, reused_reference_ops
from kernelstitch.agents.verifier.verdict import CheckRecord, Reason, Verdict

from kernelstitch.core.precision import precision_mode

# Device-wide synchronisation after the end event should find an idle GPU.  More than this
# (median over the timed runs) means work the current stream's events did not see.
UNACCOUNTED_MIN_MS = 0.03
UNACCOUNTED_FRACTION = 0.5
PROFILED_CALLS = 2
# How a worker-level failure of the candidate maps to a rejection code.
WORKER_ERROR_CODES = {"timeout": "timeout", "crash": "crashed", "cuda_fatal": "crashed",
                      "oom": "runtime_error", "exception": "runtime_error",
                      "protocol": "crashed", "startup": "crashed"}


@dataclass
class Inputs:
    """Everything assemble() looks at."""

    static: StaticReport
    seeds: list[int]
    reference: TaskOutcome | None = None
    main: TaskOutcome | None = None
    variants: TaskOutcome | None = None
    timing_requested: bool = True
    notes: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.reasons: list[Reason] = list(inputs.static.reasons)
        self.unverified: list[Reason] = []
        self.checks: list[CheckRecord] = [CheckRecord(
            "static", not inputs.static.reasons, {"codes": inputs.static.codes()})]
        self.notes: list[str] = list(inputs.static.notes) + list(inputs.notes)

    def reject(self, code: str, message: str, line: int | None = None, **detail: Any) -> None:
        self.reasons.append(Reason(code, message, line, detail))

    def cannot(self, code: str, message: str) -> None:
        self.unverified.append(Reason(code, message))


def _worker_failure(b: _Builder, outcome: TaskOutcome, what: str) -> None:
    if outcome.error_kind == "cancelled":
        b.cannot("cancelled", f"cancelled while {what}")
        return
    code = WORKER_ERROR_CODES.get(outcome.error_kind or "", "runtime_error")
    b.reject(code, f"{what}: {outcome.error_message[:1500]}", kind=outcome.error_kind)


def _case_text(check: dict[str, Any]) -> str:
    shapes = check.get("shapes")
    return f"seed {check.get('seed')}" + (f", input shapes {shapes}" if shapes else "")


def _main_checks(b: _Builder, result: dict[str, Any], uses_side_streams: bool) -> bool:
    """Add the main phase's reasons; True when every check passed."""
    for failure in result.get("tamper", []):
        b.reject(failure["code"], failure["message"], **failure.get("detail", {}))
    load = result.get("load_failure")
    if load:
        detail = dict(load.get("detail", {}))
        line = detail.pop("line", None)
        b.reject(load["code"], load["message"], line, **detail)
        return False
    all_passed = True
    for check in result.get("checks", []):
        b.checks.append(CheckRecord(check["name"], check["passed"],
                                    {"seed": check.get("seed"), "shapes": check.get("shapes"),
                                     "codes": [f["code"] for f in check["failures"]]}))
        all_passed &= check["passed"]
        for failure in check["failures"]:
            code = failure["code"]
            if code == "judge_error":  # ours, not the candidate's
                b.cannot("verifier_error", f"{failure['message']} ({_case_text(check)})")
                continue
            if code == "incomplete_on_return" and uses_side_streams:
                code = "side_stream_work"
            b.reject(code, f"{failure['message']} ({_case_text(check)})", seed=check.get("seed"),
                     check=check["name"], **failure.get("detail", {}))
    if result.get("fatal"):
        b.reject("crashed", f"the CUDA context died: {result['fatal'][:1000]}")
        all_passed = False
    return all_passed


def _profile_checks(b: _Builder, result: dict[str, Any], reference_ops: list[str]) -> None:
    profile = result.get("profile")
    if not profile:
        b.cannot("verifier_error", "the profiler did not run, so the candidate's own kernels "
                 "could not be confirmed")
        return
    calls = profile.get("calls", [])
    if len(calls) < PROFILED_CALLS:
        b.cannot("verifier_error", f"the profiler captured {len(calls)} of {PROFILED_CALLS} calls")
    # Library kernels count only when the candidate's native source calls the library itself.
    calls_libraries = bool(b.inputs.static.library_api_calls)
    for call in calls:
        # The candidate's own work: kernels it wrote, or library kernels (its cuBLASLt GEMM) its
        # native code launched directly, outside every PyTorch op (trace_summary).
        own = call.get("own_kernels", [])
        library = call.get("library_calls", []) if calls_libraries else []
        b.checks.append(CheckRecord(f"profile:call{call['index']}", bool(own or library),
                                    {"own_kernels": own, "library_calls": library,
                                     "kernels": call.get("kernels", [])}))
        if not own and not library:
            seen = ", ".join(call.get("kernels", [])[:5]) or "none"
            b.reject("no_custom_kernel", f"profiled call {call['index']} ran none of the "
                     "candidate's own GPU kernels and called no library itself (outside "
                     f"PyTorch's ops) (kernels seen: {seen})")
    _same_kernels_when_timed(b, calls)
    profiles = [CallProfile(c["index"], c.get("kernels", []), c.get("streams", []),
                            [(op, tuple(anc)) for op, anc in c.get("ops", [])]) for c in calls]
    # Only a declaration the static report honoured (the built-in coder's own, bound to this
    # file, declaration.py) and the allowance the caller granted excuse an op; a candidate's
    # own claims are ignored.
    static = b.inputs.static
    reused = reused_reference_ops(profiles, set(reference_ops), static.excused_torch_ops)
    if reused:
        allowed = (f"; allowed here: {', '.join(static.allowance.ops) or 'none'}"
                   if static.allowance is not None else "")
        b.reject("reuses_reference_op", f"forward dispatches PyTorch compute ops the reference "
                 f"uses, or ops computing the same: {', '.join(reused)} (only the built-in "
                 "coder's own bound KERNELSTITCH_TORCH_OPS, or the ops its caller allows, "
                 f"excuse a PyTorch call{allowed})", ops=reused)


def _same_kernels_when_timed(b: _Builder, calls: list[dict[str, Any]]) -> None:
    """The calls profiled under the timing settings (after the strict ones) must run the same
    kernels of the candidate's own and the same libraries it launches itself: the check under
    those settings allows TF32's error wherever the original has convolutions (cuDNN's kernel,
    TF32 or not, is the layout's and shape's choice), and a program must not use that room to
    switch its own work (an fp32 GEMM to a TF32 one) only while timed.  cuDNN kernels PyTorch's
    ops launch may differ (they are in neither list).  A CUDA-graph program captures again when
    the settings change, its warm-up launching its cuBLASLt GEMMs directly; that happens in each
    profile's throwaway first call (gpu_common.profile_calls), so both profiles see replays."""
    strict, timed = calls[:PROFILED_CALLS], calls[PROFILED_CALLS:]
    if not strict or not timed:
        return
    for key, what in (("own_kernels", "kernels of its own"),
                      ("library_calls", "library kernels it launches itself")):
        before = set().union(*(set(c.get(key, [])) for c in strict))
        after = set().union(*(set(c.get(key, [])) for c in timed))
        if before != after:
            changed = sorted(after - before) + sorted(before - after)
            b.reject("behaviour_changes_when_timed", f"under the timing settings (PyTorch's "
                     f"defaults) the candidate runs other {what} than in strict fp32: "
                     f"{', '.join(k[:80] for k in changed[:4])}")


def _unaccounted_work(b: _Builder, main_timing: dict[str, Any] | None) -> bool:
    if not main_timing or not main_timing.get("unaccounted_ms"):
        return False
    gap = percentile(sorted(main_timing["unaccounted_ms"]), 50)
    own = percentile(sorted(main_timing["samples_ms"]), 50)
    if gap > max(UNACCOUNTED_MIN_MS, UNACCOUNTED_FRACTION * own):
        b.reject("side_stream_work", f"after the timed call's end event, the GPU still had "
                 f"{gap:.3f} ms of work (median; the call itself measured {own:.3f} ms): work "
                 "runs outside the current stream and escapes the timer",
                 unaccounted_ms=gap, event_ms=own)
        return True
    return False


def _variant_checks(b: _Builder, outcome: TaskOutcome, main_passed: bool) -> None:
    if not outcome.ok:
        if outcome.error_kind == "cancelled":
            b.cannot("cancelled", "cancelled while checking other input shapes")
        elif main_passed:
            b.reject("shape_specialised", "correct for the problem's input shapes, but "
                     f"failed on other valid shapes ({outcome.error_kind}): "
                     f"{outcome.error_message[:800]}", kind=outcome.error_kind)
        else:
            _worker_failure(b, outcome, "checking other input shapes")
        return
    result = outcome.result or {}
    for failure in result.get("tamper", []):
        b.reject(failure["code"], failure["message"])
    if result.get("load_failure"):
        b.cannot("verifier_error", "the candidate loaded once but not a second time: "
                 f"{result['load_failure']['message'][:500]}")
    for check in result.get("checks", []):
        b.checks.append(CheckRecord(check["name"], check["passed"],
                                    {"seed": check.get("seed"), "shapes": check.get("shapes"),
                                     "codes": [f["code"] for f in check["failures"]]}))
        if check["passed"]:
            continue
        judge_errors = [f for f in check["failures"] if f["code"] == "judge_error"]
        for failure in judge_errors:  # ours, not the candidate's
            b.cannot("verifier_error", f"{failure['message']} ({_case_text(check)})")
        if len(judge_errors) == len(check["failures"]):
            continue
        first = next(f for f in check["failures"] if f["code"] != "judge_error")
        if main_passed:
            b.reject("shape_specialised", f"correct for the problem's input shapes, but not for "
                     f"input shapes {check.get('shapes')}: {first['message']}",
                     seed=check.get("seed"), underlying=[f["code"] for f in check["failures"]])
        else:
            for failure in check["failures"]:
                if failure["code"] != "judge_error":
                    b.reject(failure["code"], f"{failure['message']} ({_case_text(check)})")
    if result.get("fatal"):
        code = "shape_specialised" if main_passed else "crashed"
        b.reject(code, f"the CUDA context died on other input shapes: {result['fatal'][:800]}")


def _dedupe(reasons: list[Reason]) -> list[Reason]:
    """One reason per code (the first, with a count); static ones keep one per line."""
    kept: dict[tuple[str, int | None], Reason] = {}
    counts: dict[tuple[str, int | None], int] = {}
    for reason in reasons:
        key = (reason.code, reason.line if reason.line is not None else None)
        if reason.line is None:
            key = (reason.code, None)
        counts[key] = counts.get(key, 0) + 1
        kept.setdefault(key, reason)
    out = []
    for key, reason in kept.items():
        if counts[key] > 1:
            reason = Reason(reason.code, reason.message, reason.line,
                            {**reason.detail, "occurrences": counts[key]})
        out.append(reason)
    return out


def _timings(b: _Builder, reference: dict[str, Any] | None, main: dict[str, Any] | None):
    ref_timing = (reference or {}).get("timing")
    cand_timing = (main or {}).get("timing")
    if not ref_timing or not cand_timing or not cand_timing.get("samples_ms"):
        return None
    compiled = ref_timing.get("compiled")
    eager_fp32 = ref_timing.get("eager_fp32")
    return build_timings(ref_timing["eager"]["samples_ms"],
                         compiled["samples_ms"] if compiled else None,
                         cand_timing["samples_ms"], ref_timing.get("precision", "fp32"),
                         eager_fp32["samples_ms"] if eager_fp32 else None)


def assemble(inputs: Inputs) -> Verdict:
    b = _Builder(inputs)
    ref = inputs.reference.result if inputs.reference and inputs.reference.ok else None
    main_result = inputs.main.result if inputs.main and inputs.main.ok else None
    if inputs.reference is not None and not inputs.reference.ok:
        kind = inputs.reference.error_kind
        code = "cancelled" if kind == "cancelled" else "reference_error"
        b.cannot(code, f"the reference could not be run ({kind}): "
                 f"{inputs.reference.error_message[:1000]}")
    elif ref is not None and not ref.get("cuda"):
        b.cannot("no_gpu", "no CUDA GPU was found: only the static checks ran")
    elif ref is not None and ref.get("too_large"):
        b.cannot("too_large", ref["too_large"])
    elif ref is not None and ref.get("nondeterministic"):
        b.cannot("reference_nondeterministic", "the reference gives different outputs for the "
                 f"same inputs ({ref['nondeterministic'][:300]}): outputs cannot be compared")
    elif inputs.reference is None and not b.reasons:
        b.cannot("verifier_error", "the dynamic checks did not run")
    if ref is not None:
        b.notes += ref.get("notes", [])
    main_passed = False
    if inputs.main is not None and not inputs.main.ok:
        _worker_failure(b, inputs.main, "running the candidate")
    elif main_result is not None:
        b.notes += main_result.get("notes", [])
        main_passed = _main_checks(b, main_result, inputs.static.uses_streams)
        if not main_result.get("load_failure"):
            _profile_checks(b, main_result, (ref or {}).get("reference_ops", []))
            _unaccounted_work(b, main_result.get("timing"))
            # every main case of the reference's own list (each seed, and the wide-range case
            # under a reduced precision) plus the re-check of the first, and with timing the
            # check under the timing's settings (none under `strict`: they are the checks')
            main_cases = [c["id"] for c in (ref or {}).get("cases", []) if c.get("variant") is None]
            ref_timing = (ref or {}).get("timing") or {}
            under_timing = bool(ref_timing) and not precision_mode(
                ref_timing.get("precision")).timed_tf32_off
            expected = max(len(main_cases), len(inputs.seeds)) + 1 + under_timing
            ran = len(main_result.get("checks", []))
            checked = {c.get("case") for c in main_result.get("checks", [])}
            missing = [case for case in main_cases if case not in checked]
            if (ran < expected or missing) and not b.reasons:
                b.cannot("verifier_error", f"only {ran} of {expected} checks ran"
                         + (f" (never checked: {', '.join(missing)})" if missing else ""))
    elif ref is not None and ref.get("cuda") and not ref.get("nondeterministic") \
            and not ref.get("too_large"):
        if not b.reasons:
            b.cannot("verifier_error", "the candidate was not run")
    if inputs.variants is not None:
        _variant_checks(b, inputs.variants, main_passed)
    elif ref is not None and ref.get("variants") and main_passed and not b.reasons:
        b.cannot("verifier_error", "the other input shapes were not checked")
    if main_passed and not inputs.static.reasons and not b.reasons:
        b.checks.append(CheckRecord("runtime_untouched", True))
    reasons = _dedupe(b.reasons)
    if reasons:
        status, final = "rejected", reasons
        b.notes += [f"also: {r.message}" for r in b.unverified if r.code != "no_gpu"]
        if any(r.code == "no_gpu" for r in b.unverified):
            b.notes.append("no CUDA GPU was found: only the static checks ran")
    elif b.unverified:
        status, final = "could_not_verify", _dedupe(b.unverified)
    else:
        status, final = "accepted", []
    timings = _timings(b, ref, main_result) if status == "accepted" else None
    if status == "accepted" and inputs.timing_requested and timings is None:
        b.notes.append("timing was requested but did not produce results")
    cases = (ref or {}).get("cases", [])
    allowance = inputs.static.allowance
    return Verdict(
        status=status, reasons=final, checks=b.checks, timings=timings, seeds=list(inputs.seeds),
        shapes=[c.get("input_shapes") for c in cases], device=(ref or {}).get("device_name"),
        declared_torch_ops=dict(inputs.static.declared_torch_ops), notes=_unique(b.notes),
        memory_plan=(ref or {}).get("memory_plan"),
        torch_op_allowance=allowance.to_json() if allowance is not None else None,
        own_kernel_us=_own_kernel_us(main_result) if status == "accepted" else {},
    )


def _own_kernel_us(result: dict[str, Any] | None) -> dict[str, float]:
    """Each own kernel's GPU time a forward, the median over the strict-fp32 profiled calls (the
    ones under the timing settings follow them): what the bench divides its bytes by."""
    calls = ((result or {}).get("profile") or {}).get("calls", [])[:PROFILED_CALLS]
    names = sorted({name for c in calls for name in c.get("own_kernel_us", {})})
    return {name: statistics.median(c.get("own_kernel_us", {}).get(name, 0.0) for c in calls)
            for name in names}


def _unique(items: list[str]) -> list[str]:
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
