"""Scan emitter: torch.cumsum / torch.cumprod along one dim, forward or reversed, inclusive or
exclusive (each result leaves its own position out), with the
elementwise ops before it (prologue: `x * mask` of a masked cumulative sum) in the same kernel,
so the scanned value is never stored (cuda/scan/).

The binding views the broadcast shape as [outer, R, inner] at run time: a warp per row when the
dim is the contiguous one (lane-local scans, a shuffle scan of the lane totals, a carry between
128-value chunks), else a thread per column walking R.  Accumulation is fp32 whatever the storage
type, as torch accumulates half-precision scans.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    TORCH_DTYPE,
    binding_operands,
    check_identifier,
    one_pass_operands,
)
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import ScanSpec

COMBINE = {"sum": ("a + b", "0.0f"), "prod": ("a * b", "1.0f")}


def emit_scan(spec: ScanSpec) -> KernelSource:
    name = check_identifier(spec.name)
    if spec.kind not in COMBINE:
        raise ValueError(f"{name}: unknown scan kind {spec.kind!r}")
    operands = one_pass_operands(name, spec.inputs, spec.prologue, spec.prologue_out, "scanned")
    combine, identity = COMBINE[spec.kind]
    launcher_sig = (f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, "
                    "int64_t outer, int64_t R, int64_t inner, cudaStream_t stream)")
    cuda = render(
        "scan/kernel.cu", name=name, kind=spec.kind, reverse_note=", reversed" if spec.reverse else "",
        exclusive_note=", exclusive" if spec.exclusive else "",
        combine=combine, identity=identity, out_t=CUDA_TYPE[spec.out_dtype], **operands,
        reverse="true" if spec.reverse else "false", exclusive="true" if spec.exclusive else "false",
        launcher_sig=launcher_sig,
    )
    binding = render(
        "scan/binding.cpp", name=name, kind=spec.kind, dim=int(spec.dim),
        out_dtype=TORCH_DTYPE[spec.out_dtype], **binding_operands(name, spec.inputs),
    )
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(
            f"cumulative {spec.kind}{' (reversed)' if spec.reverse else ''}{' (exclusive)' if spec.exclusive else ''} "
            "with its prologue fused: "
            "a warp per contiguous row (shuffle scan, chunk carry), a thread per column otherwise",
            "fp32 accumulation; operands through run-time descriptors",
        ),
    )
