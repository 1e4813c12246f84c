"""Triangle emitter: torch.triu / torch.tril (any diagonal) of the value the elementwise ops
before it compute (prologue), in one pass over the [.., R, C] output: the kept triangle is
computed where it is stored, the rest written as zeros without being read (cuda/triangle/)."""

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
from kernelstitch.agents.plan.kernel_spec import TriangleSpec

KEEP = {"triu": ">=", "tril": "<="}  # col - row against the diagonal


def emit_triangle(spec: TriangleSpec) -> KernelSource:
    name = check_identifier(spec.name)
    if spec.kind not in KEEP:
        raise ValueError(f"{name}: unknown triangle kind {spec.kind!r}")
    launcher_sig = (f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, "
                    "int64_t n, int64_t R, int64_t C, cudaStream_t stream)")
    cuda = render(
        "triangle/kernel.cu", name=name, kind=spec.kind, diagonal=int(spec.diagonal), keep=KEEP[spec.kind],
        out_t=CUDA_TYPE[spec.out_dtype], launcher_sig=launcher_sig,
        **one_pass_operands(name, spec.inputs, spec.prologue, spec.prologue_out, "masked"),
    )
    binding = render(
        "triangle/binding.cpp", name=name, kind=spec.kind,
        out_dtype=TORCH_DTYPE[spec.out_dtype], **binding_operands(name, spec.inputs),
    )
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(f"{spec.kind} (diagonal {spec.diagonal}) with its prologue fused: 4 outputs a thread, "
               "the zeroed part never read",
               "operands through run-time descriptors"),
    )
