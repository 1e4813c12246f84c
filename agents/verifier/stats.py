"""Timing statistics and the "is it really faster" decision (torch-free).

A speed-up is reported as significant only when the p10-p90 ranges of the two implementations
do not overlap; otherwise it is "within noise".  The medians still give the speed-up figure.
"""

from __future__ import annotations

from kernelstitch.agents.verifier.verdict import Stat, Timings


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of an ascending list."""
    if not sorted_values:
        raise ValueError("no samples")
    position = (len(sorted_values) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] * (1 - fraction) + sorted_values[high] * fraction


def summarize(samples_ms: list[float]) -> Stat:
    values = sorted(samples_ms)
    return Stat(median=percentile(values, 50), p10=percentile(values, 10),
                p90=percentile(values, 90), n=len(values))


def significant(a: Stat, b: Stat) -> bool:
    """True when the p10-p90 ranges do not overlap."""
    return a.p90 < b.p10 or b.p90 < a.p10


def build_timings(eager: list[float], compiled: list[float] | None,
                  candidate: list[float], precision: str = "fp32",
                  eager_fp32: list[float] | None = None) -> Timings:
    """`eager` and `compiled` as timed with `precision` allowed; `eager_fp32` the fp32
    eager samples under a reduced precision."""
    eager_stat = summarize(eager)
    cand_stat = summarize(candidate)
    compiled_stat = summarize(compiled) if compiled else None
    fp32_stat = summarize(eager_fp32) if eager_fp32 else None
    floor = 1e-6  # a zero-time candidate (all work hidden) must not divide by zero
    return Timings(
        precision=precision, eager_fp32_ms=fp32_stat,
        speedup_vs_eager_fp32=fp32_stat.median / max(cand_stat.median, floor) if fp32_stat else None,
        eager_ms=eager_stat,
        compiled_ms=compiled_stat,
        candidate_ms=cand_stat,
        speedup_vs_eager=eager_stat.median / max(cand_stat.median, floor),
        speedup_vs_compiled=(compiled_stat.median / max(cand_stat.median, floor)
                             if compiled_stat else None),
        significant_vs_eager=significant(eager_stat, cand_stat),
        significant_vs_compiled=bool(compiled_stat and significant(compiled_stat, cand_stat)),
    )
