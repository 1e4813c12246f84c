"""KernelBench metrics over a set of outcomes.

* fast_p: the fraction of ALL problems whose candidate is correct AND more than p times faster
  than the baseline (fast_0 is the correctness rate: any correct candidate is "faster than 0x").
* geomean speedups: over correct problems that have a timing (a wrong kernel has no speed).
* roofline fraction: the reference's roofline floor / our median time, only where a profile
  gave a floor (--profile); None otherwise, never estimated.
* bandwidth fraction: for plans made only of memory-bound kernels of ours, the plan's DRAM bytes
  / our median time / the copy bandwidth measured on the GPU at the start of the run.
* stage times: medians of prepare_s, measure_s and of each Verifier stage (verify_stage_s) over
  the problems that have them (cancelled ones left out: their time is not the problem's), for
  all problems and per level.
* published baselines: where the problems come from a KernelBench tree, the geomean of our eager
  time / the published H100 eager time says whether this machine times like theirs.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.profiler.rules import short_name

FAST_P = (0.0, 1.0, 1.5, 2.0)


def geomean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None and v > 0]
    if not present:
        return None
    return math.exp(sum(math.log(v) for v in present) / len(present))


def fast_p(outcomes: list[ProblemOutcome], p: float, key: str) -> float:
    """Fraction of all `outcomes` that are correct and have `key` (a speedup) above p."""
    if not outcomes:
        return 0.0

    def hit(o: ProblemOutcome) -> bool:
        if not o.correct:
            return False
        speedup = getattr(o, key)
        return p <= 0 or (speedup is not None and speedup > p)

    return sum(1 for o in outcomes if hit(o)) / len(outcomes)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


# A problem's memory-bound kernels count toward the kernel bandwidth only when they move at
# least this much a forward: twice the H100's 50 MB L2, so the bytes cross DRAM (smaller
# working sets run from L2 or are latency-bound, and their fraction says nothing of DRAM).
MIN_KERNEL_BYTES = 100 << 20


def kernel_bandwidth_fraction(kernel_bytes: dict[str, int], kernel_us: dict[str, float],
                              peak: float | None) -> float | None:
    """The memory-bound steps' bytes over the GPU time of their kernels, over `peak`: every
    kernel named as one of the steps (`ks_s3_softmax` or `ks_s3_softmax_row`: the base name of
    the profiler's demangled `void ks_s3_softmax_row<4>(...)`).  Summed over the problem's
    steps, not per step: the coder compiles identical kernels once, so a step's launches can
    carry another step's name (an earlier step with the same kernel, itself memory-bound)."""
    total = sum(kernel_bytes.values())
    if not peak or total < MIN_KERNEL_BYTES:
        return None
    prefixes = tuple(n + "_" for n in kernel_bytes)
    seconds = 0.0
    for kernel, us in kernel_us.items():
        base = short_name(kernel, width=len(kernel))  # `void ks_s3_softmax_row<4>(...)`: ks_s3_softmax_row
        if base in kernel_bytes or base.startswith(prefixes):
            seconds += us * 1e-6
    return total / seconds / peak if seconds > 0 else None


def set_bandwidth_fractions(outcomes: list[ProblemOutcome], dram_bytes_per_s: float | None,
                            by_gpu: dict[str, float] | None = None) -> None:
    """Recomputed for every outcome, reused ones included: the measured bandwidth is this
    run's (the resume key already pins the device model), of the card the problem ran on where
    each card was measured (`by_gpu`, keyed by str(outcome.gpu)), else `dram_bytes_per_s`."""
    for o in outcomes:
        # a reused outcome's `gpu` numbers another run's cards: this run's first card stands
        peak = (None if o.reused else (by_gpu or {}).get(str(o.gpu))) or dram_bytes_per_s
        usable = peak and o.correct and o.plan_bytes and o.candidate_ms
        o.bandwidth_fraction = (o.plan_bytes / (o.candidate_ms * 1e-3) / peak
                                if usable else None)
        o.kernel_bandwidth_fraction = (
            kernel_bandwidth_fraction(o.kernel_bytes, o.kernel_us, peak)
            if o.status == "accepted" and o.delivered != "original" else None)


KERNEL_BANDWIDTH_TARGET = 0.8  # issue 22: memory-bound kernels at >= 80% of the measured DRAM bandwidth


def _kernel_bandwidth_summary(outcomes: list[ProblemOutcome]) -> dict[str, Any]:
    fractions = sorted(o.kernel_bandwidth_fraction for o in outcomes
                       if o.kernel_bandwidth_fraction is not None)
    return {"kernel_bandwidth_problems": len(fractions),
            "median_kernel_bandwidth_fraction": statistics.median(fractions) if fractions else None,
            "kernel_bandwidth_at_target": sum(f >= KERNEL_BANDWIDTH_TARGET for f in fractions)}


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def _stage_group(outcomes: list[ProblemOutcome]) -> dict[str, Any]:
    timed = [o for o in outcomes if o.status != "cancelled"]
    stages: dict[str, list[float]] = {}
    for o in timed:
        for name, seconds in (o.prepare_stage_s or {}).items():
            stages.setdefault(f"prepare.{name}", []).append(seconds)
        for name, seconds in (o.verify_stage_s or {}).items():
            stages.setdefault(name, []).append(seconds)
    return {
        "problems": len(timed),
        "prepared": sum(1 for o in timed if o.prepare_s is not None),
        "measured": sum(1 for o in timed if o.measure_s is not None),
        "prepare_s": _median([o.prepare_s for o in timed]),
        "measure_s": _median([o.measure_s for o in timed]),
        # stage -> [median seconds, problems that have it]; order of first appearance
        # (prepare.* stages first, then the Verifier's)
        "verify_stage_s": {name: [_median(list(v)), len(v)] for name, v in stages.items()},
    }


def stage_times(outcomes: list[ProblemOutcome]) -> dict[str, dict[str, Any]]:
    """{"all": ..., "level1": ..., ...}: median prepare / measure / Verifier stage seconds."""
    groups = {"all": _stage_group(outcomes)}
    levels = sorted({o.level for o in outcomes if o.level}, key=lambda x: (len(x), x))
    if len(levels) > 1:
        groups.update({f"level{lv}": _stage_group([o for o in outcomes if o.level == lv])
                       for lv in levels})
    return groups


def published_summary(outcomes: list[ProblemOutcome]) -> dict[str, Any] | None:
    """Our eager (and torch.compile) time / the published one, geomean over the problems that
    have both; None when no problem has a published baseline."""
    with_base = [o for o in outcomes if o.published_eager_ms is not None]
    if not with_base:
        return None

    def ratios(ours: str, theirs: str) -> list[float | None]:
        return [getattr(o, ours) / getattr(o, theirs) for o in with_base
                if getattr(o, ours) and getattr(o, theirs)]

    eager, compiled = ratios("eager_ms", "published_eager_ms"), ratios(
        "compiled_ms", "published_compiled_ms")
    return {
        "problems": len(with_base),
        "eager_compared": len(eager),
        "geomean_eager_vs_published": geomean(eager),
        "compiled_compared": len(compiled),
        "geomean_compiled_vs_published": geomean(compiled),
        # ours against their published eager time: what a KernelBench score would use
        "geomean_speedup_vs_published_eager": geomean(
            [o.published_eager_ms / o.candidate_ms for o in with_base
             if o.correct and o.candidate_ms]),
    }


# torch.compile's time can spread widely within one run (level2/69, 2026-12-07: median 1.07 ms,
# p10 0.88, while another run measured 0.89): a p90 past this multiple of the p10 marks it noisy.
NOISY_SPREAD = 1.15


def _compiled_p10(o: ProblemOutcome) -> float | None:
    spread = o.compiled_spread_ms
    return spread[0] if spread and len(spread) == 2 and spread[0] > 0 else None


def _compiled_noise(correct: list[ProblemOutcome]) -> dict[str, Any]:
    """The vs-torch.compile geomean against its p10 (its faster runs) instead of its median, over
    the same problems, and the problems whose torch.compile p90 exceeds NOISY_SPREAD x its p10:
    how much of the median-based geomean a noisy baseline may carry."""
    timed = [o for o in correct if o.speedup_vs_compiled is not None and o.candidate_ms
             and _compiled_p10(o) is not None]
    return {
        "geomean_speedup_vs_compiled_p10": geomean([_compiled_p10(o) / o.candidate_ms for o in timed]),
        "compiled_p10_problems": len(timed),
        "noisy_compiled": [o.problem for o in timed if o.compiled_spread_ms[1] > NOISY_SPREAD * _compiled_p10(o)],
    }


def summarise(outcomes: list[ProblemOutcome]) -> dict[str, Any]:
    correct = [o for o in outcomes if o.correct]
    fractions = [o.bandwidth_fraction for o in correct if o.bandwidth_fraction is not None]
    n = len(outcomes)
    return {
        "problems": n,
        "accepted": len(correct),  # kept originals included (see "kept")
        "kept": sum(1 for o in outcomes if o.status == "kept"),
        # What the product promises never to deliver: a program significantly slower than eager.
        "slower_than_eager": sum(1 for o in correct if o.speedup_vs_eager is not None
                                 and o.speedup_vs_eager < 1.0 and o.significant_vs_eager),
        "correctness_rate": len(correct) / n if n else 0.0,
        "compiled": sum(1 for o in outcomes if o.compiled),
        "compile_failures": sum(1 for o in outcomes if o.compiled is False),
        "by_status": dict(sorted(Counter(o.status for o in outcomes).items())),
        "reused": sum(1 for o in outcomes if o.reused),
        "geomean_speedup_vs_eager": geomean([o.speedup_vs_eager for o in correct]),
        "geomean_speedup_vs_compiled": geomean([o.speedup_vs_compiled for o in correct]),
        # correct problems the vs-compile geomean leaves out (no torch.compile time measured)
        "without_compiled_time": sum(1 for o in correct if o.speedup_vs_compiled is None),
        **_compiled_noise(correct),
        # under a reduced precision: vs fp32 eager (None for fp32 runs)
        "geomean_speedup_vs_eager_fp32": geomean([o.speedup_vs_eager_fp32 for o in correct
                                                  if o.speedup_vs_eager_fp32]) or None,
        # over the programs whose float64 recomputation stands for the module (random draws left out)
        "max_rel_error": max((o.max_rel_error for o in correct if o.max_rel_error is not None
                              and o.float64_describes()), default=None),
        "fast_p_vs_eager": {str(p): fast_p(outcomes, p, "speedup_vs_eager") for p in FAST_P},
        "fast_p_vs_compiled": {str(p): fast_p(outcomes, p, "speedup_vs_compiled")
                               for p in FAST_P},
        "mean_roofline_fraction": _mean([o.roofline_fraction for o in correct]),
        "mean_roofline_fraction_eager": _mean([o.roofline_fraction_eager for o in correct]),
        "bandwidth_problems": len(fractions),
        "mean_bandwidth_fraction": _mean(fractions),
        "min_bandwidth_fraction": min(fractions) if fractions else None,
        **_kernel_bandwidth_summary(outcomes),
        "stage_times": stage_times(outcomes),
        "published_baselines": published_summary(outcomes),
    }
