"""Assemble a ProfileReport from what the backends captured: the torch.profiler trace and op log
(always), Nsight Compute kernels (when ncu ran), and the device's measured peaks.  Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from kernelstitch.profiler import ncu as m
from kernelstitch.profiler.costmodel import OpCost, kernel_is_gemm, op_cost
from kernelstitch.profiler.findings import DevicePeaks, Finding, KernelStat, ProfileReport, Roofline
from kernelstitch.profiler.ncu import NcuKernel
from kernelstitch.profiler.oplog import OpRecord
from kernelstitch.profiler.roofline import bound_of, floor_seconds
from kernelstitch.profiler.rules import RuleContext, run_rules, short_name
from kernelstitch.profiler.torch_trace import TraceKernel, parse_trace


@dataclass
class Captured:
    """Everything one profile run produced, before analysis."""

    meta: dict[str, Any]  # tasks.torch_profile's result
    trace: dict[str, Any]  # the chrome trace
    peaks: DevicePeaks
    ncu_kernels: list[NcuKernel] | None = None
    backends_used: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra_findings: list[Finding] = field(default_factory=list)


def _first_forward(kernels: list[TraceKernel], iters: int) -> list[TraceKernel]:
    ordered = sorted(kernels, key=lambda k: k.ts_us)
    per = len(ordered) // max(iters, 1)
    return ordered[:per] if per and len(ordered) % max(iters, 1) == 0 else ordered


def _base(name: str) -> str:
    return short_name(name, width=200)


def align_ncu(
    trace_kernels: list[TraceKernel], ncu_kernels: list[NcuKernel]
) -> dict[int, NcuKernel]:
    """Map positions in one forward's trace kernels to ncu's launches (both in launch order).

    Equal counts: the launch sequence of a forward is deterministic, so zip.  Otherwise a greedy
    in-order match on base names (ncu and torch format the full names differently).
    """
    gpu = [i for i, k in enumerate(trace_kernels) if k.category == "kernel"]
    if len(gpu) == len(ncu_kernels):
        return dict(zip(gpu, ncu_kernels))
    pairs: dict[int, NcuKernel] = {}
    cursor = 0
    for i in gpu:
        for j in range(cursor, len(ncu_kernels)):
            if _base(ncu_kernels[j].name) == _base(trace_kernels[i].name):
                pairs[i] = ncu_kernels[j]
                cursor = j + 1
                break
    return pairs


def _mean_metrics(items: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for d in items for k in d}
    return {k: sum(d[k] for d in items if k in d) / sum(1 for d in items if k in d) for k in keys}


def build_kernel_stats(
    trace_kernels: list[TraceKernel],
    iters: int,
    ops: list[OpRecord],
    peaks: DevicePeaks,
    ncu_kernels: list[NcuKernel] | None = None,
) -> list[KernelStat]:
    iters = max(iters, 1)
    costs: dict[int, OpCost] = {op.index: op_cost(op) for op in ops}
    op_by_index = {op.index: op for op in ops}
    first = _first_forward(trace_kernels, iters)
    ncu_of = align_ncu(first, ncu_kernels) if ncu_kernels else {}
    ncu_by_key: dict[tuple, list[NcuKernel]] = {}
    for pos, n in ncu_of.items():
        ncu_by_key.setdefault((first[pos].op_index, first[pos].name), []).append(n)

    groups: dict[tuple, list[TraceKernel]] = {}
    for k in sorted(trace_kernels, key=lambda k: k.ts_us):
        groups.setdefault((k.op_index, k.name), []).append(k)
    op_time: dict[int | None, float] = {}
    for (op_index, _), ks in groups.items():
        op_time[op_index] = op_time.get(op_index, 0.0) + sum(k.dur_us for k in ks)

    stats = []
    for (op_index, name), ks in groups.items():
        total_us = sum(k.dur_us for k in ks) / iters
        sample = ks[0]
        op = op_by_index.get(op_index) if op_index is not None else None
        cost = costs.get(op_index) if op_index is not None else None
        share = (sum(k.dur_us for k in ks) / op_time[op_index]) if op_time.get(op_index) else 1.0
        if sample.category != "kernel":
            category = "copy"
        elif kernel_is_gemm(name) or (
            cost is not None and cost.category == "gemm" and "elementwise" not in name
        ):
            category = "gemm"
        else:
            category = cost.category if cost else "other"
        metrics: dict[str, float] = {}
        if sample.grid:
            metrics["trace_grid_blocks"] = float(prod(sample.grid))
        if sample.block:
            metrics["trace_block_threads"] = float(prod(sample.block))
        if sample.registers is not None:
            metrics["trace_registers"] = float(sample.registers)
        matched = ncu_by_key.get((op_index, name), [])
        dram_bytes = None
        if matched:
            metrics.update(_mean_metrics([n.metrics for n in matched]))
            if any(m.DRAM_READ in n.metrics for n in matched):
                dram_bytes = sum(
                    n.metrics.get(m.DRAM_READ, 0.0) + n.metrics.get(m.DRAM_WRITE, 0.0)
                    for n in matched
                )
        bytes_est = cost.bytes * share if cost else None
        flops_est = cost.flops * share if cost else None
        dtype = cost.dtype if cost else None
        floor_us = (
            floor_seconds(bytes_est, flops_est or 0.0, peaks, dtype) * 1e6 if bytes_est else None
        )
        stats.append(
            KernelStat(
                name=name,
                calls=max(1, round(len(ks) / iters)),
                total_us=total_us,
                op=op.func if op else sample.aten_op,
                op_index=op_index,
                source_line=sample.line,
                module=op.module if op else None,
                category=category,
                dtype=dtype,
                bytes=bytes_est,
                flops=flops_est,
                dram_bytes=dram_bytes,
                floor_us=floor_us,
                metrics=metrics,
            )
        )
    return stats


def module_roofline(
    meta: dict[str, Any], kernels: list[KernelStat], ops: list[OpRecord], peaks: DevicePeaks
) -> Roofline:
    launched = {k.op_index for k in kernels}
    module_flops = sum(op_cost(op).flops for op in ops if op.index in launched)
    module_bytes = float(meta["input_bytes"] + meta["param_bytes"] + meta["output_bytes"])
    kernel_bytes = sum(
        (k.dram_bytes if k.dram_bytes is not None else k.bytes or 0.0) for k in kernels
    )
    dtypes = [k.dtype for k in kernels if k.category == "gemm" and k.dtype]
    dtype = dtypes[0] if dtypes else "fp32"
    floor_ms = floor_seconds(module_bytes, module_flops, peaks, dtype) * 1e3
    actual = meta.get("forward_ms") or sum(k.total_us for k in kernels) / 1e3
    return Roofline(
        peaks=peaks,
        module_bytes=module_bytes,
        module_flops=module_flops,
        kernel_bytes=kernel_bytes,
        floor_ms=floor_ms,
        actual_ms=actual,
        bound=bound_of(module_bytes, module_flops, peaks, dtype),
    )


def forward_line(problem_path: str | None, module: str | None) -> int | None:
    if not problem_path:
        return None
    try:
        from kernelstitch.core.problem import resolve_module

        return resolve_module(Path(problem_path), module).forward_line
    except Exception:  # noqa: BLE001  a line number is a nicety; never fail a profile over it
        return None


def roofline_finding(roof: Roofline, line: int | None) -> Finding:
    pct = roof.pct_of_floor
    severity = "info" if pct >= 50 else "warning"
    peaks = roof.peaks
    measured = "measured" if peaks.measured else "assumed (measurement failed)"
    return Finding(
        rule="roofline",
        severity=severity,
        message=f"forward at {pct:.0f}% of the achievable floor ({roof.bound}-bound)",
        explanation=(
            f"{roof.actual_ms:.3f} ms per forward; the floor is {roof.floor_ms:.3f} ms: "
            f"{roof.module_bytes / 1e6:.2f} MB of inputs, parameters and outputs at "
            f"{peaks.dram_bytes_per_s / 1e9:,.0f} GB/s and {roof.module_flops / 1e9:.2f} GFLOP "
            f"({measured} peaks of {peaks.name}). The kernels move "
            f"{roof.kernel_bytes / 1e6:.2f} MB in all."
        ),
        suggestion=(
            "Close the gap by moving fewer bytes (fusion) if memory-bound, or by using "
            "tensor cores and larger tiles if compute-bound."
        ),
        source_line=line,
        metrics={"pct_of_floor": pct, "floor_ms": roof.floor_ms, "actual_ms": roof.actual_ms},
    )


def build_report(captured: Captured) -> ProfileReport:
    meta = captured.meta
    ops = [OpRecord.from_dict(d) for d in meta.get("ops", [])]
    trace_kernels = parse_trace(captured.trace)
    kernels = build_kernel_stats(
        trace_kernels, meta.get("iters", 1), ops, captured.peaks, captured.ncu_kernels
    )
    line = forward_line(meta.get("problem_path"), meta.get("module"))
    roof = module_roofline(meta, kernels, ops, captured.peaks) if kernels else None
    ctx = RuleContext(
        kernels=kernels,
        peaks=captured.peaks,
        ops=ops,
        forward_ms=meta.get("forward_ms"),
        forward_wall_ms=meta.get("forward_wall_ms"),
        forward_line=line,
    )
    findings = run_rules(ctx)
    if roof:
        findings.append(roofline_finding(roof, line))
    findings += captured.extra_findings
    notes = list(captured.notes)
    unmapped = sum(1 for k in kernels if k.source_line is None)
    if unmapped:
        notes.append(f"{unmapped} kernel(s) could not be tied to a line of the problem file")
    return ProfileReport(
        device=meta.get("device", {}).get("name", captured.peaks.name),
        module=meta.get("module", "?"),
        kernels=kernels,
        findings=findings,
        roofline=roof,
        backends_used=list(captured.backends_used),
        notes=notes,
        problem_path=meta.get("problem_path"),
        forward_ms=meta.get("forward_ms"),
        forward_wall_ms=meta.get("forward_wall_ms"),
    )
