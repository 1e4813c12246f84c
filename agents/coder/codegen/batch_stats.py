"""Training-mode batch_norm statistics emitter (cuda/batch_stats/): per channel, the mean and
inverse deviation over the batch and spatial dims, with the elementwise ops before the
batch_norm (a conv's bias, activations) fused as a prologue, and the running statistics
updated in place.  Normalising with them is a plain elementwise kernel (the planner writes it
as elementwise ops over per-channel views), so the ops after the batch_norm fuse there.

Two kernels: Welford partials per (channel, part of the batch) with the block laid along the
channel's contiguous values (NCHW) or across 32 channels (channel stride 1: [N, C] or
channels-last), then up to 8 warps per channel merging its parts.  A concatenation's statistics
from its parts' (emit_batch_stats_merge, cuda/batch_stats/merge.cu): a thread per channel.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    check_identifier,
    check_inputs,
    input_checks,
    operand_args,
    operand_params,
)
from kernelstitch.agents.coder.codegen.expr import c_float, compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    BATCH_STATS_MERGE_MAX_PARTS,
    BatchStatsMergeSpec,
    BatchStatsSpec,
)


def _roles(spec: BatchStatsSpec) -> tuple[list[int], list[int], list[int]]:
    """(tap operands, channel operands, running statistics): indices into `spec.inputs`."""
    names = [t.name for t in spec.inputs]
    running = [n for n in (spec.running_mean, spec.running_var) if n is not None]
    check_inputs(spec.name, names, list(spec.channel_inputs) + running, "the normalised tensor")
    if (spec.running_mean is None) != (spec.running_var is None):
        raise ValueError(f"{spec.name}: running_mean and running_var come together")
    if running and names[-2:] != running:
        raise ValueError(f"{spec.name}: the running statistics must be the last two inputs")
    if any(spec.inputs[names.index(n)].dtype != "float32" for n in running):
        raise ValueError(f"{spec.name}: running statistics must be float32")
    if not 0.0 <= spec.momentum <= 1.0 or spec.eps < 0:
        raise ValueError(f"{spec.name}: momentum {spec.momentum} / eps {spec.eps} out of range")
    channel = [names.index(n) for n in spec.channel_inputs]
    taps = [k for k in range(len(names) - len(running)) if k not in channel]
    return taps, channel, [names.index(n) for n in running]


def emit_batch_stats(spec: BatchStatsSpec) -> KernelSource:
    name = check_identifier(spec.name)
    taps, channel, running = _roles(spec)
    names = [t.name for t in spec.inputs]
    operands = sorted(taps + channel)  # what the prologue reads, in `inputs` order
    pro_out = spec.prologue_out or (spec.prologue[-1].out if spec.prologue else names[0])
    pro = compile_ops(f"{name}_pro", tuple(names[k] for k in operands), spec.prologue, (pro_out,))
    params = operand_params(spec.inputs, operands)
    kernel_args = operand_args(spec.inputs, operands)
    launcher_sig = (f"void {name}_launch(const void* const* ins, const KsOperand* descs, float* ws, float* stats, "
                    "float* running_mean, float* running_var, const KsBnGeom& g, int rows, int flat, int v4, float eps, "
                    "float momentum, cudaStream_t stream)")
    per_sm_sig = f"int {name}_per_sm(int rows, int flat, int v4)"
    if spec.groups < 0 or (spec.groups and running):
        raise ValueError(f"{name}: group statistics ({spec.groups} groups) take no running statistics")
    # the NCHW 16-byte form (kernel.cu's V4): float32 values, no operand read per value but them
    # (group statistics of an NCHW source read a group as one row: its channel operands vary
    # along it, loaded per value)
    v4 = int(taps == [0] and spec.inputs[0].dtype == "float32" and not (spec.groups and channel))
    cuda = render(
        "batch_stats/kernel.cu", name=name, pro_fn=pro.source, params=params, kernel_args=kernel_args,
        per_sm_sig=per_sm_sig,
        channel_loads=" ".join(_channel_load(spec, k) for k in channel),
        # group statistics of an NCHW source: a thread's row is a group, so its channel operands
        # vary along it (the logical index li picks the channel); channels-last rows keep a channel
        group_plane_loads=" ".join(f"const float a{k} = ROWS ? ch{k} : ks_ld(p{k} + ks_offset(d{k}, li));"
                                   for k in channel) if spec.groups else "",
        taps_need_index="true" if any(k != 0 for k in taps) or (spec.groups and channel) else "false",
        tap_loads=" ".join(f"const float a{k} = ks_ld(p{k} + ks_offset(d{k}, li));" for k in taps if k != 0),
        pro_args=", ".join(f"a{k}" for k in operands), launcher_sig=launcher_sig, v4=v4)
    n = len(operands)
    rm, rv = (f"in_{running[0]}", f"in_{running[1]}") if running else (None, None)
    running_checks = _running_checks(name, rm, rv, "g.C")
    binding = render(
        "batch_stats/binding.cpp", name=name, n=n,
        cparams=", ".join(f"at::Tensor in_{k}" for k in range(len(names))),
        checks=input_checks(name, spec.inputs),
        running_checks=running_checks,
        ptrs=", ".join(f"&in_{k}" for k in operands), shapes=", ".join("xs" for _ in operands),
        in_ptrs="".join(f", in_{k}.data_ptr()" for k in operands[1:]),
        running_ptrs=f"{rm}.data_ptr<float>(), {rv}.data_ptr<float>()" if rm else "nullptr, nullptr", v4=v4,
        eps=c_float(spec.eps), momentum=c_float(spec.momentum), groups=spec.groups,
        group_geometry=render("batch_stats/binding_groups.cpp", name=name, groups=spec.groups) if spec.groups else "")
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";\n" + per_sm_sig + ";",
        python_args=tuple(names),
        notes=(
            "batch_norm statistics: Welford partials per (channel, part of the batch), merged per channel; "
            "the running statistics updated in place (unbiased variance)",
            "blocks along a channel's contiguous values (NCHW) or across 32 channels (channel stride 1)",
        ),
    )


def _channel_load(spec: BatchStatsSpec, k: int) -> str:
    """Channel operand k loaded once a thread: the prologue's own a{k}, or for group statistics
    ch{k}, which only channels-last rows use (kernel.cu's group_plane_loads pick a{k} per value)."""
    load = f"ks_ld(p{k} + ks_offset(d{k}, c * g.S))"
    return f"const float ch{k} = ROWS ? {load} : 0.f;" if spec.groups else f"const float a{k} = {load};"


def _running_checks(name: str, rm: str | None, rv: str | None, channels: str) -> str:
    return "\n  ".join(
        f'TORCH_CHECK({t}.numel() == {channels} && {t}.is_contiguous(), "{name}: running statistics of ", '
        f'ks_str({t}.numel()), " values for ", ks_str({channels}), " channels");' for t in (rm, rv) if t)


def emit_batch_stats_merge(spec: BatchStatsMergeSpec) -> KernelSource:
    name = check_identifier(spec.name)
    names = [t.name for t in spec.inputs]
    running = [n for n in (spec.running_mean, spec.running_var) if n is not None]
    if not 1 <= spec.parts <= BATCH_STATS_MERGE_MAX_PARTS:
        raise ValueError(f"{name}: {spec.parts} parts (1 to {BATCH_STATS_MERGE_MAX_PARTS})")
    if len(running) == 1:
        raise ValueError(f"{name}: running_mean and running_var come together")
    if len(names) != spec.parts + 1 + len(running) or (running and names[-len(running):] != running):
        raise ValueError(f"{name}: inputs are the parts' statistics, the sizes tensor, then the running statistics")
    if any(t.dtype != "float32" for t in spec.inputs[:spec.parts] + spec.inputs[spec.parts + 1:]):
        raise ValueError(f"{name}: statistics must be float32")
    if not 0.0 <= spec.momentum <= 1.0 or spec.eps < 0:
        raise ValueError(f"{name}: momentum {spec.momentum} / eps {spec.eps} out of range")
    launcher_sig = (f"void {name}_launch(const KsBnMergeParts& parts, float* stats, float* running_mean, "
                    "float* running_var, int64_t C, float eps, float momentum, float unbias, cudaStream_t stream)")
    rm, rv = (f"in_{spec.parts + 1}", f"in_{spec.parts + 2}") if running else (None, None)
    binding = render(
        "batch_stats/merge_binding.cpp", name=name, parts=str(spec.parts),
        cparams=", ".join(f"at::Tensor in_{k}" for k in range(len(names))),
        part_ptrs=", ".join(f"&in_{k}" for k in range(spec.parts)),
        running_checks=_running_checks(name, rm, rv, "C"),
        running_ptrs=f"{rm}.data_ptr<float>(), {rv}.data_ptr<float>()" if rm else "nullptr, nullptr",
        eps=c_float(spec.eps), momentum=c_float(spec.momentum))
    return KernelSource(
        function=name, cuda=render("batch_stats/merge.cu", name=name, launcher_sig=launcher_sig),
        binding=binding, launcher_decl=launcher_sig + ";", python_args=tuple(names),
        notes=("batch_norm statistics of a concatenation: its parts' statistics side by side, the running "
               "statistics updated in place (a thread a channel)",),
    )
