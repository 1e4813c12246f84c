"""Rules that turn kernel metrics into Findings tied to source lines.

Each rule is a function `(RuleContext) -> list[Finding]`, listed in RULES.  Thresholds are named
constants below so tests and users can see what fires when.  Rules read ncu metrics when they
exist (KernelStat.metrics) and fall back to shape-based estimates otherwise; a rule with nothing
to go on stays silent rather than guessing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelstitch.profiler import ncu as m
from kernelstitch.profiler.costmodel import categorize, kernel_uses_tensor_cores
from kernelstitch.profiler.findings import DevicePeaks, Finding, KernelStat
from kernelstitch.profiler.oplog import OpRecord

# A kernel is worth a finding when it takes at least this share of the forward's GPU time ...
SIGNIFICANT_SHARE = 0.03
# ... or at least this long.
SIGNIFICANT_US = 20.0
LOW_BANDWIDTH_PCT = 50.0  # memory-bound kernels below this % of measured peak DRAM bandwidth
HOST_BOUND_BUSY_PCT = 60.0  # GPU busy below this % of the forward's time: launch/host-bound
SMALL_KERNEL_US = 10.0
MANY_KERNELS = 8
MAX_COALESCED_SECTORS_PER_REQUEST = 16.0  # 32 threads x 16-byte loads = 16 sectors
MIN_BYTES_USED_PER_SECTOR_PCT = 50.0
LOW_OCCUPANCY_PCT = 25.0
TENSOR_ACTIVE_PCT = 1.0
TAIL_WARNING_FILL = 0.75  # fewer blocks than this share of the SMs: a warning, else info
REREAD_MIN_BYTES = 1 << 20
REREAD_MIN_READERS = 3
FUSIBLE_CATEGORIES = {"elementwise", "reduction", "copy"}

LIMITER_LABELS = {
    m.LIMIT_REGISTERS: "registers per thread",
    m.LIMIT_SMEM: "shared memory per block",
    m.LIMIT_WARPS: "block size (warps per SM)",
    m.LIMIT_BLOCKS: "max blocks per SM (blocks too small)",
}


@dataclass
class RuleContext:
    kernels: list[KernelStat]
    peaks: DevicePeaks
    ops: list[OpRecord] = field(default_factory=list)
    forward_ms: float | None = None  # GPU time per forward, without the profiler
    forward_wall_ms: float | None = None
    forward_line: int | None = None

    @property
    def gpu_total_us(self) -> float:
        return sum(k.total_us for k in self.kernels)

    def significant(self, kernel: KernelStat) -> bool:
        total = self.gpu_total_us
        return kernel.total_us >= SIGNIFICANT_US or (
            total > 0 and kernel.total_us / total >= SIGNIFICANT_SHARE
        )

    def op(self, index: int | None) -> OpRecord | None:
        return next((o for o in self.ops if o.index == index), None)


def short_name(kernel_name: str, width: int = 60) -> str:
    """'void at::native::vectorized_elementwise_kernel<4, ...>(...)' -> 'vectorized_elementwise_kernel'.

    Template arguments can hold parentheses (`launch_clamp_scalar(at::TensorIteratorBase&)`)
    and ncu and torch spell anonymous namespaces differently, so both are dropped first.
    """
    name = kernel_name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    name = name.removeprefix("void ")
    depth, base = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            if ch == "(":  # the argument list
                break
            base.append(ch)
    text = "".join(base).strip().split("::")[-1] or kernel_name
    return text[:width]


def _gbs(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:,.0f} GB/s"


def memory_bound_low_bandwidth(ctx: RuleContext) -> list[Finding]:
    findings = []
    peak = ctx.peaks.dram_bytes_per_s
    for k in ctx.kernels:
        if k.category == "gemm" or not ctx.significant(k) or k.total_us <= 0:
            continue
        if m.DRAM_PCT in k.metrics:  # measured by ncu: its own bytes over its own duration
            pct = k.metrics[m.DRAM_PCT]
            if k.metrics.get(m.SM_PCT, 0.0) > pct:  # compute-side bound; not this rule's case
                continue
            if k.metrics.get(m.MEMORY_PCT, 0.0) >= LOW_BANDWIDTH_PCT:
                continue  # saturating L2/L1 instead: DRAM is not what limits it
            moved = k.dram_bytes or k.bytes or 0.0
            seconds = k.metrics.get(m.DURATION, k.total_us * 1e3) * 1e-9 * max(k.calls, 1)
            source = "measured by Nsight Compute, caches flushed, % of the DRAM peak it reports"
        else:
            moved = k.bytes or 0.0
            if not moved:
                continue
            intensity = (k.flops or 0.0) / moved
            if intensity >= ctx.peaks.peak_flops(k.dtype) / peak:
                continue  # compute-bound by the roofline
            seconds = k.total_us * 1e-6
            pct = 100.0 * (moved / seconds) / peak
            source = "estimated from tensor shapes against the measured copy bandwidth"
        if pct >= LOW_BANDWIDTH_PCT:
            continue
        achieved = moved / seconds if moved and seconds else 0.0
        findings.append(
            Finding(
                rule="memory-bound-low-bandwidth",
                severity="warning",
                message=f"memory-bound at {pct:.0f}% of peak DRAM bandwidth ({short_name(k.name)})",
                explanation=(
                    f"{short_name(k.name)} takes {k.total_us:.1f} us per forward over {k.calls} "
                    f"launch(es) and moves {moved / 1e6:.2f} MB in {seconds * 1e6:.1f} us: "
                    f"{_gbs(achieved)} ({source}); {ctx.peaks.name} reached {_gbs(peak)} in a "
                    f"device-to-device copy."
                ),
                suggestion=(
                    "Fuse it with the kernels around it so the data crosses DRAM once; use "
                    "vectorized (128-bit) loads and enough blocks to fill every SM."
                ),
                source_line=k.source_line,
                kernel=k.name,
                metrics={"dram_pct": pct, "bytes": moved, "time_us": k.total_us},
            )
        )
    return findings


def _launching_ops(ctx: RuleContext) -> dict[int, list[KernelStat]]:
    by_op: dict[int, list[KernelStat]] = defaultdict(list)
    for k in ctx.kernels:
        if k.op_index is not None:
            by_op[k.op_index].append(k)
    return by_op


def fusable_chains(ctx: RuleContext) -> list[Finding]:
    """Producer -> consumer chains of memory-bound ops, each its own kernel, where every
    intermediate is read only by the next op: one fused kernel would keep it in registers."""
    by_op = _launching_ops(ctx)
    ops = [o for o in ctx.ops if o.index in by_op]
    readers: dict[str, list[OpRecord]] = defaultdict(list)
    for op in ops:
        for t in {t.id: t for t in op.inputs}.values():
            readers[t.id].append(op)
    producer_of = {t.id: op for op in ops for t in op.outputs}
    next_of: dict[int, OpRecord] = {}
    has_prev: set[int] = set()
    for op in ops:
        if categorize(op.func) not in FUSIBLE_CATEGORIES:
            continue
        for t in op.inputs:
            prod_op = producer_of.get(t.id)
            if prod_op is None or prod_op.index == op.index or len(readers[t.id]) != 1:
                continue
            if categorize(prod_op.func) in FUSIBLE_CATEGORIES or categorize(prod_op.func) == "gemm":
                next_of.setdefault(prod_op.index, op)
                has_prev.add(op.index)
    findings = []
    for op in ops:
        if op.index in has_prev or op.index not in next_of:
            continue
        chain = [op]
        while chain[-1].index in next_of:
            chain.append(next_of[chain[-1].index])
        head_is_gemm = categorize(chain[0].func) == "gemm"
        fusable = chain[1:] if head_is_gemm else chain
        if len(fusable) < 2 and not (head_is_gemm and fusable):
            continue
        kernels = [k for o in fusable for k in by_op[o.index]]
        time_us = sum(k.total_us for k in kernels)
        intermediates = [o.outputs[0] for o in chain[:-1] if o.outputs]
        saved = 2.0 * sum(t.nbytes for t in intermediates)  # each written once, read once
        lines = sorted({o.line for o in chain if o.line is not None})
        anchor = chain[0].outputs[0] if chain[0].outputs else None
        what = (
            "elementwise"
            if all(categorize(o.func) == "elementwise" for o in fusable)
            else ("memory-bound")
        )
        shape = "x".join(map(str, anchor.shape)) if anchor else "?"
        epilogue = (
            f" The first can run in the epilogue of the {chain[0].func} GEMM on line "
            f"{chain[0].line}."
            if head_is_gemm
            else ""
        )
        findings.append(
            Finding(
                rule="fusable-elementwise-chain",
                severity="warning",
                message=f"{len(kernels)} {what} kernels re-read this tensor: fusable",
                explanation=(
                    f"Lines {', '.join(map(str, lines))} run {len(kernels)} kernels "
                    f"({time_us:.1f} us per forward) that each read the previous one's "
                    f"{shape} {anchor.dtype if anchor else ''} result from DRAM and write a new "
                    f"one: {saved / 1e6:.2f} MB of avoidable traffic.{epilogue}"
                ),
                suggestion=(
                    "Fuse the chain into one kernel (KernelStitch's fuse action, or "
                    "torch.compile) so intermediates stay in registers."
                ),
                source_line=chain[0].line,
                kernel=kernels[0].name if kernels else None,
                metrics={"kernels": float(len(kernels)), "time_us": time_us, "bytes_saved": saved},
                related_lines=[ln for ln in lines if ln != chain[0].line],
            )
        )
    return findings


def host_bound(ctx: RuleContext) -> list[Finding]:
    if not ctx.forward_ms or not ctx.kernels:
        return []
    busy_us = ctx.gpu_total_us
    forward_us = ctx.forward_ms * 1e3
    busy_pct = 100.0 * busy_us / forward_us
    launches = sum(k.calls for k in ctx.kernels)
    mean_us = busy_us / max(launches, 1)
    many_tiny = launches >= MANY_KERNELS and mean_us < SMALL_KERNEL_US
    if busy_pct >= HOST_BOUND_BUSY_PCT and not many_tiny:
        return []
    return [
        Finding(
            rule="launch-bound",
            severity="warning",
            message=(
                f"launch-bound forward: GPU busy {min(busy_pct, 100):.0f}% of "
                f"{ctx.forward_ms:.3f} ms ({launches} kernels, mean {mean_us:.1f} us)"
            ),
            explanation=(
                f"The kernels add up to {busy_us:.1f} us but a forward takes {forward_us:.1f} us "
                f"of GPU time (host {(ctx.forward_wall_ms or 0) * 1e3:.1f} us): the GPU waits "
                f"for the CPU to launch {launches} small kernels."
            ),
            suggestion=(
                "Capture the forward in a CUDA graph (torch.cuda.CUDAGraph, or torch.compile("
                "mode='reduce-overhead')) and fuse small kernels to launch fewer."
            ),
            source_line=ctx.forward_line,
            metrics={"gpu_busy_pct": busy_pct, "launches": float(launches), "mean_us": mean_us},
        )
    ]


def uncoalesced_access(ctx: RuleContext) -> list[Finding]:
    findings = []
    for k in ctx.kernels:
        if not ctx.significant(k):
            continue
        used_pct = k.metrics.get(m.BYTES_PER_SECTOR_LD_PCT)
        requests = k.metrics.get(m.LD_REQUESTS, 0.0)
        per_request = k.metrics.get(m.LD_SECTORS, 0.0) / requests if requests else None
        if used_pct is not None and used_pct < MIN_BYTES_USED_PER_SECTOR_PCT:
            detail = f"only {used_pct:.0f}% of each 32-byte sector loaded from global is used"
        elif per_request is not None and per_request > MAX_COALESCED_SECTORS_PER_REQUEST:
            detail = (
                f"{per_request:.1f} sectors per global load request (fully coalesced 128-bit "
                f"loads need {MAX_COALESCED_SECTORS_PER_REQUEST:.0f})"
            )
        else:
            continue
        findings.append(
            Finding(
                rule="uncoalesced-access",
                severity="warning",
                message=f"uncoalesced global loads in {short_name(k.name)}",
                explanation=f"{detail}: neighbouring threads read addresses far apart.",
                suggestion=(
                    "Make consecutive threads read consecutive addresses (transpose through "
                    "shared memory, or make the tensor contiguous along the fast index first)."
                ),
                source_line=k.source_line,
                kernel=k.name,
                metrics={
                    key: v
                    for key, v in (
                        ("sectors_per_request", per_request),
                        ("bytes_used_pct", used_pct),
                    )
                    if v is not None
                },
            )
        )
    return findings


def _tensor_active_pct(k: KernelStat) -> float | None:
    values = [k.metrics[x] for x in (m.TENSOR_HMMA_PCT, m.TENSOR_GMMA_PCT) if x in k.metrics]
    return max(values) if values else None


def low_occupancy(ctx: RuleContext) -> list[Finding]:
    findings = []
    for k in ctx.kernels:
        achieved = k.metrics.get(m.ACHIEVED_OCCUPANCY)
        if achieved is None or achieved >= LOW_OCCUPANCY_PCT or not ctx.significant(k):
            continue
        if (_tensor_active_pct(k) or 0.0) > 10.0:
            continue  # tensor-core GEMMs run few fat warps by design
        limits = {key: k.metrics[key] for key in LIMITER_LABELS if key in k.metrics}
        theoretical = k.metrics.get(m.THEORETICAL_OCCUPANCY)
        blocks = k.metrics.get(m.GRID_SIZE)
        sms = k.metrics.get(m.SM_COUNT) or ctx.peaks.sm_count
        if blocks is not None and sms and blocks < sms:
            why = f"the grid has {blocks:.0f} blocks for {sms:.0f} SMs"
        elif limits:
            key = min(limits, key=limits.get)  # type: ignore[arg-type]
            why = f"limited by {LIMITER_LABELS[key]} ({limits[key]:.0f} blocks/SM)"
        else:
            why = "cause not measured"
        theo = f", {theoretical:.0f}% theoretical" if theoretical is not None else ""
        findings.append(
            Finding(
                rule="low-occupancy",
                severity="info",
                message=f"low occupancy {achieved:.0f}%{theo} in {short_name(k.name)}: {why}",
                explanation=(
                    f"Achieved occupancy is {achieved:.0f}% of the SM's warp slots{theo}; too few "
                    f"warps to hide memory latency. Registers/thread: "
                    f"{k.metrics.get(m.REGISTERS, float('nan')):.0f}, block size: "
                    f"{k.metrics.get(m.BLOCK_SIZE, float('nan')):.0f}."
                ),
                suggestion=(
                    "Raise warps per SM: fewer registers (__launch_bounds__), less shared memory "
                    "per block, or more, smaller blocks."
                ),
                source_line=k.source_line,
                kernel=k.name,
                metrics={"achieved_pct": achieved, **{k2: v for k2, v in limits.items()}},
            )
        )
    return findings


def register_spills(ctx: RuleContext) -> list[Finding]:
    findings = []
    for k in ctx.kernels:
        local = k.metrics.get(m.LOCAL_LD, 0.0) + k.metrics.get(m.LOCAL_ST, 0.0)
        if local <= 0:
            continue
        findings.append(
            Finding(
                rule="register-spills",
                severity="warning",
                message=f"register spills: {local:,.0f} local-memory sectors in {short_name(k.name)}",
                explanation=(
                    f"The kernel uses {k.metrics.get(m.REGISTERS, float('nan')):.0f} registers "
                    f"per thread and still spills to local memory ({local:,.0f} sectors loaded/"
                    f"stored), which goes through L1/L2 and DRAM."
                ),
                suggestion=(
                    "Keep fewer values live (smaller tiles or unroll factors), or allow more "
                    "registers with __launch_bounds__(threads, minBlocks)."
                ),
                source_line=k.source_line,
                kernel=k.name,
                metrics={"local_sectors": local},
            )
        )
    return findings


def gemm_not_on_tensor_cores(ctx: RuleContext) -> list[Finding]:
    findings = []
    for k in ctx.kernels:
        if k.category != "gemm" or not ctx.significant(k):
            continue
        active = _tensor_active_pct(k)
        instructions = k.metrics.get(m.TENSOR_INST, 0.0) + k.metrics.get(m.TENSOR_GMMA_INST, 0.0)
        if k.dtype in ("fp16", "bf16"):
            if active is not None:
                if active >= TENSOR_ACTIVE_PCT or instructions > 0:
                    continue
                evidence, severity = f"tensor pipe active {active:.1f}% (Nsight Compute)", "warning"
            elif kernel_uses_tensor_cores(k.name):
                continue
            else:
                evidence, severity = (
                    "the kernel name shows no tensor-core GEMM (no ncu data)",
                    "info",
                )
            findings.append(
                Finding(
                    rule="gemm-not-on-tensor-cores",
                    severity=severity,
                    message=f"{k.dtype} GEMM not on tensor cores ({short_name(k.name)})",
                    explanation=f"{evidence}; {k.total_us:.1f} us per forward.",
                    suggestion=(
                        "Use dimensions that are multiples of 8 (16 bytes), contiguous "
                        "operands, and cuBLAS/CUTLASS tensor-core kernels (mma/wgmma)."
                    ),
                    source_line=k.source_line,
                    kernel=k.name,
                    metrics={"tensor_active_pct": active or 0.0},
                )
            )
        elif k.dtype == "fp32" and not kernel_uses_tensor_cores(k.name):
            findings.append(
                Finding(
                    rule="gemm-not-on-tensor-cores",
                    severity="hint",
                    message=f"fp32 GEMM on CUDA cores ({short_name(k.name)})",
                    explanation=(
                        f"{k.total_us:.1f} us per forward in full fp32; TF32 or bf16 runs on "
                        f"tensor cores at several times the throughput, and 3xTF32 (split "
                        f"operands) at fp32's accuracy."
                    ),
                    suggestion=(
                        "Generate in fp32 (the default): the measured search tries the GEMM as 3xTF32 "
                        "on tensor cores at fp32's accuracy. Or generate with --precision tf32 "
                        "(or bf16; kernelstitch.precision in the editor): GEMMs on tensor cores, "
                        "verified against float64 with the error reported; or "
                        "torch.backends.cuda.matmul.allow_tf32 = True in your code, if the "
                        "accuracy budget allows."
                    ),
                    source_line=k.source_line,
                    kernel=k.name,
                )
            )
    return findings


def _grid_blocks(k: KernelStat) -> float | None:
    return k.metrics.get(m.GRID_SIZE) or k.metrics.get("trace_grid_blocks")


def tail_effect(ctx: RuleContext) -> list[Finding]:
    findings = []
    for k in ctx.kernels:
        blocks = _grid_blocks(k)
        sms = k.metrics.get(m.SM_COUNT) or ctx.peaks.sm_count
        if not blocks or not sms or not ctx.significant(k):
            continue
        waves = k.metrics.get(m.WAVES)
        if blocks < sms:
            message = f"only {blocks:.0f} blocks for {sms:.0f} SMs: {sms - blocks:.0f} SMs idle"
            explanation = (
                f"{short_name(k.name)} launches {blocks:.0f} blocks; with one block per SM at "
                f"most {100 * blocks / sms:.0f}% of the GPU works."
            )
            severity = "warning" if blocks < TAIL_WARNING_FILL * sms else "info"
        elif waves is not None and 1.0 < waves < 4.0 and 0.0 < waves % 1.0 <= 0.5:
            message = f"tail effect: {waves:.2f} waves, last wave {100 * (waves % 1.0):.0f}% full"
            explanation = (
                f"{short_name(k.name)} runs {waves:.2f} waves of blocks over {sms:.0f} SMs: the "
                f"last partial wave leaves most SMs idle."
            )
            severity = "info"
        else:
            continue
        findings.append(
            Finding(
                rule="tail-effect",
                severity=severity,
                message=message,
                explanation=explanation,
                suggestion=(
                    "Split the work into more (smaller) blocks, use split-K or a persistent "
                    "kernel, or fuse with neighbouring work so every SM has some."
                ),
                source_line=k.source_line,
                kernel=k.name,
                metrics={
                    "blocks": blocks,
                    "sms": float(sms),
                    **({"waves": waves} if waves else {}),
                },
            )
        )
    return findings


def redundant_rereads(ctx: RuleContext) -> list[Finding]:
    """One tensor read by several kernels from different lines: each read crosses DRAM."""
    by_op = _launching_ops(ctx)
    readers: dict[str, list[OpRecord]] = defaultdict(list)
    sizes: dict[str, int] = {}
    for op in ctx.ops:
        if op.index not in by_op:
            continue
        for t in {t.id: t for t in op.inputs}.values():
            readers[t.id].append(op)
            sizes[t.id] = t.nbytes
    findings = []
    for tid, ops in readers.items():
        lines = sorted({o.line for o in ops if o.line is not None})
        if len(ops) < REREAD_MIN_READERS or len(lines) < 2 or sizes[tid] < REREAD_MIN_BYTES:
            continue
        extra = (len(ops) - 1) * sizes[tid]
        findings.append(
            Finding(
                rule="redundant-rereads",
                severity="info",
                message=f"this tensor is read by {len(ops)} separate kernels (lines "
                f"{', '.join(map(str, lines))})",
                explanation=(
                    f"A {sizes[tid] / 1e6:.2f} MB tensor is loaded from DRAM by {len(ops)} "
                    f"kernels; a fused kernel would read it once and save {extra / 1e6:.2f} MB."
                ),
                suggestion="Compute the consumers in one kernel that loads the tensor once.",
                source_line=lines[0],
                metrics={"readers": float(len(ops)), "bytes_extra": float(extra)},
                related_lines=lines[1:],
            )
        )
    return findings


RULES: list[Callable[[RuleContext], list[Finding]]] = [
    memory_bound_low_bandwidth,
    fusable_chains,
    host_bound,
    uncoalesced_access,
    low_occupancy,
    register_spills,
    gemm_not_on_tensor_cores,
    tail_effect,
    redundant_rereads,
]

_ORDER = {"error": 0, "warning": 1, "info": 2, "hint": 3}


def run_rules(ctx: RuleContext) -> list[Finding]:
    findings = [f for rule in RULES for f in rule(ctx)]
    return sorted(findings, key=lambda f: (_ORDER[f.severity], f.source_line or 0))
